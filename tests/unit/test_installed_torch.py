"""`torch: installed` and --torch-from: an unstable-ABI build against a torch already installed
(no pip, no network), as release boxes and images with torch baked in have it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.settings import Flags, TestFlags, resolve, resolve_test
from wheelforge.foundation.errors import ConfigError

from .conftest import GOOD_MATRIX

Project = Callable[[str], Path]
UNSTABLE = GOOD_MATRIX.replace('torch: ">=2.10"', "abi: unstable\ntorch: installed") + (
    "tests:\n  path: csrc\n"
)


def test_installed_is_the_build_pythons_torch(project: Project) -> None:
    path = project(UNSTABLE)
    matrix = load_matrix(path)
    assert matrix.torch.installed and matrix.torch.versions == ()
    assert matrix.tests is not None and matrix.tests.torch == ()
    settings = resolve(Flags(matrix=path, python=sys.executable))
    assert settings.torch_from == Path(sys.executable)
    assert resolve_test(TestFlags(matrix=path)).torch_from == (Path(sys.executable),)
    assert resolve_test(TestFlags(matrix=path, torch=("2.13.0",))).torch_from == ()


def test_torch_from_replaces_the_matrixs_torch_versions(project: Project) -> None:
    path = project(GOOD_MATRIX.replace('torch: ">=2.10"', "abi: unstable\ntorch: ['2.13.0']"))
    assert resolve(Flags(matrix=path)).torch_from is None
    assert resolve(Flags(matrix=path, torch_from=sys.executable)).torch_from == Path(sys.executable)


def test_installed_and_torch_from_are_for_the_unstable_abi(project: Project) -> None:
    with pytest.raises(ConfigError, match="'installed' is for the unstable ABI"):
        load_matrix(project(GOOD_MATRIX.replace('torch: ">=2.10"', "torch: installed")))
    with pytest.raises(ConfigError, match="--torch-from .*: a stable-ABI build compiles against"):
        resolve(Flags(matrix=project(GOOD_MATRIX), torch_from=sys.executable))
    with pytest.raises(ConfigError, match="or write 'installed' for the build Python's torch"):
        load_matrix(
            project(GOOD_MATRIX.replace('torch: ">=2.10"', "abi: unstable\ntorch: '>=2.10'"))
        )
