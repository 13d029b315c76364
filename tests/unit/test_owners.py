"""The single owners of facts that several stages use (docs/architecture.md, "Who owns which
fact"): arch renderings, which archs a release builds, the provisioning policy, default
folders and flag values, the reuse stamp, and the verdicts of check and test."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.binaries import checkwheels as running_check
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.rule import Violation
from wheelforge.configuration import settings
from wheelforge.configuration.archs import Arch, code_sort_key, sm_range
from wheelforge.foundation.errors import (
    ConfigError,
    EnvironmentProblem,
    VerificationError,
    first_and_rest,
)
from wheelforge.packaging import stamp
from wheelforge.packaging import testwheels as running_test
from wheelforge.toolchain.choice import ToolkitChoice, ensure_toolkit
from wheelforge.toolchain.provision import recipe_for
from wheelforge.toolchain.toolkits import release_builds

from .fakes import CUDA13, CUDA118, toolkit

Project = Callable[..., Path]


def test_arch_renderings() -> None:
    arch = Arch(9, 0, "a")
    assert (arch.sm, arch.sass, arch.ptx, str(arch)) == (90, "sm_90a", "compute_90a", "9.0a")
    assert Arch.from_sm(121) == Arch(12, 1)
    assert Arch.from_code("sm_100f") == Arch(10, 0, "f")
    assert Arch.from_code("compute_90") == Arch(9, 0)
    assert Arch.from_code("lto_90") is None
    codes = ["sm_120", "sm_90a", "sm_100f", "sm_90", "sm_100"]
    assert sorted(codes, key=code_sort_key) == ["sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120"]
    assert sm_range({120, 75, 90}) == "sm_75 to sm_120"
    assert sm_range(()) == "no archs"


@pytest.mark.parametrize(
    ("release", "sass", "arch", "builds"),
    [
        ("13.0", CUDA13, Arch(9, 0, "a"), True),
        ("13.0", CUDA13, Arch(7, 0), False),
        ("11.8", CUDA118, Arch(7, 0), True),
        ("11.8", CUDA118, Arch(9, 0, "a"), False),  # arch-specific code arrived with 12.0
        ("12.8", CUDA13, Arch(10, 0, "f"), False),  # family-specific with 12.9
        ("12.9", CUDA13, Arch(10, 0, "f"), True),
    ],
)
def test_release_builds_is_the_one_rule(
    release: str, sass: tuple[int, ...], arch: Arch, builds: bool
) -> None:
    assert release_builds(Version(release), frozenset(sass), arch) is builds
    assert toolkit(f"{release}.0", sass).supports(arch) is builds
    recipe = recipe_for(release)
    if recipe is not None:
        assert recipe.supports(arch) is builds


def test_offline_refuses_to_provision_and_names_the_arch(tmp_path: Path) -> None:
    recipe = recipe_for("11.8")
    assert recipe is not None
    choice = ToolkitChoice(toolkit=None, recipe=recipe)
    with pytest.raises(EnvironmentProblem, match=r"variant v needs CUDA 11.8.*for 7.0 \(sm_70\)"):
        ensure_toolkit(
            choice, who="variant v", archs=[Arch(7, 0)], found=[toolkit()], cache=tmp_path,
            offline=True,
        )  # fmt: skip
    found = ToolkitChoice(toolkit=toolkit(), recipe=None)
    assert (
        ensure_toolkit(found, who="v", archs=[Arch(7, 0)], found=[], cache=tmp_path, offline=True)
        is found
    )


def test_default_folders_and_test_settings(project: Project, tmp_path: Path) -> None:
    path = project(project().read_text() + "tests:\n  path: demo_ops\n  torch: ['2.13.0']\n")
    s = settings.resolve_test(settings.TestFlags(matrix=path))
    root = path.parent.resolve()
    assert (s.out_dir, s.build_root) == (root / "dist", root / "build" / "wheelforge")
    assert s.torch == ("2.13.0",) and s.torch_from == ()
    python = Path(sys.executable)
    s = settings.resolve_test(
        settings.TestFlags(
            matrix=path, torch_from=(str(python), python.name), cache_dir=tmp_path / "c"
        )
    )
    # A path, or a command name found on the PATH, as --python takes it.
    assert s.torch == () and s.torch_from[0] == python.absolute()
    assert s.torch_from[1] == Path(shutil.which(python.name) or "")
    assert s.cache_dir == (tmp_path / "c").resolve()
    for bad, why in (
        ("no-such-python-here", "no such command on the PATH"),
        (str(tmp_path), "is a folder"),
    ):
        with pytest.raises(ConfigError, match=f"--torch-from .*{why}"):
            settings.resolve_test(settings.TestFlags(matrix=path, torch_from=(bad,)))
    with pytest.raises(ConfigError, match="has no 'tests' section"):
        settings.resolve_test(settings.TestFlags(matrix=project()))


def test_flag_values() -> None:
    assert settings.torch_floor_flag("2.10") == (2, 10)
    assert settings.torch_floor_flag(None) is None
    assert settings.python_abi_flag("cp311") == (3, 11)
    with pytest.raises(ConfigError, match="'--target': '2' is not a torch version"):
        settings.torch_floor_flag("2")
    with pytest.raises(ConfigError, match="'--python-abi': 'py3' is not like cp310"):
        settings.python_abi_flag("py3")


def test_reuse_stamp(tmp_path: Path) -> None:
    build, out = tmp_path / "build" / "default-cu130", tmp_path / "dist"
    build.mkdir(parents=True)
    out.mkdir()
    wheel = out / "x-1.0-cp310-abi3-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    assert stamp.read(build) is None
    stamp.write(build, digest="d1", wheel=wheel)
    assert stamp.reusable(build, out, "d1") == wheel
    assert stamp.reusable(build, out, "d2") is None
    assert [(s.build_dir.name, s.wheel) for s in stamp.stamps(tmp_path / "build")] == [
        ("default-cu130", wheel.name)
    ]
    wheel.write_bytes(b"other")  # replaced since: not the stamped wheel
    assert stamp.reusable(build, out, "d1") is None


def test_first_and_rest() -> None:
    assert first_and_rest(["a"]) == ("a", None)
    assert first_and_rest(["a", "b", "c"], prefix="v: ") == ("v: a (and 2 more above)", "b\nc")


def _check(*messages: str) -> BinaryCheck:
    violations = tuple(
        Violation(binary="x.so", rule="cxx-symbol", symbol=None, message=m) for m in messages
    )
    return BinaryCheck(
        path="x.so", shims=(), newest_shim=None, python_symbols=(), violations=violations
    )


def test_check_verdict() -> None:
    running_check.require_clean(running_check.result_of([_check()]))
    with pytest.raises(VerificationError, match=r"^one \(and 1 more above\)$") as err:
        running_check.require_clean(running_check.result_of([_check("one"), _check("two")]))
    assert err.value.details == "two"


def test_test_verdict() -> None:
    def outcome(status: running_test.Status) -> running_test.Outcome:
        return running_test.Outcome(
            env="torch 2.13.0", torch="2.13.0", cuda=False, variant="v", status=status
        )

    running_test.require_passed([outcome("passed"), outcome("unavailable")])
    with pytest.raises(VerificationError, match="1 of 2 test runs did not pass"):
        running_test.require_passed([outcome("passed"), outcome("failed")])
    with pytest.raises(VerificationError, match="no test run took place"):
        running_test.require_passed([outcome("unavailable")])
