"""Applying the registered ABI rules (registry.py) to what the walk read (reader.py): each
binary of a wheel by its role, and the wheel as a whole; ``wheelforge check`` (check_paths) and
the build's verification (verify.py) both judge through judge_wheel. A wheel's target is read
from it: its torch floor from METADATA (unless given), its abi3 floor from its tags."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from wheelforge.binaries import bounded, floors, registry
from wheelforge.binaries.elf import ELF_MAGIC, ElfImage, open_elf_file
from wheelforge.binaries.facts import BinaryFacts, WheelFacts, file_role
from wheelforge.binaries.floors import python_floor, torch_floor
from wheelforge.binaries.reader import read_binary, read_wheel
from wheelforge.binaries.rule import CheckTarget, Flavour, Rule, RuleContext, Violation
from wheelforge.binaries.symbols import demangle
from wheelforge.configuration import abi as abis
from wheelforge.foundation import log
from wheelforge.foundation.errors import (
    BinaryFormatError,
    ConfigError,
    VerificationError,
    first_and_rest,
)
from wheelforge.toolchain.shims import Version2

# The rules' own types, demangle() and the floors are part of this module's interface.
__all__ = [
    "BinaryCheck",
    "CheckTarget",
    "Violation",
    "check_elf",
    "check_paths",
    "check_wheel",
    "demangle",
    "judge",
    "judge_wheel",
    "python_floor",
    "require_clean",
    "torch_floor",
    "wheel_context",
    "wheel_flavour",
]

# ``wheelforge check`` of a file given on its own (no tags to tell): the stable-ABI check.
CHECK_FLAVOUR: Flavour = "stable"


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
    flavour: Flavour = "stable"  # the ABI whose rules judged it
    rules: tuple[str, ...] = ()  # the ids of the rules that judged it, in their order
    # the wheel's Requires-Dist on torch as written (an unstable-ABI wheel's pin: torch==2.13.*)
    torch_requirement: str | None = None


def judge(
    binary: BinaryFacts, context: RuleContext, rules: Sequence[Rule]
) -> tuple[Violation, ...]:
    """What *rules* (those of them that judge the binary's role) find in *binary*."""
    return tuple(
        Violation(
            binary=binary.name,
            rule=rule.id,
            symbol=found.symbol,
            message=found.message,
            severity=rule.severity,
        )
        for rule in registry.for_role(rules, binary.role)
        for found in rule.check(binary, context)
    )


def check_binary(
    binary: BinaryFacts, context: RuleContext, rules: Sequence[Rule], flavour: Flavour = "stable"
) -> BinaryCheck:
    """*binary* judged by *rules* (those of *flavour*), with the floors its symbols (when read)
    imply."""
    undefined = binary.symbols.undefined if binary.symbols else ()
    used = floors.used_shims(undefined)
    python = floors.python_symbols(undefined)
    metadata = context.wheel.metadata if context.wheel else None
    return BinaryCheck(
        path=binary.name,
        shims=used,
        newest_shim=floors.torch_needed(used, context.target),
        python_symbols=python,
        violations=judge(binary, context, rules),
        python_floor=floors.python_floor(python),
        declared_torch=context.target.torch,
        declared_python=context.target.python,
        flavour=flavour,
        rules=tuple(r.id for r in registry.for_role(rules, binary.role)),
        torch_requirement=floors.torch_requirement(metadata) if metadata else None,
    )


def wheel_flavour(wheel: WheelFacts) -> Flavour:
    """The ABI a wheel was built for, from its tags: an abi3 tag (cp310-abi3) is the stable
    ABI's; one CPython's (cp311-cp311) means the full Python C API, which a classic
    (unstable-ABI) extension of torch's C++ API uses."""
    try:
        _, _, _, tags = parse_wheel_filename(wheel.tagged_name)
    except InvalidWheelFilename:
        return CHECK_FLAVOUR  # wheel_context refuses the name, in its words
    abi3 = any(t.abi == "abi3" for t in tags)
    return next(a.name for a in abis.ABIS.values() if a.abi3 == abi3)


def wheel_context(
    wheel: WheelFacts, *, torch: Version2 | None, guards: dict[str, Version2 | None]
) -> RuleContext:
    """What the wheel's binaries are checked against: its tags and abi3 floor, and its torch
    floor (*torch*, else its METADATA's)."""
    path = wheel.path
    try:
        _, _, _, tags = parse_wheel_filename(wheel.tagged_name)
    except InvalidWheelFilename as exc:
        raise BinaryFormatError(str(path), None, f"not a wheel file name: {exc}") from None
    abi3 = {t.interpreter for t in tags if t.abi == "abi3" and t.interpreter.startswith("cp3")}
    python = min(((3, int(i[3:])) for i in abi3), default=None)
    floor = torch or (torch_floor(wheel.metadata) if wheel.metadata else None)
    if floor is None:
        why = (
            "states no torch requirement with a lower bound"
            if wheel.metadata_member
            else "has no .dist-info/METADATA, so it states no torch requirement"
        )
        raise ConfigError(f"{path}: the wheel {why}; pass --target X.Y")
    return RuleContext(
        target=CheckTarget(torch=floor, python=python, guards=guards),
        wheel=wheel,
        tags=frozenset(str(t) for t in tags),
    )


def judge_wheel(
    wheel: WheelFacts, context: RuleContext, rules: Sequence[Rule], flavour: Flavour = "stable"
) -> list[BinaryCheck]:
    """The wheel judged by *rules* (*flavour*'s): first the rules on the wheel as a whole (when
    they find something), then every binary read whose role some rule judges."""
    # Each binary's rules, and those that judged the wheel holding it (layout, torch-pin).
    whole_rules = tuple(r.id for r in registry.for_role(rules, "wheel"))
    results = [
        dataclasses.replace(c, rules=c.rules + whole_rules)
        for c in (
            check_binary(b, context, rules, flavour)
            for b in wheel.binaries
            if registry.for_role(rules, b.role)
        )
    ]
    subject = wheel.subject()
    violations = judge(subject, context, rules)
    if violations:
        whole = BinaryCheck(
            path=subject.name, shims=(), newest_shim=None, python_symbols=(), violations=violations,
            flavour=flavour, rules=whole_rules,
        )  # fmt: skip
        results.insert(0, whole)
    return results


def check_wheel(
    path: Path,
    *,
    torch: Version2 | None,
    guards: dict[str, Version2 | None],
    flavour: Flavour | None = None,
) -> list[BinaryCheck]:
    """Check a wheel by the rules of its ABI flavour (*flavour*, else its tags say: an abi3
    wheel's is the stable ABI); *torch* overrides the floor its METADATA gives."""
    every = registry.all_rules()
    wheel = read_wheel(path, registry.reading(every, metadata=True))
    flavour = flavour or wheel_flavour(wheel)
    rules = registry.applicable(flavour)
    return judge_wheel(wheel, wheel_context(wheel, torch=torch, guards=guards), rules, flavour)


def _check_image(image: ElfImage, target: CheckTarget, flavour: Flavour) -> BinaryCheck:
    rules = registry.applicable(flavour)
    role = file_role(image.name)
    reading = registry.reading(rules)
    binary = read_binary(image, role, reading.of(role), reading.own_of(role))
    return check_binary(binary, RuleContext(target=target), rules, flavour)


def check_elf(
    data: bytes, *, path: str, target: CheckTarget, flavour: Flavour = CHECK_FLAVOUR
) -> BinaryCheck:
    """Check one ELF file's bytes, as a file given on its own."""
    with ElfImage(path, data) as image:
        return _check_image(image, target, flavour)


def require_clean(
    checks: Sequence[BinaryCheck], *, prefix: str = "", wheel: Path | None = None
) -> None:
    """A rule's error fails, naming every one (*wheel*'s path shortened to its file name); a
    warning is logged."""
    found = [v for c in checks for v in c.violations]

    def text(message: str) -> str:
        return message.replace(str(wheel), wheel.name) if wheel else message

    for v in found:
        if not v.blocking:
            log.warning(prefix + text(v.message))
    errors = [text(v.message) for v in found if v.blocking]
    if errors:
        message, details = first_and_rest(errors, prefix=prefix)
        raise VerificationError(message, details=details)


ACCEPTS = "wheels or shared objects"


def check_paths(
    paths: Sequence[Path],
    *,
    torch: Version2 | None,
    python: Version2 | None,
    guards: dict[str, Version2 | None],
    flavour: Flavour | None = None,
) -> list[BinaryCheck]:
    """Check wheels and shared objects by the rules of *flavour* (else a wheel's tags say, and
    a bare shared object is checked for the stable ABI); a bare shared object needs *torch*
    (``--target``)."""
    results: list[BinaryCheck] = []
    for path in paths:
        if bounded.classify(path, accepts=ACCEPTS) == "folder":
            raise ConfigError(
                f"{path} is a folder; pass the wheels or shared objects in it, e.g. {path}/*.whl"
            )
        if path.suffix == ".whl":
            results.extend(check_wheel(path, torch=torch, guards=guards, flavour=flavour))
            continue
        with open_elf_file(path) as image:  # memory-mapped: only the pages read are loaded
            if image.view[:4].tobytes() != ELF_MAGIC:
                raise ConfigError(
                    f"{path} is neither a wheel (.whl) nor an ELF shared object; pass {ACCEPTS}"
                )
            if torch is None:
                raise ConfigError(
                    f"{path}: a bare shared object says nothing of its torch floor; "
                    "pass --target X.Y"
                )
            target = CheckTarget(torch=torch, python=python, guards=guards)
            results.append(_check_image(image, target, flavour or CHECK_FLAVOUR))
    return results
