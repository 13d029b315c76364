"""Applying the registered ABI rules (registry.py) to what the walk read (reader.py): each
binary of a wheel by its role, and the wheel as a whole; ``wheelforge check`` (check_paths) and
the build's verification (verify.py) both judge through judge_wheel. A wheel's target is read
from it: its torch floor from METADATA (unless given), its abi3 floor from its tags."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from wheelforge.binaries import bounded, floors, metadata, registry, torchcuda
from wheelforge.binaries.elf import ELF_MAGIC, ElfImage, open_elf_file, split_member
from wheelforge.binaries.facts import BinaryFacts, WheelFacts, file_role
from wheelforge.binaries.floors import python_floor, torch_floor
from wheelforge.binaries.reader import read_binary, read_wheel
from wheelforge.binaries.rule import (
    CheckTarget,
    Finding,
    Rule,
    RuleContext,
    TorchSource,
    Violation,
    WheelSummary,
)
from wheelforge.binaries.symbols import LibraryExports, demangle
from wheelforge.configuration import abi as abis
from wheelforge.configuration.abi import AbiName
from wheelforge.foundation import log, numbers
from wheelforge.foundation.errors import (
    BinaryFormatError,
    ConfigError,
    RuleBug,
    VerificationError,
    WheelforgeError,
    first_and_rest,
)
from wheelforge.toolchain.shims import Version2, VersionsFile

# The rules' own types, demangle() and the floors are part of this module's interface.
__all__ = [
    "BinaryCheck",
    "CheckTarget",
    "Violation",
    "WheelSummary",
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

# The torch a wheel that states no requirement and whose binaries use no shim is checked against:
# the first with the stable ABI (what its binaries need of torch then is nothing of it).
FIRST_STABLE_TORCH: Version2 = (2, 9)


# A binary's relation to torch, in torch-abi-audit's words: stable shims only, libtorch's C++ API
# (bound to the one torch it was built against), or no torch at all.
TorchAbi = Literal["torch-stable", "torch-unstable", "no-torch"]
# A wheel's torch ABI is its binaries' worst, in this order (torch-abi-audit rolls a package up
# the same way).
TORCH_ABIS: tuple[TorchAbi, ...] = ("torch-unstable", "torch-stable", "no-torch")
# What the violations of a binary (or a wheel's binaries) come to: error fails the command.
Verdict = Literal["ok", "warning", "error"]


def verdict_of(violations: Sequence[Violation]) -> Verdict:
    """error when a violation blocks (require_clean fails on it), warning when there are only
    warnings, else ok."""
    if any(v.blocking for v in violations):
        return "error"
    return "warning" if violations else "ok"


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
    role: str = ""  # what it is to its wheel (roles.py), "wheel" for the wheel as a whole
    role_reason: str = ""
    torch_abi: TorchAbi = "no-torch"
    libtorch_symbols: tuple[str, ...] = ()  # its undefined symbols of libtorch's C++ API, demangled
    allows: str | None = None  # the widest correct torch requirement it allows
    wheel: WheelSummary | None = None  # the wheel it is a member of
    flavour: AbiName = abis.STABLE.name  # the ABI whose rules judged it
    rules: tuple[str, ...] = ()  # the ids of the rules that judged it (its own, its wheel's)
    # What loading it said (check --torch-from): "loads under torch ...", "fails to load ...",
    # "not loaded: ..."; None: not tried.
    load: str | None = None

    @property
    def errors(self) -> int:
        """Its violations that fail the command."""
        return sum(1 for v in self.violations if v.blocking)

    @property
    def warnings(self) -> int:
        return len(self.violations) - self.errors

    @property
    def verdict(self) -> Verdict:
        return verdict_of(self.violations)


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
            severity=found.severity or rule.severity,
            kind=found.kind,
        )
        for rule in registry.for_role(rules, binary.role)
        for found in _findings(rule, binary, context)
    )


def _findings(rule: Rule, binary: BinaryFacts, context: RuleContext) -> tuple[Finding, ...]:
    """*rule*'s findings in *binary*. A rule judges facts already read, so whatever its code
    raises (other than an error of the hierarchy) is a bug in the rule, said as one."""
    try:
        return tuple(rule.check(binary, context))
    except WheelforgeError:
        raise
    except Exception as exc:
        raise RuleBug(rule.id, binary.name, exc) from exc


def check_binary(
    binary: BinaryFacts,
    context: RuleContext,
    rules: Sequence[Rule],
    wheel: WheelSummary | None = None,
    flavour: AbiName = abis.STABLE.name,
) -> BinaryCheck:
    """*binary* judged by *rules* (those of *flavour*), with the floors its symbols (when read)
    imply."""
    undefined = binary.symbols.undefined if binary.symbols else ()
    used = floors.used_shims(undefined)
    python = floors.python_symbols(undefined)
    cxx = tuple(name for _, name in floors.libtorch_cxx(undefined))
    floor = floors.introduced_floor(used, context.target.guards, context.target.versions)
    abi: TorchAbi = "torch-unstable" if cxx else "torch-stable" if used else "no-torch"
    return BinaryCheck(
        path=binary.name,
        shims=used,
        newest_shim=floors.torch_needed(used, context.target),
        python_symbols=python,
        violations=judge(binary, context, rules),
        python_floor=floors.python_floor(python),
        declared_torch=context.target.torch,
        declared_python=context.target.python,
        role=binary.role,
        role_reason=binary.role_reason,
        torch_abi=abi,
        libtorch_symbols=cxx,
        allows=floors.allows(floor, cxx=bool(cxx), declared=context.target.declared),
        wheel=wheel,
        flavour=flavour,
        rules=tuple(r.id for r in registry.for_role(rules, binary.role)),
    )


def wheel_flavour(wheel: WheelFacts) -> AbiName:
    """The torch ABI a wheel was built for, from its binaries and its requirement, not its
    Python tag: a classic (unstable-ABI) extension's when a binary of its own uses libtorch's
    C++ API and the wheel pins torch exactly (torch==2.8.0, torch==2.13.*), as a classic build's
    wheel does, whether it is tagged for one CPython (cp311-cp311) or for Python's limited API
    (vLLM 0.10.1.1's cp38-abi3 wheel pins torch==2.7.1: abi3 says nothing of torch's ABI); else
    the stable ABI's, whose rules say what is wrong with a wheel that uses libtorch's C++ API and
    claims a range of torch, or none. torchaudio's cp312-cp312 wheel uses the shims only: stable.
    torch's own wheel is libtorch itself: the classic rules, less the pin (torch_pin.py)."""
    if wheel.is_torch:  # torch's own binaries are libtorch: they need the C++ of each other
        return abis.UNSTABLE.name
    cxx = any(
        floors.libtorch_cxx(b.symbols.undefined)
        for b in wheel.binaries
        if b.symbols is not None and b.role != "bundled"
    )
    pinned = metadata.declared(wheel.metadata).torch_pin is not None
    classic = cxx and pinned
    return next(a.name for a in abis.ABIS.values() if a.per_torch == classic)


def wheel_context(
    wheel: WheelFacts,
    *,
    torch: Version2 | None,
    guards: dict[str, Version2 | None],
    versions: VersionsFile | None = None,
    torch_exports: LibraryExports | frozenset[str] | None = None,
) -> RuleContext:
    """What the wheel's binaries are checked against: its tags and abi3 floor, its
    Requires-Python, and its torch floor: *torch* (--target, or the build's), else its
    requirement's, else (a wheel that states none) what its binaries need."""
    path = wheel.path
    try:
        _, _, _, tags = parse_wheel_filename(wheel.tagged_name)
    except InvalidWheelFilename as exc:
        raise BinaryFormatError(str(path), None, f"not a wheel file name: {exc}") from None
    abi3 = {t.interpreter for t in tags if t.abi == "abi3" and t.interpreter.startswith("cp3")}
    minors = (numbers.whole(i[3:], high=numbers.MAX_MINOR) for i in abi3)
    python = min(((3, m) for m in minors if m is not None), default=None)
    said = metadata.declared(wheel.metadata)
    source: TorchSource = "target" if torch else "requirement"
    floor = torch or said.torch_floor
    if floor is None:
        inferred = inferred_torch(wheel, guards, versions)
        # No shim to infer a floor from: the first stable-ABI torch, said as assumed, not inferred.
        source, floor = ("inferred", inferred) if inferred else ("assumed", FIRST_STABLE_TORCH)
    return RuleContext(
        target=CheckTarget(
            torch=floor,
            python=python,
            guards=guards,
            versions=versions,
            torch_exports=torch_exports,
            torch_source=source,
            requires_python=said.python_floor,
            declared=said,
        ),
        wheel=wheel,
        tags=frozenset(str(t) for t in tags),
    )


def inferred_torch(
    wheel: WheelFacts, guards: dict[str, Version2 | None], versions: VersionsFile | None
) -> Version2 | None:
    """The lowest torch the wheel's own binaries load on (the newest shim any of them uses)."""
    found = [
        floors.introduced_floor(floors.used_shims(b.symbols.undefined), guards, versions)
        for b in wheel.binaries
        if b.symbols is not None and b.role != "bundled"
    ]
    return max((f for f in found if f is not None), default=None)


def summary(context: RuleContext, checks: Sequence[BinaryCheck]) -> WheelSummary:
    """What the wheel of *context* declares, and what its binaries' checks allow together."""
    assert context.wheel is not None
    cxx = any(c.torch_abi == "torch-unstable" for c in checks if c.role != "bundled")
    found = [c.newest_shim for c in checks if c.role != "bundled"]
    floor = max((f for f in found if f is not None), default=None)
    return WheelSummary(
        path=str(context.wheel.path),
        declared=context.target.declared,
        tag_python=context.target.python,
        torch=context.target.torch,
        torch_source=context.target.torch_source,
        # torch's own wheel allows no torch requirement: it is torch
        allows=None
        if context.wheel.is_torch
        else floors.allows(floor, cxx=cxx, declared=context.target.declared),
        torch_cuda=torchcuda.loads_on(context.wheel, context.target.declared.torch),
    )


def judge_wheel(
    wheel: WheelFacts,
    context: RuleContext,
    rules: Sequence[Rule],
    flavour: AbiName = abis.STABLE.name,
    targets: Mapping[str, Version2] | None = None,
) -> list[BinaryCheck]:
    """The wheel judged by *rules* (*flavour*'s): first the rules on the wheel as a whole (when
    they find something), then every binary read whose role some rule judges; each check
    carries the wheel's summary (what it declares, what its binaries allow) and the rules that
    judged the wheel holding it (layout, torch-pin). *targets*: the torch each member was
    compiled for, where the build knows it (a build's shared objects of different
    ``torch-target``): that member is judged against its own, the rest against the wheel's."""
    whole_rules = tuple(r.id for r in registry.for_role(rules, "wheel"))
    own = targets or {}

    def context_of(binary: BinaryFacts) -> RuleContext:
        target = own.get(binary.member or "")
        if target is None or target == context.target.torch:
            return context
        return dataclasses.replace(
            context, target=dataclasses.replace(context.target, torch=target)
        )

    results = [
        check_binary(b, context_of(b), rules, flavour=flavour)
        for b in wheel.binaries
        if registry.for_role(rules, b.role)
    ]
    whole = summary(context, results)
    results = [dataclasses.replace(c, wheel=whole, rules=c.rules + whole_rules) for c in results]
    subject = wheel.subject()
    violations = judge(subject, context, rules)
    if violations:
        results.insert(
            0,
            BinaryCheck(
                path=subject.name,
                shims=(),
                newest_shim=None,
                python_symbols=(),
                violations=violations,
                role="wheel",
                wheel=whole,
                flavour=flavour,
                rules=whole_rules,
            ),
        )
    return results


def check_wheel(
    path: Path,
    *,
    torch: Version2 | None,
    guards: dict[str, Version2 | None],
    versions: VersionsFile | None = None,
    flavour: AbiName | None = None,
    torch_exports: LibraryExports | frozenset[str] | None = None,
) -> list[BinaryCheck]:
    """Check a wheel by the rules of its ABI flavour (*flavour*, else its tags say: an abi3
    wheel's is the stable ABI); *torch* overrides the floor its METADATA gives."""
    wheel = read_wheel(path, registry.reading(registry.all_rules(), metadata=True))
    flavour = flavour or wheel_flavour(wheel)
    rules = registry.applicable(flavour)
    context = wheel_context(
        wheel, torch=torch, guards=guards, versions=versions, torch_exports=torch_exports
    )
    return judge_wheel(wheel, context, rules, flavour)


def _check_image(image: ElfImage, target: CheckTarget, flavour: AbiName) -> BinaryCheck:
    rules = registry.applicable(flavour)
    role = file_role(image.name)
    reading = registry.reading(rules)
    facts = reading.facts_of(image.name)
    binary = read_binary(image, role, facts, reading.own_of(role), reading=reading)
    return check_binary(binary, RuleContext(target=target), rules, flavour=flavour)


def check_elf(
    data: bytes, *, path: str, target: CheckTarget, flavour: AbiName = abis.STABLE.name
) -> BinaryCheck:
    """Check one ELF file's bytes, as a file given on its own."""
    with ElfImage(path, data) as image:
        return _check_image(image, target, flavour)


def said(checks: Sequence[BinaryCheck]) -> list[Violation]:
    """The violations of *checks* as they are to be said: each of its own, except that those of
    one kind (Finding.kind) in one wheel or file are one violation, worded by their rule's
    summary with a count (fbgemm-gpu's 2,082 libtorch symbols: one line, not 2,082); every one
    stays in the checks (--json)."""
    rules = {r.id: r for r in registry.all_rules()}
    wheels = {c.path: c.wheel for c in checks}
    groups: dict[tuple[str, str, str, str], list[Violation]] = {}
    order: list[Violation | tuple[str, str, str, str]] = []
    for c in checks:
        for v in c.violations:
            rule = rules.get(v.rule)
            if v.kind is None or rule is None or rule.summary is None:
                order.append(v)
                continue
            container = split_member(v.binary)[0] or v.binary
            key = (container, v.rule, v.kind, v.severity)
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(v)
    out: list[Violation] = []
    for item in order:
        if isinstance(item, Violation):
            out.append(item)
            continue
        members = groups[item]
        if len(members) == 1:
            out.append(members[0])
            continue
        summary = rules[item[1]].summary
        assert summary is not None
        wheel = wheels.get(members[0].binary)
        out.append(
            dataclasses.replace(
                members[0], symbol=None, message=summary(item[0], members, wheel), binary=item[0]
            )
        )
    return out


def require_clean(
    checks: Sequence[BinaryCheck], *, prefix: str = "", wheel: Path | None = None
) -> None:
    """A rule's error fails, naming every one (those of one kind in one wheel in one line with
    a count: said; *wheel*'s path shortened to its file name); a warning is logged."""
    found = said(checks)

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
    versions: VersionsFile | None = None,
    flavour: AbiName | None = None,
    torch_exports: LibraryExports | frozenset[str] | None = None,
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
            results.extend(
                check_wheel(
                    path,
                    torch=torch,
                    guards=guards,
                    versions=versions,
                    flavour=flavour,
                    torch_exports=torch_exports,
                )
            )
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
            target = CheckTarget(
                torch=torch,
                python=python,
                guards=guards,
                versions=versions,
                torch_exports=torch_exports,
            )
            # a file given on its own (no tags to tell): the stable-ABI check
            results.append(_check_image(image, target, flavour or abis.STABLE.name))
    return results
