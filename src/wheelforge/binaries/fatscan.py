"""Fatbin entries read from a stream, as the bytes of a wheel member go by, without keeping the
fatbin: the containers are found by their magic, their entry headers read and their payloads
skipped. Which chain of containers is the fatbin is only known once the section headers (at the
file's end) are read; :meth:`FatbinScan.entries_for` then takes the chain that fills the section
exactly, or says it has none (the caller reads the section itself: the exact parse of fatbin.py,
with its errors). fatbin.py says what the layout is; this follows the same rules.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from wheelforge.binaries import fatbin
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.foundation.errors import BinaryFormatError

_MAGIC = struct.pack("<IHH", fatbin.CONTAINER_MAGIC, 1, 16)  # magic, version 1, header size 16
_ALIGN = 8  # containers lie 8-aligned in the file (their section is, and each is a multiple of 8)
_PAD = 16


@dataclass
class _Container:
    start: int
    end: int
    entries: list[tuple[int, fatbin._EntryHeader]] = field(default_factory=list)


@dataclass
class _Chain:
    containers: list[_Container] = field(default_factory=list)
    zeros_after: int = 0  # zero bytes seen right after its last container
    broken: bool = False  # an entry header did not parse: the exact parse must say why


class FatbinScan:
    """Fed every byte of one ELF file in order (:meth:`feed`); keeps only a few headers."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._at = 0  # absolute offset of _buf[0]
        self._skip_to = 0  # bytes before it are payload: dropped unseen
        self._state = "scan"
        self._next = 0  # where the state's header starts
        self._container: _Container | None = None
        self.chains: list[_Chain] = []

    def feed(self, chunk: bytes | memoryview) -> None:
        data = memoryview(chunk)
        end = self._at + len(self._buf) + len(data)
        if self._skip_to >= end:  # inside a payload: nothing to keep
            self._at = end
            return
        if self._skip_to > self._at + len(self._buf):
            data = data[self._skip_to - (self._at + len(self._buf)) :]
            self._buf.clear()
            self._at = self._skip_to
        self._buf += data
        self._run()

    def _take(self, offset: int, size: int) -> bytes | None:
        """*size* bytes at absolute *offset*, once they have arrived."""
        rel = offset - self._at
        if rel + size > len(self._buf):
            return None
        return bytes(self._buf[rel : rel + size])

    def _drop_to(self, offset: int) -> None:
        rel = offset - self._at
        if rel >= len(self._buf):
            self._skip_to = offset
            self._at += len(self._buf)
            self._buf.clear()
        elif rel > 0:
            del self._buf[:rel]
            self._at = offset

    def _run(self) -> None:
        """Step the state machine until it needs bytes that have not arrived."""
        steps = {
            "scan": self._scan,
            "container": self._container_header,
            "entry": self._entry_header,
            "zeros": self._count_zeros,
            "after": self._after,
        }
        while steps[self._state]():
            pass

    def _scan(self) -> bool:
        found = self._find()
        if found is None:
            keep = len(_MAGIC) - 1  # the pattern may straddle the next chunk
            if len(self._buf) > keep:
                self._drop_to(self._at + len(self._buf) - keep)
            return False
        self.chains.append(_Chain())
        self._state, self._next = "container", found
        self._drop_to(found)
        return True

    def _container_header(self) -> bool:
        head = self._take(self._next, 16)
        if head is None:
            return False
        magic, version, size, body = struct.unpack("<IHHQ", head)
        if magic != fatbin.CONTAINER_MAGIC or version != 1 or size < 16:
            self._end_chain(self._next)
            return True
        self._container = _Container(start=self._next, end=self._next + size + body)
        self.chains[-1].containers.append(self._container)
        self.chains[-1].zeros_after = 0
        self._state, self._next = "entry", self._next + size
        self._drop_to(self._next)
        return True

    def _entry_header(self) -> bool:
        assert self._container is not None
        if self._next >= self._container.end:
            self._state, self._next = "after", self._container.end
            return True
        head = self._take(self._next, fatbin._ENTRY.size)
        if head is None:
            return False
        try:
            header = fatbin._entry_header(
                memoryview(head), 0, self._container.end - self._next, "", self._next
            )
        except BinaryFormatError:
            # Corrupt, or a false start (the magic in other data): the scan goes on from here,
            # where the bytes behind were already dropped; a real fatbin it skipped is read
            # whole by the caller (entries_for finds no chain for it).
            self.chains[-1].broken = True
            self._end_chain(self._next)
            return True
        self._container.entries.append((self._next, header))
        self._next += header.header_size + header.stored_size
        self._drop_to(self._next)
        return True

    def _after(self) -> bool:
        """After a container: its padding, the next container, or the chain's end."""
        byte = self._take(self._next, 1)
        if byte is None:
            return False
        if byte != b"\0":
            self._state = "container"
            return True
        stop = -(-self._next // _PAD) * _PAD
        if stop == self._next:  # a zero at a boundary: the section's zero tail
            self._state = "zeros"
            return True
        run = self._take(self._next, stop - self._next)
        if run is None:
            return False
        if run.count(0) != len(run):
            self._end_chain(self._next)
            return True
        self.chains[-1].zeros_after += len(run)
        self._next = stop
        self._drop_to(stop)
        return True

    def _count_zeros(self) -> bool:
        """Zeros after the chain's last container (its section's zero tail) up to the next
        non-zero byte, where the chain ends and the scan goes on (True); False: all the bytes
        so far were zeros."""
        tail = bytes(self._buf[self._next - self._at :])
        zeros = len(tail) - len(tail.lstrip(b"\0"))
        self.chains[-1].zeros_after += zeros
        self._next += zeros
        if zeros == len(tail):
            self._drop_to(self._next)
            return False
        self._end_chain(self._next)
        return True

    def _end_chain(self, offset: int) -> None:
        self._state = "scan"
        self._drop_to(offset)

    def finish(self) -> None:
        """The stream ended: a chain cut off inside a header is incomplete."""
        if self._state in ("container", "entry") and self.chains:
            self.chains[-1].broken = True

    def _find(self) -> int | None:
        """The first 8-aligned container magic in the buffer."""
        view = self._buf
        start = (-self._at) % _ALIGN
        while True:
            i = view.find(_MAGIC, start)
            if i < 0:
                return None
            if (self._at + i) % _ALIGN == 0:
                return self._at + i
            start = i + 1

    def entries_for(self, start: int, size: int, path: str) -> list[FatbinEntry] | None:
        """The entries of the fatbin section at *start* of *size* bytes, when one chain fills it
        exactly (trailing zeros allowed); None: the section must be read and parsed."""
        for chain in self.chains:
            if not chain.containers or chain.containers[0].start != start:
                continue
            last = chain.containers[-1].end
            if chain.broken or last > start + size or last + chain.zeros_after < start + size:
                return None
            return [
                fatbin._make_entry(header, index, offset, path)
                for index, container in enumerate(chain.containers)
                for offset, header in container.entries
                if header.kind in (fatbin._KIND_ELF, fatbin._KIND_PTX)
            ]
        return None
