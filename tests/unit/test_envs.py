"""Where cached torch environments live: one per torch and base Python, shared by every venv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wheelforge.toolchain import envs


def test_every_venv_of_one_python_shares_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = envs.EnvSpec(torch="2.14.1", requires=("pytest",))
    monkeypatch.setattr(sys, "executable", "/tmp/clone-a/.venv/bin/python")
    first = envs._key(spec)
    monkeypatch.setattr(sys, "executable", "/tmp/clone-b/.venv/bin/python")
    assert envs._key(spec) == first
    assert first.startswith("torch-2.14.1-")


def test_another_base_python_or_torch_or_requirement_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = envs.EnvSpec(torch="2.14.1", requires=("pytest",))
    first = envs._key(spec)
    assert envs._key(envs.EnvSpec(torch="2.13.0", requires=("pytest",))) != first
    assert envs._key(envs.EnvSpec(torch="2.14.1", requires=("pytest", "numpy"))) != first
    monkeypatch.setattr(sys, "base_prefix", "/opt/python3.12")
    assert envs._key(spec) != first


def test_a_borrowed_torch_is_keyed_by_its_interpreter() -> None:
    one = envs._key(envs.EnvSpec(torch_from=Path("/opt/a/bin/python")))
    other = envs._key(envs.EnvSpec(torch_from=Path("/opt/b/bin/python")))
    assert one != other
    assert one.startswith("torch-from-")
