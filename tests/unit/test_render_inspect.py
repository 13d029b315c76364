"""inspect's table: a binary's PTX ISA, and what it tells (the release and the driver)."""

from __future__ import annotations

import io

from rich.console import Console

from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.cli.inspect_screen import print_inspect


def _entry(kind: str, arch: str, version: str) -> FatbinEntry:
    return FatbinEntry(kind=kind, arch=arch, sm=90, variant="", container=0, offset=0,  # type: ignore[arg-type]
                       stored_size=8, size=8, compression="none", version=version)  # fmt: skip


def _shown(*entries: FatbinEntry) -> str:
    out = io.StringIO()
    print_inspect(
        [BinaryContents(path="x.so", size=1, entries=entries)], Console(file=out, width=80)
    )
    return out.getvalue()


def test_the_ptx_isa_names_the_release_and_the_driver_that_can_jit_it() -> None:
    text = _shown(_entry("sass", "sm_90", "1.8"), _entry("ptx", "compute_90", "8.4"))
    assert "PTX ISA 8.4 (CUDA 12.4): JIT needs driver >= 550.54.14" in text
    assert "PTX ISA 9.0 (CUDA 13.0)" in _shown(_entry("ptx", "compute_90", "9.0"))
    assert "PTX ISA 42.0" in _shown(_entry("ptx", "compute_90", "42.0"))  # no release writes it
    assert "PTX ISA" not in _shown(_entry("sass", "sm_90", "1.8"))
