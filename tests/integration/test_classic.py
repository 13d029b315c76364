"""Classic (unstable-ABI) extensions on CUDA builds of torch (issue 20), with the classic-ops
project of tests/integration/projects/ (torch/extension.h, pybind11, a kernel on ATen's current
stream through ATen/cuda/CUDAContext.h, whose cusparse.h only the torch environment has).

It is `slow` and `network` (a CUDA torch of gigabytes, minutes of nvcc): run it with
`pytest -m "slow and network" tests/integration/test_classic.py`. The environments go to the user's cache,
where `wheelforge test` and later builds reuse them (one per torch build)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import Run, wheelforge
from wheelforge.foundation.cachehome import default_cache
from wheelforge.toolchain import envs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.network,  # a CUDA build of torch 2.14.1 (on this machine's disk; elsewhere PyPI)
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH"),
]
PROJECT = Path(__file__).resolve().parent / "projects" / "classic-ops"


def _project(tmp: Path, matrix: str) -> Path:
    root = tmp / "classic-ops"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "matrix.yaml").write_text(matrix)
    return root


def _offline(prefix: list[str], *args: str | Path, cwd: Path, env: dict[str, str]) -> Run:
    """wheelforge run behind *prefix* (a namespace without network), pip pointed nowhere."""
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "wheelforge", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200", **env},
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _no_network() -> list[str]:
    """A command prefix that runs without any network (a new network namespace), if this
    machine allows one; else pip is pointed at an address nothing listens on."""
    if shutil.which("unshare") and subprocess.run(["unshare", "--net", "true"]).returncode == 0:
        return ["unshare", "--net"]
    return []


def test_an_offline_build_against_an_installed_cuda_torch(tmp_path: Path) -> None:
    """torch: installed, --offline, no network: no pip, no environment made; the 12.4 variant
    of another CUDA major than the installed torch's is left out before anything is
    provisioned; the wheel passes check (the unstable ABI's rules) and its tests there."""
    try:  # the "installed" torch: a CUDA build of torch 2.14.1 (on this machine's disk)
        installed = envs.ensure_env(envs.EnvSpec(torch="2.14.1", requires=("pytest",), cuda=True), default_cache())  # fmt: skip
    except Exception as exc:  # no index, no local wheels: nothing to test against
        pytest.skip(f"no CUDA build of torch 2.14.1 to install here: {exc}")
    text = (PROJECT / "matrix.yaml").read_text()
    text = text.replace(
        'torch: ["2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.1"]', "torch: installed"
    )
    root = _project(tmp_path, text.replace('"8.0 9.0+PTX"', '"9.0"'))
    offline = _no_network()
    env = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "", "PIP_EXTRA_INDEX_URL": ""}  # fmt: skip
    run = _offline(offline, "build", "--offline", "--python", installed.python,
                   "--cache-dir", tmp_path / "cache", cwd=root, env=env)  # fmt: skip
    assert run.code == 0, run.err
    assert "variant default-cu124-torch214 left out: torch 2.14.1+cu130 is CUDA 13.0's" in run.err
    said = run.out + run.err  # the package, then its extension by its dotted name
    assert "import check: import classic_ops ok under torch 2.14.1+cu130" in said
    assert "; import classic_ops._C ok under torch 2.14.1+cu130" in said
    [wheel] = (root / "dist" / "cu130").glob("classic_ops-1.0.0-cp311-cp311-*.whl")
    assert not (tmp_path / "cache" / "envs").exists()  # no environment made, no pip run
    checked = wheelforge("check", "--json", wheel, cwd=root)
    assert checked.code == 0, checked.err
    doc = json.loads(checked.out)
    assert {b["abi"] for b in doc["binaries"]} == {"unstable"}
    assert doc["wheels"][0]["requires"]["torch"] == "torch==2.14.*"
    tested = _offline(offline, "test", "--json", "--torch-from", installed.python,
                      "--cache-dir", tmp_path / "cache", cwd=root, env=env)  # fmt: skip
    assert tested.code == 0, tested.err
    [outcome] = json.loads(tested.out)["runs"]
    assert outcome["status"] == "passed", outcome
