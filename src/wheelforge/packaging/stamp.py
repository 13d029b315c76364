"""The reuse stamp: ``wheel.json`` in a variant's build folder names the wheel the last build of
it published, the digest of the inputs it was made from, and the wheel's sha256. A build whose
inputs match reuses that wheel (build/variant.py); ``wheelforge test`` finds the built wheels
through the stamps (packaging/testwheels.py). This module is the stamp's only reader and writer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from wheelforge.foundation import cachefiles, fsutil, removal, writers
from wheelforge.foundation.document import to_document

REUSE_STAMP = "wheel.json"  # names the published wheel a build may reuse


@dataclass(frozen=True, kw_only=True)
class Stamp:
    build_dir: Path  # the variant's build folder; its name is the variant's id
    wheel: str  # the wheel's file name in the output folder
    digest: str  # of the inputs the wheel was made from (packaging/wheel.py)
    sha256: str  # of the wheel as published
    failed: str | None = None  # the last build of the variant failed: its error (wheel: "")
    index: str = ""  # the index folder (cu124) inside the output folder it was published to, if any

    def published(self, out_dir: Path) -> Path | None:
        """The wheel in *out_dir* (its index folder, when it has one) this stamp names, if it is
        still the one published (another build may have replaced it since: then it is no longer
        this variant's)."""
        wheel = out_dir / self.wheel
        if self.failed is not None or not self.wheel or not wheel.is_file():
            return None
        return wheel if fsutil.sha256(wheel) == self.sha256 else None


_OMIT = {"omit_if_none": True}


@dataclass(frozen=True, kw_only=True)
class StampFile:
    """wheel.json as written: a published wheel's (digest, wheel, sha256, its index folder),
    or a failed build's (no wheel, its error)."""

    digest: str = ""
    wheel: str
    sha256: str = ""
    failed: str | None = field(default=None, metadata=_OMIT)
    index: str | None = field(default=None, metadata=_OMIT)


def read(build_dir: Path) -> Stamp | None:
    data = cachefiles.load(
        build_dir / REUSE_STAMP, StampFile, what="the reuse stamp", within=build_dir
    )
    if data is None:
        return None
    return Stamp(
        build_dir=build_dir,
        wheel=data.wheel,
        digest=data.digest,
        sha256=data.sha256,
        failed=data.failed,
        index=data.index or "",
    )


def _write(build_dir: Path, stamp: StampFile) -> None:
    text = json.dumps(to_document(stamp), indent=2) + "\n"
    writers.write_if_changed(build_dir / REUSE_STAMP, text)


def write(build_dir: Path, *, digest: str, wheel: Path, index: str | None = None) -> None:
    sha = fsutil.sha256(wheel)
    _write(build_dir, StampFile(digest=digest, wheel=wheel.name, sha256=sha, index=index or None))


def fail(build_dir: Path, error: str) -> None:
    """Record that the last build of the variant failed (*error*): the wheel an earlier build
    published is no longer its wheel, and `wheelforge test` says so instead of testing it."""
    build_dir.mkdir(parents=True, exist_ok=True)
    _write(build_dir, StampFile(wheel="", failed=error))


def forget(build_dir: Path) -> None:
    """Drop the stamp: the published wheel is no longer this build's to reuse."""
    removal.remove(build_dir / REUSE_STAMP, within=build_dir)


def reusable(build_dir: Path, out_dir: Path, digest: str) -> Path | None:
    """The wheel already in the output folder *out_dir* (its index folder, when it has one), if
    it was made from exactly these inputs."""
    stamp = read(build_dir)
    if stamp is None or stamp.digest != digest:
        return None
    return stamp.published(out_dir)


def publisher(wheel: Path, build_root: Path, *, besides: Path) -> Stamp | None:
    """The stamp of another variant (not *besides*, a build folder) under *build_root* whose
    published wheel *wheel* still is."""
    return next(
        (
            s
            for s in stamps(build_root)
            if s.build_dir != besides and s.published(wheel.parent) == wheel
        ),
        None,
    )


def stamps(build_root: Path) -> Iterator[Stamp]:
    """The stamps of every variant built under *build_root*, by variant id."""
    for path in sorted(build_root.glob(f"*/{REUSE_STAMP}")):
        stamp = read(path.parent)
        if stamp is not None:
            yield stamp
