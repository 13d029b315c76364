"""Proof across releases: one wheel of the bundled kernels, its CPU tests under every torch the
stable-ABI target admits. Slow (five torch environments of ~3 GB each on first use, reused from
~/.cache/wheelforge afterwards): deselected by default and in CI, run with `pytest tests -m sweep`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.helpers import (
    copy_kernels,
    needs_local_torch_wheel,
    needs_nvcc,
    only_wheel,
    wheelforge,
)

RELEASES = ("2.10.0", "2.11.0", "2.12.0", "2.13.0", "2.14.1")

pytestmark = [
    pytest.mark.sweep,
    pytest.mark.network,
    needs_nvcc,
    needs_local_torch_wheel,
]


def test_one_wheel_passes_its_cpu_tests_under_every_release(tmp_path: Path) -> None:
    root = copy_kernels(tmp_path / "p")
    assert wheelforge("build", "--archs", "8.0", cwd=root).code == 0
    args = [a for v in RELEASES for a in ("--torch", v)]
    run = wheelforge("test", "--json", "--wheel", only_wheel(root / "dist"), *args, cwd=root)
    runs = {r["torch"].split("+")[0]: r for r in json.loads(run.out)["runs"]} if run.out else {}
    assert set(runs) == set(RELEASES), run.err
    for version, outcome in runs.items():
        assert outcome["status"] == "passed", (version, outcome)
        assert outcome["failed"] == 0 and outcome["passed"] >= 70, (version, outcome)
