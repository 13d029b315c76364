"""Every integer wheelforge reads from text (flags, environment variables, matrix.yaml, versions,
other tools' output) is parsed here, each with its own bound.

Two rules close the class. Only ASCII digits count: Python's ``int()`` and the regex ``\\d``
accept any Unicode digit (``int("８")`` is 8, ``int("٤")`` is 4), which torch's own parsers and
the tools wheelforge passes the value to reject. And the number of digits is checked before
``int()`` runs: beyond Python's 4300-digit conversion limit ``int()`` raises ``ValueError`` (a
traceback), far below it the value is absurd anyway; a float of a 400-digit size overflows.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # packaging's parsers load in ~0.03 s: only the functions that parse need them
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

# A run of ASCII digits; `re.ASCII` keeps `\d` from matching other scripts' digits.
_DIGITS_RE = re.compile(r"[0-9]+", re.ASCII)
# The digits a version component may have (a date-based 20260101 has 8; CalVer with time 14).
MAX_VERSION_DIGITS = 18
# Largest values of the things wheelforge counts.
MAX_JOBS = 4096  # parallel compile jobs, nvcc threads
# SOURCE_DATE_EPOCH: 2107-12-31T23:59:59Z, the zip format's horizon (its dates count years from
# 1980 in 7 bits: 2108 was a struct.error when the wheel was packed, after the whole compile).
MAX_EPOCH = 4354819199
MAX_BYTES = 1 << 50  # a size in bytes (1 PiB): caps, budgets
MAX_MINOR = 999  # a version's major or minor number (torch 2.10, cp310)


def is_digits(text: str) -> bool:
    """Whether *text* is one or more ASCII digits, nothing else (``str.isdigit`` also takes
    ``²`` and ``٤``)."""
    return _DIGITS_RE.fullmatch(text) is not None


def whole(text: str, *, low: int = 0, high: int) -> int | None:
    """*text* as an integer from *low* to *high* when it is ASCII digits and in range, else None;
    ``int()`` never sees more digits than *high* has, so it cannot fail."""
    significant = text.strip().lstrip("0") or "0"
    if not is_digits(text.strip()) or len(significant) > len(str(high)):
        return None
    value = int(significant)
    return value if low <= value <= high else None


def version(text: str) -> Version:
    """*text* as a PEP 440 version; InvalidVersion (a ValueError) for anything else, including a
    component longer than MAX_VERSION_DIGITS (packaging would hand it to ``int()``)."""
    from packaging.version import InvalidVersion, Version

    if not text.isascii() or any(len(run) > MAX_VERSION_DIGITS for run in _DIGITS_RE.findall(text)):
        raise InvalidVersion(f"Invalid version: {text[:40]!r}")
    return Version(text)


def is_version(value: object) -> bool:
    """Whether *value* is a string that version() takes (a shape of cachefiles)."""
    from packaging.version import InvalidVersion

    try:
        version(value) if isinstance(value, str) else None
    except InvalidVersion:
        return False
    return isinstance(value, str)


def specifier(text: str) -> SpecifierSet:
    """*text* as a version range; InvalidSpecifier also for a number of over MAX_VERSION_DIGITS."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not bounded_digits(text):
        raise InvalidSpecifier(f"Invalid specifier: {text[:40]!r}")
    return SpecifierSet(text)


def requirement(text: str) -> Requirement:
    """*text* as a PEP 508 requirement; InvalidRequirement also for a number of over
    MAX_VERSION_DIGITS (its specifier would hand it to ``int()`` when compared)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not bounded_digits(text):
        raise InvalidRequirement(f"Invalid requirement: {text[:40]!r}")
    return Requirement(text)


def bounded_digits(text: str, *, limit: int = MAX_VERSION_DIGITS) -> bool:
    """Whether every run of digits in *text* is at most *limit* long (for text that packaging
    parses into integers: specifiers, requirements)."""
    return text.isascii() and all(len(run) <= limit for run in _DIGITS_RE.findall(text))
