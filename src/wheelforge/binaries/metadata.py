"""What a wheel's METADATA declares of torch and Python: its Requires-Dist on torch (as written,
its lowest torch, the version it pins) and its Requires-Python (as written, its lowest Python).
The rules weigh the binaries against it (floor, python-api, requirement)."""

from __future__ import annotations

from dataclasses import dataclass
from email.parser import HeaderParser

from packaging.requirements import InvalidRequirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.foundation import numbers
from wheelforge.toolchain.shims import Version2

_PYTHON_MINORS = range(0, 100)


@dataclass(frozen=True, kw_only=True)
class Declared:
    """What a wheel's METADATA says of torch and Python, as written and as floors."""

    torch: str | None = None  # its Requires-Dist on torch ("torch==2.14.0"); None: it has none
    torch_floor: Version2 | None = None  # the lowest torch that requirement admits
    # The torch it pins, as written after ``torch==``: 2.14.0 (``==2.14.0``), 2.14.* (any
    # requirement that admits one minor only: ``==2.14.*``, ``>=2.14,<2.15``, ``~=2.14.0``).
    torch_pin: str | None = None
    requires_python: str | None = None  # Requires-Python as written (">=3.11")
    python_floor: Version2 | None = None  # the lowest Python 3 it admits


def declared(metadata: str | None) -> Declared:
    """The torch requirement (a requirement that applies only with an extra is not the wheel's)
    and Requires-Python of a wheel's METADATA."""
    if not metadata:
        return Declared()
    message = HeaderParser().parsestr(metadata)
    torch = floor = pin = None
    for value in message.get_all("Requires-Dist") or []:
        try:
            req = numbers.requirement(value)  # a 5,000-digit version: invalid, not a traceback
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch" or (req.marker and "extra" in str(req.marker)):
            continue
        torch = f"{req.name}{req.specifier}"
        floor = _lowest(req.specifier)
        pin = pinned(req.specifier)
        break
    python = message.get("Requires-Python")
    python_floor = None
    if python:
        try:
            spec = numbers.specifier(str(python))
        except InvalidSpecifier:
            spec = None
        if spec is not None:
            python_floor = next(((3, m) for m in _PYTHON_MINORS if _admits(spec, f"3.{m}")), None)
    return Declared(
        torch=torch,
        torch_floor=floor,
        torch_pin=pin,
        requires_python=str(python) if python else None,
        python_floor=python_floor,
    )


def pinned(spec: SpecifierSet) -> str | None:
    """The torch *spec* pins, written as after ``torch==``: its exact version where an ``==``
    (or ``===``) names one, else ``X.Y.*`` where it admits releases of one minor X.Y only (the
    packaging library decides what it admits, probed at every minor its versions border)."""
    exact = next(
        (s.version for s in spec if s.operator in ("==", "===") and not s.version.endswith(".*")),
        None,
    )
    if exact is not None:
        return exact
    minors = _admitted_minors(spec)
    return f"{minors[0][0]}.{minors[0][1]}.*" if len(minors) == 1 else None


def _admitted_minors(spec: SpecifierSet) -> list[tuple[int, int]]:
    """The minors among those *spec*'s versions border (each one's, the one before and after,
    the next major's first, and three far apart) of which it admits some release."""
    probes: set[tuple[int, int]] = {(0, 0), (1, 0), (99, 0)}
    for s in spec:
        v = _version(s.version.removesuffix(".*"))
        if v is None or max(v.release[:2]) > numbers.MAX_MINOR:
            continue
        major, minor = v.release[0], v.release[1] if len(v.release) > 1 else 0
        if len(v.release) == 1:  # ==2.*, <3: a major's minors
            probes |= {(major, 1), (major, 99)}
        probes |= {(major, max(minor - 1, 0)), (major, minor), (major, minor + 1), (major + 1, 0)}
    return sorted(m for m in probes if _admits(spec, f"{m[0]}.{m[1]}"))


def _lowest(spec: SpecifierSet) -> Version2 | None:
    lows = [
        v.release
        for s in spec
        if s.operator in (">=", "==", "~=", ">", "===")
        and (v := _version(s.version.removesuffix(".*"))) is not None
    ]
    if not lows or len(low := max(lows)) < 2 or max(low[:2]) > numbers.MAX_MINOR:
        return None
    return (low[0], low[1])


def _version(text: str) -> Version | None:
    try:
        return numbers.version(text)
    except InvalidVersion:
        return None


def _admits(spec: SpecifierSet, minor: str) -> bool:
    """Whether *spec* admits some release of the minor version *minor* (3.11: 3.11.0 ...)."""
    return any(spec.contains(f"{minor}.{patch}", prereleases=True) for patch in (0, 1, 99))
