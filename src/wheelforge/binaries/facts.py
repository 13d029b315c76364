"""What the one walk over a wheel (reader.py) reads, as frozen data: per ELF file its fatbin
entries, symbols and init export, each read only when asked for (a Reading), and per wheel its
member names, tags and METADATA. Each file has a role, what it is to the wheel; the rules say
which roles they judge (rule.py), and so which facts are read of which file."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

from packaging.utils import canonicalize_name

from wheelforge.binaries import elf, initexport, loadson
from wheelforge.binaries.elf import ElfImage
from wheelforge.binaries.fatbin import FatbinEntry  # loadson's already: a stored entry reads it
from wheelforge.binaries.loadson import LoadsOn
from wheelforge.configuration.archs import code_sort_key

if TYPE_CHECKING:  # inspect reads fatbins only: the symbol reader is not loaded for it
    from wheelforge.binaries.initexport import InitExport
    from wheelforge.binaries.symbols import SymbolFacts

# What a file is to its wheel (roles.py infers it from the file's symbols; by name, before):
# - extension: a Python extension module, imported by name (``*.abi3.so``, ``*.cpython-*.so``);
# - library: any other ELF file of the wheel's own, e.g. one loaded with torch.ops.load_library;
# - bundled: a dependency auditwheel grafted into ``<name>.libs/`` (not the wheel's own);
# - program: an executable the wheel ships (run, not loaded);
# - wheel: the wheel itself, the subject of the rules on the wheel as a whole.
Role = Literal["extension", "library", "bundled", "program", "wheel"]
ROLES: tuple[Role, ...] = get_args(Role)
BINARY_ROLES: tuple[Role, ...] = ("extension", "library", "bundled", "program")
# The roles a wheel's own file (not grafted) may turn out to have once its symbols are read.
OWN_ROLES: tuple[Role, ...] = ("extension", "library", "program")
# What can be read of one ELF file (the init export: of an extension module only).
Fact = Literal["fatbins", "symbols", "init-export", "metadata"]
# What can be read of a wheel as a whole besides its names and METADATA: its RECORD, with every
# member's sha256 and size (each member inflated within the caps of bounded.py).
WheelFact = Literal["record"]
# A fact one rule reads itself from the parsed file: (the rule's id, its reader).
OwnReader = tuple[str, Callable[[ElfImage], object]]


def role_of(member: str) -> Role:
    """The role of a wheel member by its name."""
    if elf.is_grafted(member):
        return "bundled"
    return file_role(member)


def file_role(path: str) -> Role:
    """The role of an ELF file by its name (a file on disk is never a bundled one)."""
    return "extension" if initexport.module_leaf(path) else "library"


@dataclass(frozen=True, kw_only=True)
class ArchSum:
    """A binary's fatbin entries of one kind and arch, summed."""

    kind: str  # sass or ptx
    arch: str  # sm_90a, compute_120
    entries: int
    stored: int  # bytes as stored (compressed or not)
    size: int  # bytes once decompressed
    compressions: tuple[str, ...]  # none, lz4, zstd: each once, sorted


@dataclass(frozen=True)
class BinaryContents:
    """The fatbin entries of one ELF file, on disk or inside a wheel (what ``inspect`` lists),
    and where its kernels load (loads_on: inspect's table and every JSON document read it)."""

    path: str
    size: int
    entries: tuple[FatbinEntry, ...]
    # The PTX archs of a device-linked object's relocatable images (fatbin.linked_ptx_archs):
    # PTX the driver JIT-links, where the linked image has SASS only.
    linked_ptx: tuple[str, ...] = ()

    @functools.cached_property
    def by_arch(self) -> tuple[ArchSum, ...]:
        """Its entries summed per kind and arch, SASS first, each kind oldest first: what
        inspect's and the build's tables and the size check show."""
        sums: dict[tuple[str, str], list[int]] = {}
        kinds: dict[tuple[str, str], set[str]] = {}
        for e in self.entries:
            key = (e.kind, e.arch)
            acc = sums.setdefault(key, [0, 0, 0])
            acc[0] += 1
            acc[1] += e.stored_size
            acc[2] += e.size
            kinds.setdefault(key, set()).add(e.compression)
        ordered = sorted(sums, key=lambda k: (k[0] != "sass", code_sort_key(k[1])))
        return tuple(
            ArchSum(
                kind=kind,
                arch=arch,
                entries=sums[kind, arch][0],
                stored=sums[kind, arch][1],
                size=sums[kind, arch][2],
                compressions=tuple(sorted(kinds[kind, arch])),
            )
            for kind, arch in ordered
        )

    @functools.cached_property
    def loads_on(self) -> LoadsOn | None:
        """Per GPU generation where its kernels run (binaries/loadson.py decides, once per
        binary); None: no CUDA code."""
        return loadson.loads_on(self)

    @property
    def sass_archs(self) -> tuple[str, ...]:
        """The SASS archs, oldest first (sm_80, sm_90, sm_90a, sm_100, sm_100f)."""
        return _sorted_archs(entry for entry in self.entries if entry.kind == "sass")

    @property
    def ptx_archs(self) -> tuple[str, ...]:
        """The PTX archs, oldest first (compute_80, compute_90a, ...)."""
        return _sorted_archs(entry for entry in self.entries if entry.kind == "ptx")


def _sorted_archs(entries: Iterator[FatbinEntry]) -> tuple[str, ...]:
    unique = {entry.arch: (entry.sm, entry.variant) for entry in entries}
    return tuple(sorted(unique, key=lambda arch: unique[arch]))


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What the walk reads: for each role listed, its files and those facts of them (a role not
    listed is skipped without inflating its members); the wheel's METADATA; and whether members
    an installer would write outside the wheel's folder are read (the layout rule names them)."""

    facts: Mapping[Role, frozenset[Fact]] = field(default_factory=dict)
    metadata: bool = False
    unsafe_members: bool = True
    # Whether each file's role is inferred from its symbols (roles.py): then a wheel's own file
    # is read with what any of the roles it may have needs, and its symbols and init export.
    roles: bool = False
    record: bool = False  # RECORD and every member's hash (RecordFacts)
    # Facts a rule reads itself (Rule.read): (rule id, reader) by role.
    own: Mapping[Role, tuple[OwnReader, ...]] = field(default_factory=dict)

    def reads(self, role: Role) -> bool:
        return role in self.facts

    def reads_member(self, member: str) -> bool:
        """Whether the wheel member *member* is read at all (by the roles it may have)."""
        candidate = role_of(member)
        if self.roles and candidate != "bundled":
            return any(self.reads(r) for r in OWN_ROLES)
        return self.reads(candidate)

    def facts_of(self, member: str) -> frozenset[Fact]:
        """What is read of *member* before its role is known: with role inference, what any
        role it may have needs, and its symbols and init export."""
        candidate = role_of(member)
        if not self.roles or candidate == "bundled":
            return self.of(candidate)
        needs = frozenset[Fact]().union(*(self.of(r) for r in OWN_ROLES))
        return needs | {"symbols", "init-export"}

    def of(self, role: Role) -> frozenset[Fact]:
        return self.facts.get(role, frozenset())

    def own_of(self, role: Role) -> tuple[OwnReader, ...]:
        return self.own.get(role, ())

    def __or__(self, other: Reading) -> Reading:
        roles = [r for r in ROLES if self.reads(r) or other.reads(r)]
        return Reading(
            facts={r: self.of(r) | other.of(r) for r in roles},
            metadata=self.metadata or other.metadata,
            unsafe_members=self.unsafe_members or other.unsafe_members,
            roles=self.roles or other.roles,
            record=self.record or other.record,
            own={r: (*self.own_of(r), *other.own_of(r)) for r in roles},
        )


# The fatbins of every ELF file (inspect; a build's arch and size checks).
FATBINS = Reading(facts={role: frozenset({"fatbins"}) for role in BINARY_ROLES})


@dataclass(frozen=True, kw_only=True)
class BinaryFacts:
    """One ELF file as read, or the wheel itself (role ``wheel``); a fact not read is None."""

    name: str  # the path, or x.whl!member
    member: str | None  # the path inside the wheel, for a wheel member
    role: Role
    size: int
    role_reason: str = ""  # the evidence for the role (roles.py), "" when taken from the name
    fatbins: tuple[FatbinEntry, ...] | None = None
    linked_ptx: tuple[str, ...] = ()  # read with fatbins (fatbin.linked_ptx_archs)
    symbols: SymbolFacts | None = None
    init_export: InitExport | None = None  # an extension module's PyInit_<leaf>
    own_facts: tuple[tuple[str, object], ...] = ()  # (rule id, what its Rule.read read)

    @property
    def display(self) -> str:
        """The path inside the wheel for a member, else the name."""
        return self.member or self.name

    def contents(self) -> BinaryContents:
        return BinaryContents(
            path=self.name, size=self.size, entries=self.fatbins or (), linked_ptx=self.linked_ptx
        )

    def own(self, rule_id: str) -> object:
        """What the rule *rule_id* read of this file itself (its Rule.read)."""
        for owner, value in self.own_facts:
            if owner == rule_id:
                return value
        raise LookupError(f"{self.name}: rule {rule_id} read nothing of it")

    def need_symbols(self) -> SymbolFacts:
        """The symbols, for a rule that declared it needs them."""
        if self.symbols is None:
            raise LookupError(f"{self.name}: symbols not read; the rule must list them in needs")
        return self.symbols


@dataclass(frozen=True, kw_only=True)
class RecordFacts:
    """A wheel's RECORD as the walk read it, and what its members really are."""

    member: str | None  # <name>.dist-info/RECORD, if the wheel has one
    text: str | None  # its text
    digests: tuple[tuple[str, str, int], ...]  # (member, sha256=<urlsafe b64>, size) of each file
    duplicates: tuple[str, ...]  # member names the zip lists more than once


@dataclass(frozen=True, kw_only=True)
class WheelFacts:
    """A wheel as the walk read it: its member names, METADATA, and its ELF members."""

    path: Path
    names: tuple[str, ...]  # every member name, as the zip lists them
    tagged_name: str  # the file name as packaging parses it (a variant label dropped)
    metadata_member: str | None  # <name>.dist-info/METADATA, if it has one
    metadata: str | None  # its text, when the Reading asked for it
    binaries: tuple[BinaryFacts, ...]
    record: RecordFacts | None = None  # when the Reading asked for it

    @property
    def distribution(self) -> str:
        """Its distribution's name as the file name says it, normalized (torch, torchvision)."""
        return canonicalize_name(self.tagged_name.split("-", 1)[0])

    @property
    def is_torch(self) -> bool:
        """Whether it is torch's own wheel: its binaries are libtorch, not an extension of it."""
        return self.distribution == "torch"

    def subject(self) -> BinaryFacts:
        """The wheel as the subject of the rules on the wheel as a whole (role ``wheel``)."""
        return BinaryFacts(name=str(self.path), member=None, role="wheel", size=0)

    def contents(self) -> tuple[BinaryContents, ...]:
        """The fatbin entries of the ELF members read."""
        return tuple(b.contents() for b in self.binaries)
