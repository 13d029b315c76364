"""The one walk over a wheel: its member names and METADATA, then each ELF member it is asked
for, inflated once within the caps of bounded.py and parsed once, every fact asked for read from
that one parse (fatbin.py, symbols.py, initexport.py). ``build``, ``check`` and ``inspect`` all
read through it, and get data back (facts.py); the rules then judge that data (abicheck.py)."""

from __future__ import annotations

from pathlib import Path

from wheelforge.binaries import bounded, initexport
from wheelforge.binaries.elf import ElfImage, open_wheel
from wheelforge.binaries.facts import (
    BinaryFacts,
    Fact,
    OwnReader,
    Reading,
    Role,
    WheelFacts,
    role_of,
)
from wheelforge.binaries.fatbin import fatbin_entries
from wheelforge.binaries.symbols import parse_errors, read_symbols
from wheelforge.foundation.errors import BinaryFormatError


def read_binary(
    image: ElfImage, role: Role, facts: frozenset[Fact], own: tuple[OwnReader, ...] = ()
) -> BinaryFacts:
    """The *facts* of one ELF image (a file or a wheel member), and what the rules that read
    their own (*own*) read, all from its one parse."""
    fatbins = tuple(fatbin_entries(image)) if "fatbins" in facts else None
    symbols = read_symbols(image) if "symbols" in facts else None
    init = None
    if "init-export" in facts and (leaf := initexport.module_leaf(image.member or image.name)):
        init = initexport.init_export(image, leaf=leaf)
    try:
        own_facts = tuple((rule_id, read(image)) for rule_id, read in own)
    except parse_errors() as exc:
        raise BinaryFormatError(image.name, None, f"not a readable ELF file: {exc}") from None
    return BinaryFacts(
        name=image.name,
        member=image.member,
        role=role,
        size=image.size,
        fatbins=fatbins,
        symbols=symbols,
        init_export=init,
        own_facts=own_facts,
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
            binaries.append(read_binary(image, role, reading.of(role), reading.own_of(role)))
        return WheelFacts(
            path=path,
            names=tuple(wheel.names),
            tagged_name=wheel.tagged_name,
            metadata_member=metadata_member,
            metadata=metadata,
            binaries=tuple(binaries),
        )
