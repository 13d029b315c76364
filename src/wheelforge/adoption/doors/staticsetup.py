"""``wheelforge init --no-run``: setup.py read without running it (setuppy.py,
Python's ast), in the shape of setup_child.py's record so that setuprecord.py reads both."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from wheelforge.adoption.doors.setuppy import scan_setup_py
from wheelforge.adoption.doors.setuprecord import read_record
from wheelforge.adoption.record.captured import CapturedBuild


def read_setup(root: Path) -> CapturedBuild:
    scan = scan_setup_py(root / "setup.py")
    extensions: list[dict[str, Any]] = [
        {
            "name": e.name,
            "kind": e.kind,
            "where": f"setup.py:{e.line}",
            "sources": e.sources,
            "include_dirs": e.include_dirs,
            "extra_compile_args": {"cxx": e.cxx_flags, "nvcc": e.nvcc_flags},
            "libraries": e.libraries,
            "library_dirs": e.library_dirs,
            "extra_link_args": e.link_flags,
            "py_limited_api": e.py_limited_api,
        }
        for e in scan.extensions
    ]
    record: dict[str, Any] = {
        "setup_calls": [scan.setup_args] if scan.setup_args else [],
        "extensions": extensions,
    }
    build = read_record(root, record, front_door="setup.py (read)")
    return dataclasses.replace(build, hand=tuple(scan.notes) + build.hand)
