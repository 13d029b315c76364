"""Which wheel is a variant's (issue 21): `wheelforge test` after a failed build tested the
previous wheel and said "passed"; two variants whose wheels share a name were both reported
passed while one wheel was tested twice; a second build with other --archs into the same --out
replaced the first's wheel silently."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from wheelforge.build import variant as build
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import fsutil
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.packaging import stamp
from wheelforge.packaging import testwheels as running_test
from wheelforge.toolchain import envs

from .conftest import GOOD_MATRIX
from .fakes import plan_for

Project = Callable[..., Path]
WHEEL = "demo_ops-1.2.0-cp310-abi3-linux_x86_64.whl"


def _published(tmp_path: Path, variant: str, data: bytes) -> Path:
    wheel = tmp_path / "dist" / WHEEL
    wheel.parent.mkdir(parents=True, exist_ok=True)
    wheel.write_bytes(data)
    stamp.write(tmp_path / "build" / variant, digest="d", wheel=wheel)
    return wheel


def _outcomes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Project
) -> list[running_test.Outcome]:
    matrix = load_matrix(project(GOOD_MATRIX + "tests: {path: csrc}\n"))
    env = envs.TestEnv(
        spec=envs.EnvSpec(torch="2.13.0"),
        path=tmp_path / "env",
        python=Path("/x"),
        torch="2.13.0+cpu",
        cuda=False,
        created=False,
    )
    monkeypatch.setattr(envs, "ensure_env", lambda spec, cache: env)
    monkeypatch.setattr(envs, "install_wheel", lambda env, wheel, name: None)
    tested: list[str] = []

    def suite(env: envs.TestEnv, tests: object, *, variant: str) -> running_test.Outcome:
        tested.append(variant)
        return running_test.Outcome(
            env="torch 2.13.0",
            torch=env.torch,
            cuda=False,
            variant=variant,
            status="passed",
            passed=1,
        )

    monkeypatch.setattr(running_test, "run_suite", suite)
    wheels = running_test.built_wheels(matrix, tmp_path / "build", tmp_path / "dist", ())
    outcomes = running_test.run_tests(
        matrix=matrix, wheels=wheels, specs=[envs.EnvSpec(torch="2.13.0")], cache=tmp_path / "c"
    )
    assert tested == [o.variant for o in outcomes if o.status == "passed"]
    return outcomes


def test_a_failed_build_is_an_error_not_the_older_wheels_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Project
) -> None:
    _published(tmp_path, "default-cu130", b"the wheel of yesterday's build")
    stamp.fail(tmp_path / "build" / "default-cu130", "compiling ops.cpp failed")
    outcomes = _outcomes(tmp_path, monkeypatch, project)
    assert [(o.variant, o.status) for o in outcomes] == [("default-cu130", "error")]
    assert "its last build failed (compiling ops.cpp failed)" in (outcomes[0].detail or "")
    with pytest.raises(
        VerificationError,
        match=r"1 of 1 test runs did not pass; .*: error \(its last build failed \(compiling ops.cpp failed\)",
    ):
        running_test.require_passed(outcomes)


def test_a_wheel_replaced_since_is_no_longer_its_variants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Project
) -> None:
    _published(tmp_path, "sm80-cu130", b"built for 8.0")
    _published(tmp_path, "sm90-cu130", b"built for 9.0: same name, other bytes")
    outcomes = _outcomes(tmp_path, monkeypatch, project)
    assert [(o.variant, o.status) for o in outcomes] == [("sm90-cu130", "passed")]  # once


def test_another_variants_wheel_is_never_replaced_silently(
    tmp_path: Path, project: Project
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    theirs = _published(tmp_path, "sm80-cu130", b"built for 8.0")
    made = tmp_path / "stage" / WHEEL
    made.parent.mkdir()
    made.write_bytes(b"built for 9.0")
    with pytest.raises(ConfigError, match="is the wheel variant sm80-cu130 published, and variant"):
        build._refuse_to_replace(theirs, made, plan)
    made.write_bytes(b"built for 8.0")  # the same bytes: nothing is replaced
    build._refuse_to_replace(theirs, made, plan)
    stamp.fail(tmp_path / "build" / "sm80-cu130", "x")  # no longer published by anyone
    made.write_bytes(b"built for 9.0")
    build._refuse_to_replace(theirs, made, plan)  # replaced, with a warning


def test_a_file_removed_while_the_build_runs_is_a_failed_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Project
) -> None:
    """Issue 21: a source deleted mid-build ended in a FileNotFoundError traceback."""
    from wheelforge.foundation.errors import BuildError

    plan = plan_for(load_matrix(project()), tmp_path)
    gone = tmp_path / "csrc" / "ops.cpp"

    def vanished(*_args: object, **_kwargs: object) -> object:
        gone.unlink()
        return fsutil.sha256(gone)  # what packing does with every input

    monkeypatch.setattr(build, "_build_variant", vanished)
    settings = SimpleNamespace(cache_dir=tmp_path / "cache")
    failure = build.build_variant(plan, None, settings)  # type: ignore[arg-type]
    assert isinstance(failure.error, BuildError)  # type: ignore[union-attr]
    assert f"{gone} was removed while the build ran" in failure.error.message  # type: ignore[union-attr]
    assert stamp.read(plan.build_dir).failed  # type: ignore[union-attr]
