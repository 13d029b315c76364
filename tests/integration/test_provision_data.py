"""The provisioning facts are still true where they come from: every wheel data/cuda-pypi.json
pins is on PyPI, not yanked, with the sha256 it records, and the file is what tools/cuda_pypi.py
writes from PyPI now (a newer cuda-toolkit of a release, or a release's packages appearing,
means: rerun the tool); every package a Debian recipe of the release table names is in its
suite's package lists, at the version it pins."""

from __future__ import annotations

import json
import lzma
import sys
import urllib.request
from importlib import resources

import pytest

from tests import REPO
from wheelforge.configuration import releases
from wheelforge.configuration.releases import DebianSource
from wheelforge.toolchain import provision

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


def _debian_versions(suite: str, component: str) -> dict[str, set[str]]:
    """Package -> versions in Debian's *suite*/*component* for amd64 (its Packages index)."""
    url = f"http://deb.debian.org/debian/dists/{suite}/{component}/binary-amd64/Packages.xz"
    with urllib.request.urlopen(url, timeout=120) as response:
        text = lzma.decompress(response.read()).decode("utf-8", "replace")
    found: dict[str, set[str]] = {}
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if "Package" in fields and "Version" in fields:
            found.setdefault(fields["Package"], set()).add(fields["Version"])
    return found


def test_every_debian_package_is_in_its_suite_at_its_version() -> None:
    debian = [
        (r.version, how)
        for r in releases.releases()
        for how in r.provision
        if isinstance(how, DebianSource)
    ]
    assert debian and {v for v, _ in debian} <= {r.release for r in provision.RECIPES}
    for release, how in debian:
        index: dict[str, set[str]] = {}
        for component in how.components:
            for name, versions in _debian_versions(how.suite, component).items():
                index.setdefault(name, set()).update(versions)
        for package in how.packages:
            name, _, version = package.partition("=")
            assert name in index, f"CUDA {release}: Debian {how.suite} has no {name}"
            if version:
                assert version in index[name], (
                    f"CUDA {release}: Debian {how.suite} has {name} {sorted(index[name])}, "
                    f"not {version}"
                )
