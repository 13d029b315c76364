"""ElfImage.section_headers, the struct reader of the section header table that the fatbin
reader uses instead of pyelftools (issue 33: pyelftools' import was most of a small
``inspect``): the same sections as pyelftools on real files and on built ones of every class
and byte order, extended numbering included; nonsense is one BinaryFormatError."""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from wheelforge.binaries.elf import SHT_NOBITS, ElfImage, open_elf_file
from wheelforge.foundation.errors import BinaryFormatError

DATA = Path(__file__).resolve().parent.parent / "data"
REAL = sorted(
    p
    for folder in ("fatbin", "released")
    for p in (DATA / folder).iterdir()
    if p.suffix in (".so", ".o")
)


def pyelftools_sections(data: bytes) -> list[tuple[str, bool, int, int]]:
    elf = ELFFile(io.BytesIO(data))
    return [
        (s.name, s["sh_type"] == "SHT_NOBITS", s["sh_offset"], s["sh_size"])
        for s in elf.iter_sections()
    ]


def ours(data: bytes) -> list[tuple[str, bool, int, int]]:
    with ElfImage("x.so", data) as image:
        return [(h.name, h.type == SHT_NOBITS, h.offset, h.size) for h in image.section_headers]


@pytest.mark.parametrize("path", [*REAL, Path(sys.executable).resolve()], ids=lambda p: p.name)
def test_the_sections_pyelftools_reads(path: Path) -> None:
    data = path.read_bytes()
    assert ours(data) == pyelftools_sections(data)
    with open_elf_file(path) as image:  # memory-mapped, as inspect reads files
        assert [h.name for h in image.section_headers] == [s[0] for s in ours(data)]


def build_elf(
    *,
    elf_class: int = 2,
    order: str = "<",
    names: tuple[str, ...] = ("", ".text", ".nv_fatbin", ".bss", ".shstrtab"),
    extended: bool = False,
    entsize: int | None = None,
) -> bytes:
    """A small ELF file: its header, a section name table, then the section header table; the
    sections' bytes are the name table's own (only the headers matter here). With *extended*,
    e_shnum and e_shstrndx are in section 0, as for files of 65280 sections or more."""
    layout = {1: "IIIIIIIIII", 2: "IIQQQQIIQQ"}[elf_class]
    header_size = {1: 52, 2: 64}[elf_class]
    entry = struct.Struct(order + layout)
    table = b"\0"
    offsets = []
    for name in names:
        offsets.append(table.index(name.encode() + b"\0") if not name else len(table))
        if name:
            table += name.encode() + b"\0"
    strtab_at = header_size
    shoff = strtab_at + len(table) + (-len(table) % 8)
    count, strndx = len(names), len(names) - 1
    headers = b""
    for n, name in enumerate(names):
        kind = 8 if name == ".bss" else 3 if name == ".shstrtab" else 1 if name else 0
        size = len(table) if name == ".shstrtab" else 16 if name else 0
        link = strndx if extended and n == 0 else 0
        if extended and n == 0:
            size = count
        headers += entry.pack(offsets[n], kind, 0, 0, strtab_at if name else 0, size, link, 0, 1, 0)
    ident = b"\x7fELF" + bytes([elf_class, 1 if order == "<" else 2, 1]) + bytes(9)
    fields = (3, 62, 1, 0, 0, shoff, 0, header_size, 0, 0, entsize or entry.size,
              0 if extended else count, 0xFFFF if extended else strndx)  # fmt: skip
    word = "Q" if elf_class == 2 else "I"
    head = ident + struct.pack(order + f"HHI{word}{word}{word}IHHHHHH", *fields)
    assert len(head) == header_size
    return head + table + bytes(shoff - strtab_at - len(table)) + headers


@pytest.mark.parametrize("elf_class", [1, 2])
@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("extended", [False, True])
def test_every_class_order_and_extended_numbering(
    elf_class: int, order: str, extended: bool
) -> None:
    data = build_elf(elf_class=elf_class, order=order, extended=extended)
    assert [s[0] for s in ours(data)] == ["", ".text", ".nv_fatbin", ".bss", ".shstrtab"]
    assert ours(data) == pyelftools_sections(data)


def test_no_section_header_table() -> None:
    data = bytearray(build_elf())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff 0: no sections
    assert ours(bytes(data)) == []


def _patched(offset: int, fmt: str, value: int) -> bytes:
    data = bytearray(build_elf())
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x7fELF", "corrupt ELF headers"),  # no header after the magic
        (b"\x7fELF\x03\x01" + bytes(58), "class 3"),
        (b"\x7fELF\x02\x07" + bytes(58), "data encoding 7"),
        (_patched(0x3A, "<H", 10), "e_shentsize 10"),
        (_patched(0x3C, "<H", 60000), "run past the end"),
        (_patched(0x28, "<Q", 1 << 60), "run past the end"),
        (_patched(0x3E, "<H", 9), "section name table 9 of 5"),
        (build_elf()[:-10], "run past the end"),
    ],
    ids=["truncated", "class", "encoding", "entsize", "count", "shoff", "strndx", "short-table"],
)
def test_nonsense_is_one_binary_format_error(data: bytes, says: str) -> None:
    with pytest.raises(BinaryFormatError, match=says):
        ours(data)


def test_a_name_outside_its_table() -> None:
    data = bytearray(build_elf())
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    struct.pack_into("<I", data, shoff + 64 * 2, 10_000)  # .nv_fatbin's sh_name
    with pytest.raises(BinaryFormatError, match="a section name at 10000"):
        ours(bytes(data))


def test_not_an_elf_file() -> None:
    with pytest.raises(BinaryFormatError, match="not an ELF file"):
        ours(b"MZ\x90\x00" + bytes(60))
