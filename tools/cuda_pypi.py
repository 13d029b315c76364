"""Regenerate src/wheelforge/data/cuda-pypi.json: for each CUDA release the release table
provisions from PyPI, the exact version of every package its recipe installs, as PyPI has them.

    python tools/cuda_pypi.py            # rewrite the file from PyPI's JSON API
    python tools/cuda_pypi.py --check    # exit 1 when the file is not what PyPI says now

Which version goes with a release is NVIDIA's word, not a version pattern: the newest final
``cuda-toolkit`` metapackage of the release (``cuda-toolkit 13.5.0``) pins each component
(``nvidia-cuda-nvcc==13.5.37.*``); nvidia-cuda-cccl does not follow the CUDA version (CUDA
13.4 and 13.5 pin ``nvidia-cuda-cccl==13.3.*`` versions: CCCL's own number follows), so
``==13.5.*`` finds nothing. Each pin is resolved to the newest version PyPI holds that is not
yanked and has a manylinux x86_64 wheel. A release whose metapackage is missing or pins none of
a package, or whose pinned version has no such wheel, is written under ``unavailable`` with the
reason: wheelforge neither lists nor chooses it (toolchain/provision.py).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from wheelforge.configuration import releases  # noqa: E402
from wheelforge.configuration.releases import PypiSource  # noqa: E402

OUT = ROOT / "src" / "wheelforge" / "data" / "cuda-pypi.json"
API = "https://pypi.org/pypi/{}/json"
METAPACKAGE = "cuda-toolkit"
PLATFORM = "manylinux x86_64"  # the wheels wheelforge provisions: Linux x86_64 (glibc)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        data: bytes = response.read()
    return data


def project(name: str) -> dict[str, Any]:
    """PyPI's JSON document of the project *name*."""
    loaded: dict[str, Any] = json.loads(get(API.format(name)))
    return loaded


def _final(version: str) -> Version | None:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return None
    return None if parsed.is_prerelease or parsed.is_devrelease else parsed


def _live(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in files if not f.get("yanked")]


def metapackage_pins(meta: Mapping[str, Any], release: str) -> tuple[str, dict[str, Requirement]]:
    """The newest final cuda-toolkit of *release* ("13.5") and its pins by package name (from
    its wheel's METADATA; the JSON API's requires_dist is the newest version's only)."""
    key = releases.release_key(release)
    versions = [
        (parsed, v)
        for v, files in meta["releases"].items()
        if (parsed := _final(v)) and (parsed.major, parsed.minor) == key and _live(files)
    ]
    if not versions:
        raise LookupError(f"PyPI has no final {METAPACKAGE} {release}.x")
    _, version = max(versions)
    wheel = next(f for f in _live(meta["releases"][version]) if f["filename"].endswith(".whl"))
    data = get(urllib.parse.urljoin(API.format(METAPACKAGE), wheel["url"]))
    if hashlib.sha256(data).hexdigest() != wheel["digests"]["sha256"]:
        raise LookupError(f"{wheel['filename']}: its sha256 is not the one PyPI lists")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = Parser().parsestr(zf.read(name).decode())
    pins: dict[str, Requirement] = {}
    for line in headers.get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        pins.setdefault(canonicalize_name(requirement.name), requirement)
    return f"{METAPACKAGE} {version}", pins


def _linux_x86_64(filename: str) -> bool:
    if not filename.endswith(".whl"):
        return False
    _, _, _, tags = parse_wheel_filename(filename)
    return any(t.platform.startswith("manylinux") and t.platform.endswith("_x86_64") for t in tags)


def resolve(doc: Mapping[str, Any], requirement: Requirement) -> dict[str, Any]:
    """The newest version of *doc*'s project that *requirement* admits, with a live manylinux
    x86_64 wheel: its version, the wheel's file name, sha256 and size."""
    candidates = []
    for version, files in doc["releases"].items():
        parsed = _final(version)
        if parsed is None or not requirement.specifier.contains(parsed):
            continue
        wheels = [f for f in _live(files) if _linux_x86_64(f["filename"])]
        if wheels:
            candidates.append((parsed, version, wheels[0]))
    if not candidates:
        raise LookupError(f"PyPI has no {requirement} with a {PLATFORM} wheel")
    _, version, wheel = max(candidates, key=lambda c: c[0])
    return {
        "version": version,
        "wheel": wheel["filename"],
        "sha256": wheel["digests"]["sha256"],
        "size": wheel["size"],
    }


def _release(
    meta: Mapping[str, Any],
    release: str,
    names: tuple[str, ...],
    docs: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """*release*'s entry: its metapackage and each of *names* resolved (LookupError: one is
    missing)."""
    metapackage, pins = metapackage_pins(meta, release)
    packages = {}
    for name in names:
        pin = pins.get(canonicalize_name(name))
        if pin is None:
            raise LookupError(f"{metapackage} pins no {name}")
        doc = docs.setdefault(name, project(name))
        packages[name] = resolve(doc, Requirement(f"{name}{pin.specifier}"))
    return {"metapackage": metapackage, "packages": packages}


def generate() -> dict[str, Any]:
    """The file's content, from PyPI now."""
    meta = project(METAPACKAGE)
    docs: dict[str, dict[str, Any]] = {}
    available: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    for entry in releases.releases():
        sources = [s for s in entry.provision if isinstance(s, PypiSource)]
        if not sources:
            continue
        try:
            available[entry.version] = _release(meta, entry.version, sources[0].packages, docs)
        except LookupError as exc:
            unavailable[entry.version] = str(exc)
    return {
        "about": (
            "Generated by tools/cuda_pypi.py from PyPI's JSON API: per CUDA release, the exact "
            "version of each package its PyPI recipe installs (the release's cuda-toolkit "
            f"metapackage's pins, a {PLATFORM} wheel each). Do not edit; rerun the tool."
        ),
        "platform": PLATFORM,
        "releases": available,
        "unavailable": unavailable,
    }


def text_of(content: Mapping[str, Any]) -> str:
    return json.dumps(content, indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    text = text_of(generate())
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is not what PyPI says now; rerun {__file__}")
            return 1
        print(f"{OUT.relative_to(ROOT)} matches PyPI")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
