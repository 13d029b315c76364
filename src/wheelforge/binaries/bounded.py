"""Bounded reading of what users hand to ``inspect`` and ``check``: what a path is, decided by
stat(2) before anything is opened (a FIFO is never opened, a device never read), and wheel
members inflated only within caps, so a hostile wheel costs at most the caps in memory.

Caps (environment variables, for the rare legitimate giant):

- ``WHEELFORGE_MAX_MEMBER_BYTES``: the largest wheel member inflated, default 2 GiB (the
  largest CUDA libraries in wheels today, cuDNN's and cuBLAS's, are below 1 GiB each);
- ``WHEELFORGE_MAX_RATIO``: the largest inflation ratio of a member above 1 MiB, default 200.
  Compiled code deflates 2-5x and even fatbins of repeated SASS stay far below 100x; deflate
  tops out near 1032x, which is what zip bombs use.
"""

from __future__ import annotations

import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from wheelforge.foundation import numbers
from wheelforge.foundation.errors import BinaryFormatError, ConfigError

if TYPE_CHECKING:  # hashing is a wheel's RECORD's: an `inspect` of shared objects never hashes
    import hashlib

DEFAULT_MAX_MEMBER_BYTES = 2 << 30
DEFAULT_MAX_RATIO = 200
# The headers of a METADATA (up to its first blank line) read at most: PyPI's largest are a
# few kB; what follows them is the long description, which no rule reads and is never inflated.
METADATA_HEADERS_CAP = 16 << 20
RATIO_FLOOR_BYTES = 1 << 20  # small members may compress as well as they like
_CHUNK = 1 << 20

PathKind = Literal["file", "folder"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def classify(path: Path, *, accepts: str) -> PathKind:
    """Whether *path* is a regular file or a folder (symlinks followed), from stat alone; any
    other kind is refused by name. *accepts* ends the message: what the command takes."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file or folder; pass {accepts}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be examined: {exc.strerror}; pass {accepts}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise ConfigError(f"{path} is {what}, not a regular file; pass {accepts}")


def _env_cap(name: str, default: int) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    cap = numbers.whole(value, low=1, high=numbers.MAX_BYTES)
    if cap is None:
        shown = repr(value) if len(value) <= 40 else repr(value[:37] + "...")
        raise ConfigError(
            f"{name}={shown} must be a positive whole number (ASCII digits, at most "
            f"{numbers.MAX_BYTES}); unset it or fix it"
        )
    return cap


def max_member_bytes() -> int:
    return _env_cap("WHEELFORGE_MAX_MEMBER_BYTES", DEFAULT_MAX_MEMBER_BYTES)


def max_ratio() -> int:
    return _env_cap("WHEELFORGE_MAX_RATIO", DEFAULT_MAX_RATIO)


def check_member_size(info: zipfile.ZipInfo, display: str) -> None:
    """Refuse a member whose declared size or inflation ratio exceeds the caps, before any of
    it is inflated (zipfile then stops at the declared size, so it can't lie upward)."""
    cap = max_member_bytes()
    if info.file_size > cap:
        raise BinaryFormatError(
            display,
            None,
            f"inflates to {info.file_size} bytes, above the cap of {cap} "
            "(raise WHEELFORGE_MAX_MEMBER_BYTES if it is genuine)",
        )
    ratio = max_ratio()
    if info.file_size > RATIO_FLOOR_BYTES and info.file_size > ratio * max(info.compress_size, 1):
        raise BinaryFormatError(
            display,
            None,
            f"inflates {info.file_size // max(info.compress_size, 1)}x ({info.compress_size} "
            f"bytes to {info.file_size}), above the ratio limit of {ratio}: a zip bomb, not a "
            "build product (raise WHEELFORGE_MAX_RATIO if it is genuine)",
        )


# What zipfile raises on a corrupt archive or member, besides BadZipFile: unknown versions or
# methods (NotImplementedError), bad offsets (ValueError, EOFError, OverflowError, struct.error).
INFLATE_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    RuntimeError,
    ValueError,
    OSError,
    NotImplementedError,
    OverflowError,
    struct.error,
)


def member_is_elf(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> bool:
    """Whether a member starts with the ELF magic; only its first block is inflated."""
    try:
        with zf.open(info) as stream:
            return stream.read(4) == b"\x7fELF"
    except INFLATE_ERRORS as error:
        raise BinaryFormatError(display, None, f"cannot inflate wheel member: {error}") from error


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> bytearray:
    """A member's bytes, within the caps: one buffer of its declared size, filled in chunks (so
    memory is the member's size once, plus a chunk)."""
    check_member_size(info, display)
    buffer = bytearray(info.file_size)
    filled = 0
    try:
        with zf.open(info) as stream, memoryview(buffer) as view:
            while filled < info.file_size:
                chunk = stream.read(min(_CHUNK, info.file_size - filled))
                if not chunk:
                    break
                view[filled : filled + len(chunk)] = chunk
                filled += len(chunk)
    except INFLATE_ERRORS as error:
        raise BinaryFormatError(display, None, f"cannot inflate wheel member: {error}") from error
    if filled != info.file_size:
        raise BinaryFormatError(
            display, None, f"inflates to {filled} bytes, not the {info.file_size} it declares"
        )
    return buffer


def member_chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> Iterator[bytes]:
    """A member's bytes as they inflate, in chunks, within the caps (a reader that keeps only
    what it needs holds a chunk at a time: stream.py)."""
    check_member_size(info, display)
    inflated = 0
    try:
        with zf.open(info) as stream:
            while chunk := stream.read(_CHUNK):  # zipfile stops at the declared size
                inflated += len(chunk)
                yield chunk
    except INFLATE_ERRORS as error:
        raise BinaryFormatError(display, None, f"cannot inflate wheel member: {error}") from error
    if inflated != info.file_size:
        raise BinaryFormatError(
            display, None, f"inflates to {inflated} bytes, not the {info.file_size} it declares"
        )


def member_headers(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> bytes:
    """The headers of an email-style member (METADATA: up to its first blank line), inflated
    only that far, within METADATA_HEADERS_CAP: a 300 MB long description costs nothing, 300 MB
    of headers is refused once the cap is passed."""
    kept = bytearray()
    for chunk in member_chunks(zf, info, display):
        searched = max(0, len(kept) - 3)
        kept += chunk
        # The end of the last header: its line break kept, the blank line's dropped.
        ends = [
            i + len(sep) // 2
            for sep in (b"\n\n", b"\r\n\r\n")
            if (i := kept.find(sep, searched)) >= 0
        ]
        if ends:
            return bytes(kept[: min(ends)])
        if len(kept) > METADATA_HEADERS_CAP:
            raise BinaryFormatError(
                display,
                None,
                f"its headers run past {METADATA_HEADERS_CAP >> 20} MiB without the blank line "
                "that ends them; a METADATA's headers are a few kB (the long description "
                "follows the blank line): build the wheel again",
            )
    return bytes(kept)


def member_digest(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> tuple[str, int]:
    """A member's ``sha256=<urlsafe base64>`` (as RECORD writes it) and size, inflated in chunks
    within the caps, never held whole."""
    import hashlib

    check_member_size(info, display)
    digest = hashlib.sha256()
    size = 0
    try:
        with zf.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except INFLATE_ERRORS as error:
        raise BinaryFormatError(display, None, f"cannot inflate wheel member: {error}") from error
    return _as_record(digest), size


def record_digest_of(sha256: bytes) -> str:
    """``sha256=<urlsafe base64>`` of a sha256 already computed (stream.py's one pass)."""
    import base64

    return f"sha256={base64.urlsafe_b64encode(sha256).rstrip(b'=').decode()}"


def _as_record(digest: hashlib._Hash) -> str:
    return record_digest_of(digest.digest())


def unsafe_member_names(names: list[str]) -> list[str]:
    """Member names an installer would write outside the install folder (absolute, ``..``,
    a drive or backslashes), which pip's and installer's checks refuse."""
    out = []
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":"):
            out.append(name)
    return out
