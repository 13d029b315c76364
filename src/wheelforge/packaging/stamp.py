"""The reuse stamp: ``wheel.json`` in a variant's build folder names the wheel the last build of
it published, the digest of the inputs it was made from, and the wheel's sha256. A build whose
inputs match reuses that wheel (running/build.py); ``wheelforge test`` finds the built wheels
through the stamps (running/torch_tests.py). This module is the stamp's only reader and writer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from wheelforge.foundation import fsutil

REUSE_STAMP = "wheel.json"  # names the published wheel a build may reuse
sha256 = fsutil.sha256  # a wheel's, as the stamp records it (its callers in running/ name it so)


@dataclass(frozen=True, kw_only=True)
class Stamp:
    build_dir: Path  # the variant's build folder; its name is the variant's id
    wheel: str  # the wheel's file name in the output folder
    digest: str  # of the inputs the wheel was made from (packaging/wheel.py)
    sha256: str  # of the wheel as published
    index: str = ""  # the index folder (cu124) inside the output folder it was published to, if any


def read(build_dir: Path) -> Stamp | None:
    try:
        data = json.loads((build_dir / REUSE_STAMP).read_text(encoding="utf-8"))
        return Stamp(
            build_dir=build_dir,
            wheel=str(data["wheel"]),
            digest=str(data.get("digest", "")),
            sha256=str(data.get("sha256", "")),
            index=str(data.get("index", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(build_dir: Path, *, digest: str, wheel: Path, index: str | None = None) -> None:
    stamp = {"digest": digest, "wheel": wheel.name, "sha256": sha256(wheel)}
    if index:
        stamp["index"] = index
    fsutil.write_if_changed(build_dir / REUSE_STAMP, json.dumps(stamp, indent=2) + "\n")


def forget(build_dir: Path) -> None:
    """Drop the stamp: the published wheel is no longer this build's to reuse."""
    (build_dir / REUSE_STAMP).unlink(missing_ok=True)


def reusable(build_dir: Path, out_dir: Path, digest: str) -> Path | None:
    """The wheel already in the output folder *out_dir* (its index folder, when it has one), if
    it was made from exactly these inputs."""
    stamp = read(build_dir)
    if stamp is None or stamp.digest != digest:
        return None
    published = out_dir / stamp.wheel
    if not published.is_file():
        return None
    return published if sha256(published) == stamp.sha256 else None


def stamps(build_root: Path) -> Iterator[Stamp]:
    """The stamps of every variant built under *build_root*, by variant id."""
    for path in sorted(build_root.glob(f"*/{REUSE_STAMP}")):
        stamp = read(path.parent)
        if stamp is not None:
            yield stamp
