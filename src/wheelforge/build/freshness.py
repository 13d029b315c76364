"""Deciding that a variant's build is up to date without starting ninja.

After a successful ninja run, wheelforge records a stamp beside build.ninja: the hash of the
ninja file (every command line lives in it) and the size and mtime of every input (sources,
the generated files, the compilers) and every header ninja recorded for them, plus every
output. The next build is up to date when the ninja file it writes has the same hash and no
recorded file changed; anything else runs ninja, which decides as usual.

The headers come from ``ninja -t deps``, ninja's public view of its own deps log, read once
after each build that ran: the binary ``.ninja_deps`` format is private to ninja and changes
between versions (v3 → v4), so it is not parsed here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from wheelforge.build import ninja
from wheelforge.foundation import log, readers, removal, writers
from wheelforge.foundation.document import from_document, to_document
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain import probecache

UP_TO_DATE_STAMP = "up-to-date.json"  # says ninja has nothing to do


@dataclass(frozen=True, kw_only=True)
class FreshnessStamp:
    """up-to-date.json: the ninja file's hash, every watched file's stat, and what the compiles
    read (for the wheel's provenance: no second ``ninja -t deps``)."""

    ninja: str
    files: Mapping[str, probecache.Stat]
    read: tuple[str, ...] | None = field(default=None, metadata={"omit_if_none": True})
    # The build folder it was made in: the files it names are absolute, so in a build folder
    # copied with its project (cp -a, a CI cache restored elsewhere) they are the old
    # project's, and the wheel's SBOM would name those (issue 39).
    folder: str | None = field(default=None, metadata={"omit_if_none": True})


_said: set[Path] = set()  # the folders whose stamp of another folder -v has named


def _stamp(plan: VariantPlan) -> FreshnessStamp | None:
    """The stamp, None when there is none, it is not of FreshnessStamp's shape or it was made
    in another folder (a stamp is only ever a shortcut: then ninja decides, and writes it
    again)."""
    text = stamp_text(plan)
    try:
        stamp = from_document(FreshnessStamp, json.loads(text)) if text else None
    except (ValueError, RecursionError):  # DocumentError too
        return None
    if stamp is not None and stamp.folder != str(plan.build_dir):
        if plan.build_dir not in _said:
            _said.add(plan.build_dir)
            log.detail(
                f"{plan.build_dir / UP_TO_DATE_STAMP} was made in {stamp.folder or 'another folder'}: "
                "ninja decides what is up to date"
            )
        return None
    return stamp


def ninja_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _stamp_path(plan: VariantPlan) -> Path:
    return plan.build_dir / UP_TO_DATE_STAMP


def up_to_date(plan: VariantPlan, ninja_text: str) -> bool:
    """Whether the last build of exactly this ninja file left nothing to do."""
    stamp = _stamp(plan)
    return (
        stamp is not None
        and stamp.ninja == ninja_hash(ninja_text)
        and probecache.unchanged(stamp.files)
    )


def stamp_text(plan: VariantPlan) -> str | None:
    """The stamp as written (None: there is none): it changes whenever an input or output does."""
    try:
        return readers.read_text(_stamp_path(plan), cap=readers.STATE_CAP)
    except (OSError, readers.FileRefused):
        return None


def recorded_inputs(plan: VariantPlan) -> list[Path] | None:
    """Every file the last build read (sources and the headers ninja recorded), from the stamp;
    None without one (then ``ninja -t deps`` answers, build/ninja.py inputs())."""
    stamp = _stamp(plan)
    return [Path(p) for p in stamp.read] if stamp is not None and stamp.read is not None else None


def forget(plan: VariantPlan) -> None:
    """Drop the stamp before ninja runs, so a failed or interrupted build leaves none behind."""
    removal.remove(_stamp_path(plan), within=plan.build_dir)


def record(plan: VariantPlan, ninja_text: str, started_ns: int) -> None:
    """Stamp a build that ninja just finished. An input modified after the build started
    may not be in the outputs, so then no stamp is written and the next build runs ninja."""
    deps = ninja.deps(plan, check=False)
    if deps is None:
        return
    headers = {d for ds in deps.values() for d in ds}
    read = headers | {str(s.source) for s in plan.compile.steps}
    # The shared folder's objects, which the links read (planning/hostshare.py), and what its
    # compiles read (its own stamp, written just before; else its deps log)
    own = {s.object for s in plan.compile.steps}
    shared = {str(o) for link in plan.links for o in link.objects if o not in own}
    if plan.host is not None:
        read |= {str(p) for p in recorded_inputs(plan.host) or ninja.inputs(plan.host)}
    inputs = read | shared | {str(g.path) for g in plan.compile.generated}
    inputs |= {plan.compile.cxx, plan.compile.cc, plan.compile.nvcc_host, str(plan.compile.nvcc)}
    # What the generate steps read; their outputs (written during this build) are outputs.
    inputs |= {str(i) for edge in plan.compile.generate for i in edge.inputs}
    written = {str(o) for edge in plan.compile.generate for o in edge.outputs}
    watched = probecache.fingerprint(sorted(inputs - written))
    if any(st is None or st[1] > started_ns for st in watched.values()):
        return
    outputs = [*(s.object for s in plan.compile.steps), *(k.library for k in plan.links)]
    outputs += [Path(o) for o in sorted(written)]
    watched |= probecache.fingerprint(outputs)
    # "read": what the compiles read, for the wheel's provenance (no second ninja -t deps)
    stamp = FreshnessStamp(
        ninja=ninja_hash(ninja_text),
        files=watched,
        read=tuple(sorted(read)),
        folder=str(plan.build_dir),
    )
    writers.write_if_changed(_stamp_path(plan), json.dumps(to_document(stamp), indent=1) + "\n")
