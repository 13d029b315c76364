"""The one walk over a wheel: its member names and METADATA, then each ELF member it is asked
for, inflated once within the caps of bounded.py and parsed once, every fact asked for read from
that one parse (fatbin.py, symbols.py, initexport.py). ``build``, ``check`` and ``inspect`` all
read through it, and get data back (facts.py); the rules then judge that data (abicheck.py)."""

from __future__ import annotations

import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from wheelforge.binaries import bounded, initexport, roles
from wheelforge.binaries.elf import ElfImage, NotRetained, WheelReader, member_name, open_wheel
from wheelforge.binaries.facts import (
    BinaryFacts,
    Fact,
    OwnReader,
    Reading,
    RecordFacts,
    Role,
    WheelFacts,
    role_of,
)
from wheelforge.binaries.fatbin import fatbin_entries, linked_ptx_archs
from wheelforge.binaries.stream import stream_member
from wheelforge.binaries.symbols import parser_raised, read_symbols
from wheelforge.foundation.errors import BinaryFormatError, RuleBug, WheelforgeError

T = TypeVar("T")


def read_binary(
    image: ElfImage,
    role: Role,
    facts: frozenset[Fact],
    own: tuple[OwnReader, ...] = (),
    *,
    reading: Reading | None = None,
) -> BinaryFacts:
    """The *facts* of one ELF image (a file or a wheel member), and what the rules that read
    their own (*own*) read, all from its one parse. With a *reading* that infers roles, *role*
    is only the name's and the role is inferred (roles.py); *own* then follows that role."""
    path = image.member or image.name
    fatbins = tuple(fatbin_entries(image)) if "fatbins" in facts else None
    linked_ptx = linked_ptx_archs(image) if "fatbins" in facts else ()
    symbols = read_symbols(image) if "symbols" in facts else None
    init = None
    if "init-export" in facts and (leaf := initexport.module_leaf(path)):
        init = initexport.init_export(image, leaf=leaf)
    reason = ""
    if reading is not None and reading.roles:
        verdict = roles.infer(path, symbols, init)
        role, reason = verdict.role, verdict.reason
        own = reading.own_of(role)
    own_facts = tuple((rule_id, _own_fact(rule_id, read, image)) for rule_id, read in own)
    return BinaryFacts(
        name=image.name,
        member=image.member,
        role=role,
        role_reason=reason,
        size=image.size,
        fatbins=fatbins,
        linked_ptx=linked_ptx,
        symbols=symbols,
        init_export=init,
        own_facts=own_facts,
    )


def _own_fact(rule_id: str, read: Callable[[ElfImage], object], image: ElfImage) -> object:
    """What the rule *rule_id* reads of *image* itself: the parser's errors say the file is
    unreadable (BinaryFormatError), anything else the rule's code raises is a bug in the rule."""
    try:
        return read(image)
    except WheelforgeError:
        raise
    except Exception as exc:
        if parser_raised(exc):
            raise BinaryFormatError(image.name, None, f"not a readable ELF file: {exc}") from None
        raise RuleBug(rule_id, image.name, exc) from exc


def read_member(
    wheel: WheelReader,
    info: zipfile.ZipInfo,
    read: Callable[[ElfImage], T],
    *,
    fatbins: bool,
    digests: dict[str, tuple[str, int]] | None = None,
) -> T:
    """*read* of the ELF member *info*, from one streamed pass that keeps only what readers need
    (stream.py); when *read* asks for bytes that pass did not keep, from the member inflated
    whole, as every member was read before. With *digests*, the member's RECORD digest and size
    go there, from the same pass."""
    name = member_name(wheel.path, info.filename)
    kept, scan = stream_member(wheel.zip, info, name, fatbins=fatbins, digest=digests is not None)
    if digests is not None and kept.sha256 is not None:
        digests[info.filename] = (bounded.record_digest_of(kept.sha256), kept.size)
    try:
        with ElfImage(name, kept, member=info.filename, scan=scan) as image:
            return read(image)
    except NotRetained:
        pass
    del kept, scan
    whole = bounded.read_member(wheel.zip, info, name)
    with ElfImage(name, whole, member=info.filename) as image:
        return read(image)


def read_wheel(path: Path, reading: Reading) -> WheelFacts:
    """One walk over the wheel at *path*: what *reading* asks for, and no more."""
    with open_wheel(path) as wheel:
        metadata_member = wheel.dist_info_member("METADATA")
        metadata = None
        if reading.metadata and metadata_member:
            metadata = wheel.read_headers(metadata_member)  # never its long description
        unsafe = set() if reading.unsafe_members else set(bounded.unsafe_member_names(wheel.names))

        def skip(member: str) -> bool:
            return member in unsafe or not reading.reads_member(member)

        binaries = []
        inflated: dict[str, tuple[str, int]] | None = {} if reading.record else None
        for info in wheel.elf_infos(skip=skip):
            role = role_of(info.filename)
            facts = reading.facts_of(info.filename)

            def read(
                image: ElfImage, role: Role = role, facts: frozenset[Fact] = facts
            ) -> BinaryFacts:
                return read_binary(image, role, facts, reading.own_of(role), reading=reading)

            binaries.append(
                read_member(wheel, info, read, fatbins="fatbins" in facts, digests=inflated)
            )
        return WheelFacts(
            path=path,
            names=tuple(wheel.names),
            tagged_name=wheel.tagged_name,
            metadata_member=metadata_member,
            metadata=metadata,
            binaries=tuple(binaries),
            record=_record(wheel, inflated) if inflated is not None else None,
        )


def _record(wheel: WheelReader, inflated: dict[str, tuple[str, int]]) -> RecordFacts:
    """RECORD's text and what every member hashes to (within the caps), for the layout rule;
    the ELF members were inflated once already (*inflated*), the others are hashed now."""
    member = wheel.dist_info_member("RECORD")
    text = wheel.read_text(member) if member else None
    digests = []
    for info in wheel.zip.infolist():
        if info.filename.endswith("/"):
            continue
        known = inflated.get(info.filename)
        name = member_name(wheel.path, info.filename)
        digest, size = known or bounded.member_digest(wheel.zip, info, name)
        digests.append((info.filename, digest, size))
    counts = Counter(wheel.names)
    return RecordFacts(
        member=member,
        text=text,
        digests=tuple(digests),
        duplicates=tuple(sorted(n for n, c in counts.items() if c > 1)),
    )
