"""Proof across releases: one wheel of the bundled kernels, its CPU tests under every torch the
stable-ABI target admits. Slow (five torch environments of ~3 GB each on first use, reused from
~/.cache/wheelforge afterwards): deselected by default, run with `pytest -m slow`."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.test_build import only_wheel, wheelforge

RELEASES = ("2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.1")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.network,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH"),
    pytest.mark.skipif(
        sys.version_info[:2] != (3, 11), reason="the torch 2.13.0 wheel on this machine is cp311"
    ),
]


def test_one_wheel_passes_its_cpu_tests_under_every_release(tmp_path: Path) -> None:
    root = tmp_path / "p"
    shutil.copytree(
        REPO / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
    assert wheelforge("build", "--archs", "8.0", cwd=root).code == 0
    args = [a for v in RELEASES for a in ("--torch", v)]
    run = wheelforge("test", "--json", "--wheel", only_wheel(root / "dist"), *args, cwd=root)
    runs = {r["torch"].split("+")[0]: r for r in json.loads(run.out)["runs"]} if run.out else {}
    assert set(runs) == set(RELEASES), run.err
    for version, outcome in runs.items():
        assert outcome["status"] == "passed", (version, outcome)
        assert outcome["failed"] == 0 and outcome["passed"] >= 70, (version, outcome)
