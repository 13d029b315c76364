"""The one signature of an ABI rule, and what a rule declares about itself.

A rule is a module under ``binaries/rules/`` that defines ``RULE = Rule(...)``; the registry
(registry.py) finds it there, so adding a rule is adding its module (and its test). Every rule
has the same signature::

    def check(binary: BinaryFacts, context: RuleContext) -> Iterable[Finding]

*binary* is one ELF file as the walk read it, or, for a rule on the wheel as a whole (role
``wheel``), the wheel itself; *context* is what the binaries are checked against and the wheel
they came from. A rule yields Findings; the registry's caller makes them Violations, stamped with
the rule's id and severity and the binary's name, so a rule cannot misname itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from wheelforge.binaries.elf import ElfImage
from wheelforge.binaries.facts import (
    BINARY_ROLES,
    BinaryFacts,
    Fact,
    Role,
    WheelFact,
    WheelFacts,
)
from wheelforge.binaries.metadata import Declared
from wheelforge.binaries.symbols import LibraryExports
from wheelforge.configuration.abi import AbiName
from wheelforge.toolchain.shims import Version2, VersionsFile

# An error fails ``check`` and the build; a warning is shown and fails nothing.
Severity = Literal["error", "warning"]


# Where the lowest torch checked against comes from: --target (or the build's matrix), the
# wheel's Requires-Dist on torch, or (a wheel that states none) what its binaries need
# (inferred from their shims), or, where they use no shim to infer it from, the first torch with
# the stable ABI (assumed: nothing of theirs depends on it).
TorchSource = Literal["target", "requirement", "inferred", "assumed"]


@dataclass(frozen=True, kw_only=True)
class CheckTarget:
    """What the binaries are checked against."""

    torch: Version2  # the lowest torch they must load on
    python: Version2 | None  # the abi3 floor (cp310 → (3, 10)); None: no limited-API rule
    guards: dict[str, Version2 | None]  # shim header guards of the build torch (may be empty)
    # The torch at hand's shim_function_versions.txt, when it ships one (toolchain/shims.py).
    versions: VersionsFile | None = None
    # What the libraries of the torch at hand export (libtorch*, libc10*), read when first
    # asked; None when no torch is at hand.
    torch_exports: LibraryExports | frozenset[str] | None = None
    torch_source: TorchSource = "target"
    # The lowest Python the wheel's Requires-Python admits: installers keep the wheel off older
    # ones, so a limited-API symbol above the abi3 tag but within it breaks no install.
    requires_python: Version2 | None = None
    declared: Declared = field(default_factory=Declared)  # the wheel's METADATA (none: empty)


@dataclass(frozen=True, kw_only=True)
class RuleContext:
    """What every rule is given besides the binary: the target, and the wheel (None for a file
    given on its own) with the tags its file name carries."""

    target: CheckTarget
    wheel: WheelFacts | None = None
    tags: frozenset[str] = frozenset()

    @property
    def wheel_name(self) -> str:
        return self.wheel.path.name if self.wheel else ""


@dataclass(frozen=True)
class Finding:
    """One problem a rule found: the symbol it is about (if any) and the message, which names
    the binary, the problem and the fix; *severity* overrides the rule's for this finding (a
    rule whose error has a milder case, e.g. one Requires-Python covers)."""

    symbol: str | None
    message: str
    severity: Severity | None = None
    # The class of what it is about ("libtorch-cxx": a C++ symbol of libtorch): findings of one
    # class in one wheel are said in one line with a count (the rule's summary), not one a symbol.
    kind: str | None = None


@dataclass(frozen=True, kw_only=True)
class WheelSummary:
    """What a wheel declares and what its binaries allow, shared by its binaries' checks."""

    path: str
    declared: Declared  # its METADATA's torch requirement and Requires-Python
    tag_python: Version2 | None  # its abi3 tag's floor (cp38-abi3: 3.8)
    torch: Version2  # the lowest torch its binaries were checked against
    torch_source: TorchSource  # where that came from
    allows: str | None = None  # the widest correct torch requirement its binaries allow
    # Which CUDA builds of torch bring the CUDA runtime its binaries need of torch ("with CUDA
    # 12 (a cu12x build of torch; on PyPI: torch 2.10.0)"); None: they need none of torch.
    torch_cuda: str | None = None


@dataclass(frozen=True, kw_only=True)
class Violation:
    """One problem a rule found: the rule's id, the symbol it is about, and the message, which
    names the binary and the fix."""

    # the binary it is about: not a key of the document (a violation is listed under its
    # binary), so one read back from a document has "" until its binary's check names it
    binary: str = field(default="", metadata={"internal": True})
    rule: str = field(metadata={"doc": "the rule's id (docs/testing.md lists every rule)"})
    symbol: str | None
    message: str
    severity: Severity = field(
        default="error", metadata={"doc": "error: it fails the command; warning: it is shown"}
    )
    kind: str | None = field(
        default=None,
        metadata={
            "doc": "the class of what it is about (libtorch-cxx, python-non-limited): those of "
            "one class in one wheel are said in one line with a count; null: its own line"
        },
    )

    @property
    def blocking(self) -> bool:
        """Whether it fails the command (an error) or is only shown (a warning)."""
        return self.severity == "error"


Check = Callable[[BinaryFacts, RuleContext], Iterable[Finding]]
# A rule's one line for its violations of one kind in one wheel (or file): the container's name,
# the violations (two or more), and the wheel's summary (None for a file given on its own).
Summary = Callable[[str, Sequence[Violation], WheelSummary | None], str]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """An ABI rule as the registry holds it: what it is (for the docs table), what it applies
    to (the registry filters on it), what it reads, and its check."""

    id: str  # kebab-case, as violations and the docs name it
    doc: str  # one line: what it looks at
    source: str  # one line: where its truth comes from
    flavours: frozenset[AbiName]  # the ABIs (the matrix's ``abi``) it applies to
    roles: frozenset[Role]  # the roles it judges; ("wheel",) for a rule on the wheel as a whole
    needs: frozenset[Fact] = frozenset()  # what the walk must read of each binary it judges
    wheel_needs: frozenset[WheelFact] = frozenset()  # what it reads of the wheel (role wheel)
    severity: Severity = "error"
    # Where its findings (and its docs row) come among the others', lowest first: a binary's
    # violations are listed by it, so the first one (the one an error shows) is the most telling.
    order: int
    check: Check
    # A fact of the ELF file that only this rule needs (a dynamic-section entry, a note), read
    # in the walk from the one parse of each binary it judges; check finds it with
    # binary.own(id). The parser's errors (symbols.parser_raised) are reported as the file being
    # unreadable; anything else it raises, as a bug in the rule (errors.RuleBug, exit 70).
    read: Callable[[ElfImage], object] | None = None
    # How several of its violations of one kind are said in one line (Finding.kind).
    summary: Summary | None = None

    def __post_init__(self) -> None:
        if "wheel" in self.roles and len(self.roles) > 1:
            raise ValueError(f"rule {self.id}: a rule on the wheel judges no binary role too")
        if "wheel" in self.roles and (self.needs - {"metadata"} or self.read):
            raise ValueError(f"rule {self.id}: the wheel itself has no ELF facts to read")
        if self.wheel_needs and "wheel" not in self.roles:
            raise ValueError(f"rule {self.id}: only a rule on the wheel reads the wheel's facts")
        if "metadata" in self.needs and set(self.roles) != {"wheel"}:
            raise ValueError(f"rule {self.id}: METADATA is the wheel's, not a binary's")
        if "init-export" in self.needs and set(self.roles) - {"extension"}:
            raise ValueError(f"rule {self.id}: only an extension module has an init export")

    def applies(self, flavour: AbiName, role: Role) -> bool:
        return flavour in self.flavours and role in self.roles

    @property
    def on_binaries(self) -> bool:
        return any(role in BINARY_ROLES for role in self.roles)
