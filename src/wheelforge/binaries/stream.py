"""A wheel member read once, as a stream, in bounded memory: its bytes go by in chunks and only
the parts the readers need are kept (:class:`Retained`): the head (ELF header, program headers,
.dynsym, .dynstr, .gnu.version_r: the first segment, where linkers put them), the section header
table, and the bytes just before it (.shstrtab, .symtab, .strtab); the fatbin's entry headers are
read on the way (fatscan.py) and its payloads never kept. A reader that asks for bytes that were
not kept gets :class:`NotRetained`, and the walk reads that member again whole (elf.py), as it
read every member before: a rare file (a .dynsym past the head, an unusual fatbin) costs a second
inflation, never a wrong answer.

Memory per member: at most HEAD_CAP + TAIL_CAP + the section headers + one chunk, however large
the member (8 + 8 MiB: what the 90 ELF files of the eleven released wheels of the gallery,
tests/data/gallery.toml, need, with none read twice; vLLM's 308 MB flash-attention library keeps
about 12 MB).
"""

from __future__ import annotations

import hashlib
import struct
import zipfile

from wheelforge.binaries import bounded
from wheelforge.binaries.elf import Retained
from wheelforge.binaries.fatscan import FatbinScan

HEAD_CAP = 8 << 20
TAIL_CAP = 8 << 20
_SHDR_CAP = 65535 * 64  # the most section headers an ELF file can number


def _section_headers(head: bytes) -> tuple[int, int] | None:
    """Where the section header table lies (offset, bytes), from the ELF header; None when the
    header does not say (extended numbering, an odd class or byte order)."""
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[5] not in (1, 2):
        return None
    order = "<" if head[5] == 1 else ">"
    if head[4] == 2:
        shoff = struct.unpack_from(order + "Q", head, 0x28)[0]
        entsize, count = struct.unpack_from(order + "HH", head, 0x3A)
    elif head[4] == 1:
        shoff = struct.unpack_from(order + "I", head, 0x20)[0]
        entsize, count = struct.unpack_from(order + "HH", head, 0x2E)
    else:
        return None
    if not shoff or not count or entsize * count > _SHDR_CAP:
        return None
    return shoff, entsize * count


class _Keeper:
    """Copies the parts of a range that pass by."""

    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop = start, max(start, stop)
        self.data = bytearray()

    def take(self, at: int, chunk: memoryview) -> None:
        lo, hi = max(self.start, at), min(self.stop, at + len(chunk))
        if lo < hi:
            self.data += chunk[lo - at : hi - at]  # a view: one copy, into the kept bytes


def stream_member(
    zf: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    display: str,
    *,
    fatbins: bool,
    digest: bool = False,
) -> tuple[Retained, FatbinScan | None]:
    """One pass over the member *info*: what the readers need of it, within the caps of
    bounded.py (its declared size; the inflation ratio); with *digest*, the sha256 of all its
    bytes too (``Retained.sha256``: what RECORD holds it to), from the same pass."""
    size = info.file_size
    scan = FatbinScan() if fatbins else None
    head = min(size, HEAD_CAP)
    keepers = [_Keeper(0, head)]
    hashed = hashlib.sha256() if digest else None
    at = 0
    for data in bounded.member_chunks(zf, info, display):
        chunk = memoryview(data)
        if at == 0:
            where = _section_headers(data[:64])
            if where is not None:
                shoff, length = where
                # From where the head ends at the latest: the two never overlap.
                keepers.append(_Keeper(max(head, shoff - TAIL_CAP), shoff + length))
        for keeper in keepers:
            keeper.take(at, chunk)
        if scan is not None:
            scan.feed(chunk)
        if hashed is not None:
            hashed.update(chunk)
        at += len(chunk)
    if scan is not None:
        scan.finish()
    kept = Retained(size=size, sha256=hashed.digest() if hashed else None)
    first, *rest = keepers
    if rest and rest[0].start == first.start + len(first.data):  # they meet: one piece
        first.data += rest.pop().data
    for keeper in (first, *rest):
        if keeper.data:
            kept.add(keeper.start, keeper.data)
    return kept, scan
