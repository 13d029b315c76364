"""data/cuda-pypi.json is still true: every wheel it pins is on PyPI, not yanked, with the sha256
it records, and the file is what tools/cuda_pypi.py writes from PyPI now (a newer cuda-toolkit
of a release, or a release's packages appearing, means: rerun the tool)."""

from __future__ import annotations

import json
import sys
from importlib import resources

import pytest

from tests import REPO

pytestmark = pytest.mark.network

sys.path.insert(0, str(REPO / "tools"))
import cuda_pypi  # noqa: E402

SHIPPED = json.loads(resources.files("wheelforge").joinpath("data/cuda-pypi.json").read_text())


def test_every_pinned_wheel_is_on_pypi_with_its_sha256() -> None:
    assert SHIPPED["releases"]
    for release, entry in SHIPPED["releases"].items():
        for name, pin in entry["packages"].items():
            files = cuda_pypi.project(name)["releases"].get(pin["version"], [])
            [wheel] = [f for f in files if f["filename"] == pin["wheel"]] or [None]
            assert wheel is not None, f"CUDA {release}: PyPI has no {pin['wheel']}"
            assert not wheel.get("yanked"), f"CUDA {release}: {pin['wheel']} is yanked"
            assert wheel["digests"]["sha256"] == pin["sha256"], pin["wheel"]


def test_the_file_is_what_pypi_says_now() -> None:
    assert cuda_pypi.text_of(cuda_pypi.generate()) == cuda_pypi.OUT.read_text(), (
        "rerun: python tools/cuda_pypi.py"
    )
