"""Sizes as people write them: ``100MiB``, ``450MB``, ``100KiB``, ``1.5 GiB``, ``2000`` (bytes).
Used by the ``size-budget`` key of matrix.yaml and by ``--size-budget``."""

from __future__ import annotations

import re

from wheelforge.foundation.errors import ConfigError
from wheelforge.foundation.numbers import MAX_BYTES

# Digits after the point that mean anything in a size (1.123456789 GiB is a byte's worth).
_MAX_FRACTION_DIGITS = 9

# PyPI's default limit per file (https://docs.pypi.org/project-management/storage-limits/).
DEFAULT_SIZE_BUDGET = 100 * 1024**2

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE | re.ASCII)
# The same grammar for JSON Schema, which has no flags (data/matrix.schema.json's size-budget).
SIZE_PATTERN = r"^\s*[0-9]+(\.[0-9]+)?\s*([bB]|[kKmMgG][iI]?[bB])?\s*$"


def parse_size(text: str, *, where: str) -> int:
    """Bytes in *text*; a ConfigError naming *where* (a flag, a matrix.yaml line) otherwise."""
    m = _SIZE_RE.match(text)
    unit = m[2].lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ConfigError(
            f"{where}: '{_shown(text)}' is not a size; write it like 100MiB, 450MB or 100KiB "
            "(KiB/MiB/GiB are powers of 1024, KB/MB/GB of 1000; no unit: bytes)"
        )
    whole, _, fraction = m[1].partition(".")
    if len(whole.lstrip("0")) > len(str(MAX_BYTES)) or len(fraction) > _MAX_FRACTION_DIGITS:
        raise ConfigError(f"{where}: '{_shown(text)}' is larger than any wheel; write e.g. 100MiB")
    size = int(float(m[1]) * _UNITS[unit])
    if size <= 0:
        raise ConfigError(f"{where}: '{text}' must be larger than 0")
    if size > MAX_BYTES:
        raise ConfigError(f"{where}: '{text}' is larger than any wheel; write e.g. 100MiB")
    return size


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def format_size(n: int) -> str:
    """``104857600`` → ``100.0 MiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError  # unreachable
