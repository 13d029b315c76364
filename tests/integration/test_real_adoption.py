"""Issue 40 items 1 and 4 on real projects nobody here wrote, at init level (nothing compiles):

- NATTEN 0.21.7 and torch_scatter 2.1.2 (PyPI sdists): the METADATA wheelforge writes from the
  matrix ``wheelforge init`` wrote equals, field by field, the METADATA setuptools' own
  prepare_metadata_for_build_wheel writes (NATTEN: [project] with a version setup.py reads and
  setup(url=) as Home-page; torch_scatter: setup.cfg [metadata] under setup()'s author, url,
  download_url and extras_require). torch_scatter's Requires-Python (>=3.8) is left out on
  purpose: the wheels are cp310 and up, and init says so.
- simple-knn and apex (GitHub tarballs of one commit each, or local copies named below): adopted as they are; the wheel's
  Python files are those setuptools' build_py packs (apex: none of its tests or examples).

`network`: downloads (PyPI, GitHub); skips where they can't be had.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.helpers import (
    metadata_differences,
    needs_nvcc,
    setuptools_metadata,
    wheelforge,
)
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.packaging.wheel import core_metadata
from wheelforge.planning import selection

pytestmark = pytest.mark.network

# $WHEELFORGE_SIMPLE_KNN_TARBALL / $WHEELFORGE_APEX_TARBALL may name a local copy of the tarball
# (`git archive --prefix=x/ COMMIT | gzip`), where GitHub can't be reached.
GITHUB = {
    "simple-knn": "https://github.com/camenduru/simple-knn/archive/60f461f4a56b7967e5d8045bf92f8c33f36976d0.tar.gz",
    "apex": "https://github.com/NVIDIA/apex/archive/6424da3b4faa6c8f062da4a48c424fff3f02d42d.tar.gz",
}


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data: bytes = response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        pytest.skip(f"{url} can't be downloaded here (offline?): {exc}")
    return data


def _unpack(data: bytes, name: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / name).write_bytes(data)
    with tarfile.open(dest / name) as tar:
        tar.extractall(dest / "src", filter="data")
    [root] = (dest / "src").iterdir()
    return root


def _sdist(project: str, version: str, dest: Path) -> Path:
    """*project* *version*'s sdist from PyPI, its sha256 checked, unpacked."""
    releases = json.loads(_get(f"https://pypi.org/pypi/{project}/json"))["releases"]
    [entry] = [f for f in releases[version] if f["packagetype"] == "sdist"]
    data = _get(entry["url"])
    assert hashlib.sha256(data).hexdigest() == entry["digests"]["sha256"]
    return _unpack(data, entry["filename"], dest)


def _ours(root: Path) -> str:
    matrix = load_matrix(root / "matrix.yaml")
    package = matrix.package
    return core_metadata(
        package, matrix.requires_python, version=package.version, torch_requirement=None
    )


@pytest.mark.parametrize(
    ("project", "version", "env", "on_purpose"),
    [
        ("natten", "0.21.7", {"NATTEN_CUDA_ARCH": "8.0"}, {}),
        (
            "torch-scatter",
            "2.1.2",
            {"FORCE_CUDA": "1"},
            {
                "ours only": [("requires-python", ">=3.10")],
                "theirs only": [("requires-python", ">=3.8")],
            },
        ),
    ],
)
def test_init_writes_the_metadata_setuptools_writes(
    tmp_path: Path, project: str, version: str, env: dict[str, str], on_purpose: dict[str, object]
) -> None:
    pytest.importorskip("torch")  # both setup.py import it, for setuptools as for init
    root = _sdist(project, version, tmp_path / "get")
    # setuptools first, in a copy of its own (init writes into the tree it adopts).
    theirs_root = _sdist(project, version, tmp_path / "theirs")
    no_cuda = dict.fromkeys(env, "") | {"FORCE_ONLY_CPU": "1"}  # no extension: METADATA alone
    theirs = setuptools_metadata(theirs_root, tmp_path / "md", no_cuda)
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root, env=env)
    assert run.code == 0, run.err + run.out
    differences = metadata_differences(theirs, _ours(root))
    assert differences == {
        "ours only": [],
        "theirs only": [],
        "body differs": False,
        **on_purpose,
    }
    if project == "torch-scatter":
        assert "requires-python: left '>=3.8' out" in run.err


_BUILD_PY = (
    "import os, shutil, sys, runpy, setuptools, torch.utils.cpp_extension as c; "
    "c.CUDA_HOME = c.CUDA_HOME or os.path.dirname(os.path.dirname(shutil.which('nvcc'))); "
    "c.CUDAExtension = c.CppExtension = "
    "lambda *a, **k: setuptools.Extension(k.get('name') or a[0], ['x.c']); "
    "sys.argv = ['setup.py', 'build_py', '--build-lib', sys.argv[1]]; "
    "runpy.run_path('setup.py', run_name='__main__')"
)


def _build_py(root: Path, lib: Path) -> set[str]:
    """The files setuptools' build_py packs for *root* (its extensions stubbed out: torch's
    CUDAExtension() needs a CUDA torch even where nothing compiles)."""
    subprocess.run([sys.executable, "-c", _BUILD_PY, str(lib)], cwd=root, check=True,
                   capture_output=True, env={**os.environ})  # fmt: skip
    return {p.relative_to(lib).as_posix() for p in lib.rglob("*") if p.is_file()}


@needs_nvcc  # apex's setup.py runs nvcc -V
@pytest.mark.parametrize(
    ("project", "env", "extension"),
    [
        ("simple-knn", {}, "simple_knn._C"),
        ("apex", {"APEX_CPP_EXT": "1", "APEX_CUDA_EXT": "1"}, "apex_C"),
    ],
)
def test_adopted_as_is_with_the_python_files_setuptools_packs(
    tmp_path: Path, project: str, env: dict[str, str], extension: str
) -> None:
    pytest.importorskip("torch")
    local = os.environ.get(f"WHEELFORGE_{project.replace('-', '_').upper()}_TARBALL")
    data = Path(local).read_bytes() if local else _get(GITHUB[project])
    root = _unpack(data, f"{project}.tar.gz", tmp_path / "get")
    theirs = _build_py(_unpack(data, f"{project}.tar.gz", tmp_path / "theirs"), tmp_path / "lib")
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root, env=env)
    assert run.code == 0, run.err + run.out
    matrix = load_matrix(root / "matrix.yaml")
    assert extension in {e.name for e in matrix.extensions}
    ours = {m.path for m in selection.project_files(matrix).members}
    assert ours == theirs
    if project == "apex":
        assert len(ours) > 100
        assert not any(p.startswith(("examples/", "tests/")) for p in ours)
    else:
        assert ours == set()  # no packages=: the extension lands in a folder of its own
    dry = wheelforge("build", "--dry-run", cwd=root)
    assert dry.code == 0, dry.err + dry.out
