"""The floors of a binary, inferred from its symbols (the lowest torch it loads on: the newest
release that introduced one of its shim functions; the lowest Python: the newest limited-API
version among its Python symbols), and the torch floor a wheel declares in its METADATA."""

from __future__ import annotations

import re
from collections.abc import Sequence
from email.parser import HeaderParser

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from wheelforge.binaries.rule import CheckTarget
from wheelforge.toolchain import shims
from wheelforge.toolchain.shims import Version2


def used_shims(undefined: Sequence[str]) -> tuple[str, ...]:
    """The shim functions among a binary's undefined symbols."""
    return tuple(n for n in undefined if shims.is_shim(n))


def python_symbols(undefined: Sequence[str]) -> tuple[str, ...]:
    """The Python C API symbols among a binary's undefined symbols."""
    return tuple(n for n in undefined if n.startswith(("Py", "_Py")))


def torch_needed(used: Sequence[str], target: CheckTarget) -> Version2 | None:
    """The newest torch release among those that introduced the shim functions *used*."""
    introduced = [shims.judge(n, target.torch, target.guards).introduced for n in used]
    return max((v for v in introduced if v is not None), default=None)


def python_floor(symbols: Sequence[str]) -> Version2 | None:
    """The lowest Python whose limited API has every one of *symbols* (those it lacks aside)."""
    # Imported here: abi3info's tables take ~0.1 s to load, and a no-op build reads no binary.
    import abi3info
    from abi3info.models import Symbol

    added = [
        (m.added.major, m.added.minor)
        for name in symbols
        if (m := abi3info.FUNCTIONS.get(Symbol(name)) or abi3info.DATAS.get(Symbol(name)))
    ]
    return max(added, default=None)


def _numbers(version: str) -> list[int]:
    return [int(p) for p in re.findall(r"\d+", version)]


def torch_floor(metadata: str) -> Version2 | None:
    """The lowest torch a wheel's METADATA accepts (its Requires-Dist on torch), if any."""
    message = HeaderParser().parsestr(metadata)
    for value in message.get_all("Requires-Dist") or []:
        try:
            req = Requirement(value)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        lows = [s.version for s in req.specifier if s.operator in (">=", "==", "~=", ">", "===")]
        if lows:
            parts = _numbers(max(lows, key=_numbers))[:2]
            if len(parts) == 2:
                return (parts[0], parts[1])
    return None


def torch_requirement(metadata: str) -> str | None:
    """A wheel's Requires-Dist on torch as written (``torch==2.13.*``), if it has one."""
    message = HeaderParser().parsestr(metadata)
    for value in message.get_all("Requires-Dist") or []:
        try:
            req = Requirement(value)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and not req.marker:
            return f"torch{req.specifier}"
    return None


def torch_pin(metadata: str) -> str | None:
    """The torch release a wheel's Requires-Dist pins it to (``torch==2.13.*``: "2.13"), None
    when it accepts a range (or names no torch): what an unstable-ABI wheel must declare."""
    requirement = torch_requirement(metadata)
    if requirement is None:
        return None
    specs = list(Requirement(requirement).specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "==="):
        return None
    parts = _numbers(specs[0].version.removesuffix(".*"))
    return ".".join(str(p) for p in parts[:2]) if len(parts) >= 2 else None
