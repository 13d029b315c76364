"""The bundled kernels as a PEP 517 project: kernels/pyproject.toml and kernels/matrix.yaml, and
the repository root's matrix.yaml, which must describe the same build."""

from __future__ import annotations

import dataclasses
import sys

from tests import REPO
from wheelforge import DISTRIBUTION
from wheelforge.configuration.matrix.load import load_matrix

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_the_two_matrices_describe_the_same_build() -> None:
    root = load_matrix(REPO / "matrix.yaml")
    kernels = load_matrix(REPO / "kernels" / "matrix.yaml")
    # Resolved paths (packages, include folders, tests) are the same files.
    same = ("path", "root", "extension", "extensions")
    assert dataclasses.replace(root, **{k: getattr(kernels, k) for k in same}) == kernels
    assert (
        dataclasses.replace(root.extension, sources=kernels.extension.sources) == kernels.extension
    )
    assert [s.archs for s in root.extension.sources] == [s.archs for s in kernels.extension.sources]
    globs = lambda m: sorted(p for s in m.extension.sources for p in m.root.glob(s.pattern))  # noqa: E731
    assert globs(root) == globs(kernels) and globs(root)


def test_kernels_pyproject_names_the_backend_and_the_matrix() -> None:
    with (REPO / "kernels" / "pyproject.toml").open("rb") as f:
        pyproject = tomllib.load(f)
    assert pyproject["build-system"]["build-backend"] == "wheelforge.build_meta"
    assert DISTRIBUTION in pyproject["build-system"]["requires"]
    assert (REPO / "kernels" / pyproject["tool"]["wheelforge"]["matrix"]).is_file()
