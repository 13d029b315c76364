"""Cached torch environments: one per torch build and base Python, shared by every venv, by the
build and by the test runs; found by the build they really hold."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.toolchain import envs


def test_every_venv_of_one_python_shares_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = envs.EnvSpec(torch="2.14.1", requires=("pytest",))
    monkeypatch.setattr(sys, "executable", "/tmp/clone-a/.venv/bin/python")
    first = envs._key(spec)
    monkeypatch.setattr(sys, "executable", "/tmp/clone-b/.venv/bin/python")
    assert envs._key(spec) == first
    assert first.startswith("torch-2.14.1-")


def test_another_base_python_or_torch_gets_its_own_but_requirements_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requirements are installed into the one environment of a torch (issue 20: the build and
    `wheelforge test` keyed by their requirement lists held three copies of torch 2.14.1)."""
    spec = envs.EnvSpec(torch="2.14.1", requires=("pytest",))
    first = envs._key(spec)
    assert envs._key(envs.EnvSpec(torch="2.13.0", requires=("pytest",))) != first
    assert envs._key(envs.EnvSpec(torch="2.14.1", requires=("pytest", "numpy"))) == first
    assert envs._key(envs.EnvSpec(torch="2.14.1", cuda=True)) == first
    monkeypatch.setattr(sys, "base_prefix", "/opt/python3.12")
    assert envs._key(spec) != first


def test_a_borrowed_torch_is_keyed_by_its_interpreter() -> None:
    one = envs._key(envs.EnvSpec(torch_from=Path("/opt/a/bin/python")))
    other = envs._key(envs.EnvSpec(torch_from=Path("/opt/b/bin/python")))
    assert one != other
    assert one.startswith("torch-from-")


def _made(cache: Path, torch: str, cuda_build: str | None, requires: tuple[str, ...] = ()) -> Path:
    spec = envs.EnvSpec(torch=torch.split("+", maxsplit=1)[0])
    path = cache / envs.ENVS / envs._name(spec, torch)
    (path / "bin").mkdir(parents=True)
    info = {"spec": spec.torch, "made_from": envs._made_from(spec), "requires": list(requires),
            "torch": torch, "cuda_build": cuda_build, "cuda": False, "python": "3.11"}  # fmt: skip
    (path / envs.MARKER).write_text(json.dumps(info))
    return path


def test_an_environment_is_found_by_the_build_it_holds(tmp_path: Path) -> None:
    cpu = _made(tmp_path, "2.13.0+cpu", None)
    assert cpu.name.startswith("torch-2.13.0+cpu-")
    # A CPU build answers a test run, not a build with .cu sources (issue 20: it was reused).
    assert envs.find(envs.EnvSpec(torch="2.13.0"), tmp_path) == cpu
    assert envs.find(envs.EnvSpec(torch="2.13.0", cuda=True), tmp_path) is None
    cuda = _made(tmp_path, "2.13.0+cu130", "13.0")
    assert envs.find(envs.EnvSpec(torch="2.13.0", cuda=True), tmp_path) == cuda
    assert envs.find(envs.EnvSpec(torch="2.13.0"), tmp_path) == cuda  # a CUDA build serves both
    assert envs.find(envs.EnvSpec(torch="2.13.0+cpu"), tmp_path) == cpu  # a local label: exactly
    assert envs.find(envs.EnvSpec(torch="2.13.1"), tmp_path) is None
    assert envs.find(envs.EnvSpec(torch="2.1"), tmp_path) is None  # not a prefix match


def test_a_cpu_build_from_pip_is_replaced_by_the_plain_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip prefers a local 2.13.0+cpu wheel to PyPI's 2.13.0 (a local label sorts higher);
    with .cu sources wheelforge asks for torch===2.13.0, PyPI's CUDA build, and names the
    environment after what it got."""
    asked: list[str] = []
    builds = {"torch==2.13.0": ("2.13.0+cpu", None), "torch===2.13.0": ("2.13.0+cu130", "13.0")}
    state: dict[str, tuple[str, str | None]] = {}
    monkeypatch.setattr(
        envs.proc, "run", lambda argv, **k: Path(argv[-1]).mkdir(parents=True)
    )  # venv
    monkeypatch.setattr(envs, "_pip_torch", lambda spec, python, req: (asked.append(req), state.update(now=builds[req])))  # fmt: skip
    monkeypatch.setattr(envs, "_probe", lambda python: {"torch": state["now"][0], "cuda_build": state["now"][1],
                                                         "cuda": False, "python": "3.11"})  # fmt: skip
    env = envs.ensure_env(envs.EnvSpec(torch="2.13.0", cuda=True), tmp_path)
    assert asked == ["torch==2.13.0", "torch===2.13.0"]
    assert env.created and env.torch == "2.13.0+cu130" and env.cuda_build == "13.0"
    assert env.path.name.startswith("torch-2.13.0+cu130-")
    said = " ".join("".join(capsys.readouterr()).split())
    assert f"torch 2.13.0+cu130, Python 3.11: made in 0:00, {env.path.name}" in said  # its folder
    again = envs.ensure_env(envs.EnvSpec(torch="2.13.0"), tmp_path)  # a test run: the same one
    assert again.path == env.path and not again.created

    builds["torch===2.14.1"] = builds["torch==2.14.1"] = ("2.14.1+cpu", None)
    with pytest.raises(
        EnvironmentProblem, match=r"torch 2.14.1\+cpu here, a CPU build.*--torch-from"
    ):
        envs.ensure_env(envs.EnvSpec(torch="2.14.1", cuda=True), tmp_path)
    assert [p.name for p in (tmp_path / envs.ENVS).iterdir() if p.is_dir()] == [env.path.name]


def test_requirements_are_added_once_with_torch_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _made(tmp_path, "2.14.1+cu130", "13.0", requires=("pytest",))
    calls: list[tuple[str, ...]] = []

    def pip(python: Path, *args: object, what: str) -> None:
        constraint = Path(str(args[args.index("-c") + 1]))
        calls.append((constraint.read_text().strip(), *map(str, args[args.index("-c") + 2 :])))

    monkeypatch.setattr(envs, "pip", pip)
    spec = envs.EnvSpec(torch="2.14.1", requires=("pytest", "numpy"))
    assert envs.ensure_env(spec, tmp_path).path == path
    assert calls == [("torch==2.14.1+cu130", "numpy")]
    assert json.loads((path / envs.MARKER).read_text())["requires"] == ["pytest", "numpy"]
    envs.ensure_env(spec, tmp_path)
    assert len(calls) == 1
