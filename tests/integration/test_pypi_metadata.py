"""METADATA PyPI takes, on real input (configuration/coremetadata.py): released wheels from
PyPI pass `check`'s pypi-metadata rule and packaging's validation alike, and a real project
adopted by `wheelforge init` from its PyPI sdist (torch-sparse, whose 73-character summary main
folded over two lines) gets METADATA that PyPI takes, checked before anything compiles.

`network`: out of the default run, in CI's network step; skips cleanly offline."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.metadata import Metadata

from tests.integration.helpers import wheelforge
from tests.unit.fakes import plan_for
from wheelforge.binaries import abicheck
from wheelforge.configuration import coremetadata
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.packaging import wheel

pytestmark = pytest.mark.network

_OFFLINE = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "No matching distribution found",
    "Could not find a version",
    "Network is unreachable",
)
# Small released wheels of the CUDA stack (a few MB in all), each from another builder; the
# 2022 ones carry setuptools' License-File under Metadata-Version 2.1, which twine uploads.
RELEASED = (
    "nvidia-cuda-runtime-cu12==12.9.79",
    "nvidia-nvtx-cu12==12.9.79",
    "ninja==1.13.2",
    "nvidia-cuda-runtime-cu11==11.7.99",
    "ninja==1.10.2",
)


def _download(dest: Path, *args: str) -> list[Path]:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
         "-d", str(dest), *args],
        capture_output=True, text=True,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        if any(marker in output for marker in _OFFLINE):
            pytest.skip(f"{args[-1]} can't be downloaded here (offline?)")
        pytest.fail(f"pip download {' '.join(args)} failed:\n{output[-3000:]}")
    return sorted(dest.iterdir())


def _metadata(path: Path) -> str:
    with zipfile.ZipFile(path) as zf:
        [member] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(member).decode()


def test_released_wheels_pass_the_pypi_metadata_rule(tmp_path: Path) -> None:
    wheels = [
        wheel
        for i, requirement in enumerate(RELEASED)  # one at a time: two ninjas are no one install
        for wheel in _download(tmp_path / str(i), "--only-binary", ":all:", requirement)
    ]
    # torch's own wheel, where this machine keeps one (pip's find-links)
    wheels += sorted(Path("/opt/wheels").glob("torch-*.whl"))[:1]
    assert len(wheels) >= len(RELEASED)
    for path in wheels:
        text = _metadata(path)
        assert coremetadata.problems(text) == (), path.name
        checks = abicheck.check_wheel(path, torch=None, guards={})
        assert [v for c in checks for v in c.violations if v.rule == "pypi-metadata"] == []


def test_torch_sparse_adopted_by_init_gets_metadata_pypi_takes(tmp_path: Path) -> None:
    """torch-sparse 0.6.18's sdist (its setup.py imports torch: this environment's, so no
    isolated build downloads one), adopted by init; its METADATA, as the build writes it, is
    one PyPI takes, and the dry run (which checks it before any compile) passes."""
    [sdist] = _download(
        tmp_path / "sdist", "--no-binary", ":all:", "--no-build-isolation", "torch-sparse==0.6.18"
    )
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / "torch_sparse-0.6.18"
    init = wheelforge("init", cwd=root)
    assert init.code == 0, init.err
    matrix = load_matrix(root / "matrix.yaml")
    summary = matrix.package.summary
    assert len(summary) > 70  # main folded it: "'summary' must be a single line"
    text = wheel.metadata_text(plan_for(matrix, tmp_path / "plan"))
    assert f"Summary: {summary}\n" in text
    assert Metadata.from_email(text, validate=True).summary == summary
    assert coremetadata.problems(text) == ()
    dry = wheelforge("build", "--dry-run", cwd=root, env={"TORCH_CUDA_ARCH_LIST": "9.0"})
    assert dry.code == 0, dry.err
    # A newline in a URL is refused by the same dry run, before anything compiles.
    text = (root / "matrix.yaml").read_text()
    # setup(url=) is Home-page, as setuptools writes it (package.home-page)
    evil = text.replace(
        "home-page: https://github.com/rusty1s/pytorch_sparse",
        'home-page: "https://github.com/rusty1s/pytorch_sparse\\nX-Evil: 1"',
    )
    assert evil != text
    (root / "matrix.yaml").write_text(evil)
    bad = wheelforge("build", "--dry-run", cwd=root, env={"TORCH_CUDA_ARCH_LIST": "9.0"})
    assert bad.code == 2 and "package.home-page" in bad.err and "one line" in bad.err, bad.err
