"""The one walk over a wheel: its member names and METADATA, then each ELF member it is asked
for, inflated once within the caps of bounded.py and parsed once, every fact asked for read from
that one parse (fatbin.py, symbols.py, initexport.py). ``build``, ``check`` and ``inspect`` all
read through it, and get data back (facts.py); the rules then judge that data (abicheck.py)."""

from __future__ import annotations

from pathlib import Path

from wheelforge.binaries import bounded, initexport
from wheelforge.binaries.elf import ElfImage, open_wheel
from wheelforge.binaries.facts import BinaryFacts, Fact, Reading, Role, WheelFacts, role_of
from wheelforge.binaries.fatbin import fatbin_entries
from wheelforge.binaries.symbols import read_symbols


def read_binary(image: ElfImage, role: Role, facts: frozenset[Fact]) -> BinaryFacts:
    """The *facts* of one ELF image (a file or a wheel member), from its one parse."""
    fatbins = tuple(fatbin_entries(image)) if "fatbins" in facts else None
    symbols = read_symbols(image) if "symbols" in facts else None
    init = None
    if "init-export" in facts and (leaf := initexport.module_leaf(image.member or image.name)):
        init = initexport.init_export(image, leaf=leaf)
    return BinaryFacts(
        name=image.name,
        member=image.member,
        role=role,
        size=image.size,
        fatbins=fatbins,
        symbols=symbols,
        init_export=init,
    )


def read_wheel(path: Path, reading: Reading) -> WheelFacts:
    """One walk over the wheel at *path*: what *reading* asks for, and no more."""
    with open_wheel(path) as wheel:
        metadata_member = wheel.dist_info_member("METADATA")
        metadata = None
        if reading.metadata and metadata_member:
            metadata = wheel.read_text(metadata_member)
        unsafe = set() if reading.unsafe_members else set(bounded.unsafe_member_names(wheel.names))

        def skip(member: str) -> bool:
            return member in unsafe or not reading.reads(role_of(member))

        binaries = []
        for image in wheel.elf_members(skip=skip):
            role = role_of(image.member or image.name)
            binaries.append(read_binary(image, role, reading.of(role)))
        return WheelFacts(
            path=path,
            names=tuple(wheel.names),
            tagged_name=wheel.tagged_name,
            metadata_member=metadata_member,
            metadata=metadata,
            binaries=tuple(binaries),
        )
