"""``wheelforge init --no-run``: setup.py read without running it (setuppy.py, Python's ast),
as the SetupRun the child would give (record/setuprun.py), so that setuprecord.py reads both."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from wheelforge.adoption.doors.setuppy import scan_setup_py
from wheelforge.adoption.doors.setuprecord import read_record
from wheelforge.adoption.record.captured import CapturedBuild
from wheelforge.adoption.record.setuprun import ExtensionArgs, SetupArgs, SetupRun


def read_setup(root: Path) -> CapturedBuild:
    scan = scan_setup_py(root / "setup.py")
    record = SetupRun(
        setup=SetupArgs.given(scan.setup_args) if scan.setup_args else None,
        extensions=tuple(
            ExtensionArgs(
                name=e.name,
                kind=e.kind,
                where=f"setup.py:{e.line}",
                sources=tuple(e.sources),
                include_dirs=tuple(e.include_dirs),
                cxx_args=tuple(e.cxx_flags),
                nvcc_args=tuple(e.nvcc_flags),
                libraries=tuple(e.libraries),
                library_dirs=tuple(e.library_dirs),
                extra_link_args=tuple(e.link_flags),
            )
            for e in scan.extensions
        ),
    )
    build = read_record(root, record, front_door="setup.py (read)")
    return dataclasses.replace(build, hand=tuple(scan.notes) + build.hand)
