"""The stable-ABI check of built binaries: run after every build, and by ``wheelforge check``.
It applies the rules of abirules.py (listed there) to each ELF file, and for a wheel to each ELF
member outside auditwheel's ``.libs``; on top it checks what only a wheel has: abi3 module file
names, and declared floors not below the needed ones (the lowest torch it loads on is the newest
release that introduced one of its shim functions; the lowest Python, the newest limited-API
version among its Python symbols).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import InvalidRequirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from wheelforge.binaries import bounded, initexport
from wheelforge.binaries.abirules import (
    CheckTarget,
    ElfFacts,
    Violation,
    cxx_violations,
    demangle,
    elf_facts,
    floor_violations,
    python_floor,
    python_violations,
    shim_violations,
    tag_violations,
)
from wheelforge.binaries.elf import (
    ELF_MAGIC,
    ElfImage,
    WheelReader,
    is_grafted,
    member_name,
    open_elf_file,
    open_wheel,
)
from wheelforge.foundation import numbers
from wheelforge.foundation.errors import BinaryFormatError, ConfigError
from wheelforge.toolchain import shims
from wheelforge.toolchain.shims import Version2

# The rules' own types and demangle() are part of this module's interface.
__all__ = [
    "BinaryCheck",
    "CheckTarget",
    "Violation",
    "WheelRules",
    "check_elf",
    "check_image",
    "check_paths",
    "check_wheel",
    "demangle",
    "python_floor",
    "torch_floor",
]


@dataclass(frozen=True, kw_only=True)
class BinaryCheck:
    path: str
    shims: tuple[str, ...]  # shim functions it uses
    newest_shim: Version2 | None  # the newest torch version among them: the inferred torch floor
    python_symbols: tuple[str, ...]
    violations: tuple[Violation, ...]
    python_floor: Version2 | None = None  # the newest limited-API version among python_symbols
    declared_torch: Version2 | None = None  # the floors it was checked against
    declared_python: Version2 | None = None


def check_elf(data: bytes, *, path: str, target: CheckTarget) -> BinaryCheck:
    with ElfImage(path, data) as image:
        return check_image(image, elf_facts(image), target)


def check_image(image: ElfImage, facts: ElfFacts, target: CheckTarget) -> BinaryCheck:
    path = image.name
    used_shims = tuple(n for n in facts.undefined if shims.is_shim(n))
    python_symbols = tuple(n for n in facts.undefined if n.startswith(("Py", "_Py")))
    introduced = [shims.judge(n, target.torch, target.guards).introduced for n in used_shims]
    torch = max((v for v in introduced if v is not None), default=None)
    python = python_floor(python_symbols)
    violations = [
        *floor_violations(path, target, torch, python),
        *cxx_violations(path, facts.undefined),
        *shim_violations(path, used_shims, target),
        *python_violations(path, python_symbols, target.python),
        *initexport.init_violations(image),
    ]
    return BinaryCheck(
        path=path,
        shims=used_shims,
        newest_shim=torch,
        python_symbols=python_symbols,
        violations=tuple(violations),
        python_floor=python,
        declared_torch=target.torch,
        declared_python=target.python,
    )


def _version(text: str) -> Version | None:
    try:
        return numbers.version(text)
    except InvalidVersion:
        return None


def torch_floor(metadata: str) -> Version2 | None:
    """The lowest torch a wheel's METADATA accepts (its Requires-Dist on torch), if any."""
    message = HeaderParser().parsestr(metadata)
    for value in message.get_all("Requires-Dist") or []:
        try:
            req = numbers.requirement(value)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) != "torch":
            continue
        lows = [
            v.release
            for s in req.specifier
            if s.operator in (">=", "==", "~=", ">", "===")
            and (v := _version(s.version.removesuffix(".*"))) is not None
        ]
        if lows and len(low := max(lows)) >= 2 and max(low[:2]) <= numbers.MAX_MINOR:
            return (low[0], low[1])
    return None


class WheelRules:
    """The rules for the ELF members of one open wheel: its tags, its abi3 floor and its torch
    floor (*torch*, else its METADATA's) are read once; check() then takes one member."""

    def __init__(
        self, wheel: WheelReader, *, torch: Version2 | None, guards: dict[str, Version2 | None]
    ) -> None:
        path = wheel.path
        try:
            _, _, _, tags = parse_wheel_filename(wheel.tagged_name)
        except InvalidWheelFilename as exc:
            raise BinaryFormatError(str(path), None, f"not a wheel file name: {exc}") from None
        self.path = path
        self.tags = frozenset(str(t) for t in tags)
        abi3 = {t.interpreter for t in tags if t.abi == "abi3" and t.interpreter.startswith("cp3")}
        minors = (numbers.whole(i[3:], high=numbers.MAX_MINOR) for i in abi3)
        self.python = min(((3, m) for m in minors if m is not None), default=None)
        metadata = wheel.dist_info_member("METADATA")
        floor = torch or (torch_floor(wheel.read_text(metadata)) if metadata else None)
        if floor is None:
            why = (
                "states no torch requirement with a lower bound"
                if metadata
                else "has no .dist-info/METADATA, so it states no torch requirement"
            )
            raise ConfigError(f"{path}: the wheel {why}; pass --target X.Y")
        self.target = CheckTarget(torch=floor, python=self.python, guards=guards)

    @staticmethod
    def applies(member: str) -> bool:
        """Libraries that auditwheel grafted into ``.libs`` are not the wheel's own."""
        return not is_grafted(member)

    def check(self, image: ElfImage) -> BinaryCheck:
        member = image.member or image.name
        facts = elf_facts(image)
        result = check_image(image, facts, self.target)
        extra = tag_violations(self.path.name, self.tags, member, facts)
        if self.python is not None and re.search(r"\.cpython-\d+[^/]*\.so$", member):
            extra.append(
                Violation(
                    binary=image.name,
                    rule="tags",
                    symbol=None,
                    message=f"{self.path.name} is an abi3 wheel, but {member} is named for one CPython; name it *.abi3.so",
                )
            )
        if not extra:
            return result
        return dataclasses.replace(result, violations=(*result.violations, *extra))


def check_wheel(
    path: Path, *, torch: Version2 | None, guards: dict[str, Version2 | None]
) -> list[BinaryCheck]:
    """Check every ELF member of a wheel; *torch* overrides the floor its METADATA gives."""
    with open_wheel(path) as wheel:
        rules = WheelRules(wheel, torch=torch, guards=guards)
        unsafe = set(bounded.unsafe_member_names(wheel.names))  # layout violations only
        skip = lambda member: not rules.applies(member) or member in unsafe  # noqa: E731
        results = [rules.check(image) for image in wheel.elf_members(skip=skip)]
        layout = _layout_violations(path, wheel.names)
    if layout:
        results.insert(0, BinaryCheck(path=str(path), shims=(), newest_shim=None,
                                      python_symbols=(), violations=tuple(layout)))  # fmt: skip
    return results


def _layout_violations(path: Path, names: Sequence[str]) -> list[Violation]:
    """Member names an installer would write outside site-packages, and a missing .dist-info."""
    out = [
        Violation(
            binary=member_name(path, name),
            rule="layout",
            symbol=None,
            message=f"{path.name} has the member {name!r}, which an installer would write outside "
            "its folder (an absolute path or '..'); rebuild the wheel with relative member names",
        )
        for name in bounded.unsafe_member_names(list(names))
    ]
    if not any(n.endswith(".dist-info/METADATA") and n.count("/") == 1 for n in names):
        out.append(
            Violation(
                binary=str(path),
                rule="layout",
                symbol=None,
                message=f"{path.name} has no NAME-VERSION.dist-info/METADATA, so no installer "
                "accepts it; build it with a wheel builder",
            )
        )
    return out


ACCEPTS = "wheels or shared objects"


def check_paths(
    paths: Sequence[Path],
    *,
    torch: Version2 | None,
    python: Version2 | None,
    guards: dict[str, Version2 | None],
) -> list[BinaryCheck]:
    """Check wheels and shared objects; a bare shared object needs *torch* (``--target``)."""
    results: list[BinaryCheck] = []
    for path in paths:
        if bounded.classify(path, accepts=ACCEPTS) == "folder":
            raise ConfigError(
                f"{path} is a folder; pass the wheels or shared objects in it, e.g. {path}/*.whl"
            )
        if path.suffix == ".whl":
            results.extend(check_wheel(path, torch=torch, guards=guards))
            continue
        with open_elf_file(path) as image:  # memory-mapped: only the pages read are loaded
            if image.view[:4].tobytes() != ELF_MAGIC:
                raise ConfigError(
                    f"{path} is neither a wheel (.whl) nor an ELF shared object; pass {ACCEPTS}"
                )
            if torch is None:
                raise ConfigError(
                    f"{path}: a bare shared object says nothing of its torch floor; pass --target X.Y"
                )
            target = CheckTarget(torch=torch, python=python, guards=guards)
            results.append(check_image(image, elf_facts(image), target))
    return results
