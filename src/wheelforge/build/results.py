"""What a run produced, as data: the build's results per variant. Rendering (terminal, JSON
report, GitHub Actions) lives in cli/ and documents/, which only read these."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.elf import member_path
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.rule import Violation
from wheelforge.binaries.sizecheck import SizeCheck
from wheelforge.binaries.verify import ArchCheck
from wheelforge.configuration.abi import STABLE, AbiName
from wheelforge.configuration.archs import ArchSet
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.planning.parallelism import Schedule
from wheelforge.planning.plan import DeviceShare, VariantPlan
from wheelforge.toolchain.compilecache import CacheStats
from wheelforge.toolchain.shims import Version2


@dataclass(frozen=True, kw_only=True)
class JobReport:
    """One compile this run ran, and what it cost (build/jobwatch.py)."""

    source: str  # its path in the project
    rule: str  # nvcc, cxx, cc
    seconds: float  # wall time (ninja's log)
    # user + system time of all its processes, and bytes: the largest sum of their resident
    # memory at one moment, the largest single one (foundation/jobcost.py, jobwatch.py); None:
    # not measured (a compile sccache's server ran: build/compiling.served_rules)
    cpu_seconds: float | None
    peak: int | None
    largest: int | None
    threads: int  # nvcc --threads it ran with (1 for a C/C++ compile)
    cached: bool | None  # the compile cache answered it; None: the cache does not say
    # its key in the job-cost history (planning/jobcosts.py)
    cost_key: str = field(default="", metadata={"internal": True})


@dataclass(frozen=True, kw_only=True)
class AbiSummary:
    """What a wheel's binaries call of torch and of Python, together (the summary line and the
    report's ``abi`` both say this)."""

    checked: bool  # False: no ABI rules judged the wheel
    shims: tuple[str, ...]  # every torch C shim function its binaries call, sorted
    newest_shim: Version2 | None  # the torch version of the newest of them
    python_symbols: tuple[str, ...]  # every limited-API function, sorted
    violations: tuple[Violation, ...]

    @classmethod
    def of(cls, checks: tuple[BinaryCheck, ...]) -> AbiSummary:
        return cls(
            checked=bool(checks),
            shims=tuple(sorted({s for c in checks for s in c.shims})),
            newest_shim=max((c.newest_shim for c in checks if c.newest_shim), default=None),
            python_symbols=tuple(sorted({s for c in checks for s in c.python_symbols})),
            violations=tuple(v for c in checks for v in c.violations),
        )


@dataclass(frozen=True, kw_only=True)
class SharedObject:
    """One shared object of a built wheel: what it is, its size against its budget, and what
    the import check did with it."""

    name: str = field(metadata={"doc": "the extension's name in matrix.yaml (pkg._C)"})
    role: Literal["extension", "library"] = field(
        metadata={
            "doc": "extension: a module imported by name; library: loaded with torch.ops.load_library"
        }
    )
    path: str = field(metadata={"doc": "its path inside the wheel (pkg/_C.abi3.so)"})
    size: int = field(metadata={"doc": "bytes of the file, as installed"})
    budget: int | None = field(metadata={"doc": "its own size budget in bytes; null: none"})
    loaded: str | None = field(
        metadata={"doc": "what the import check ran for it; null: --no-import-check"}
    )


@dataclass(frozen=True, kw_only=True)
class VariantResult:
    variant_id: str
    arch_set: ArchSet
    toolkit: str
    torch: str  # the torch compiled against
    wheel: Path
    wheel_size: int
    sha256: str
    sources: int  # compile steps in the plan
    compiled: tuple[str, ...]  # the compile steps ninja ran (empty: everything was up to date)
    reused: bool  # the wheel in the output folder was already made from these inputs
    binaries: tuple[BinaryContents, ...]
    arch_checks: tuple[ArchCheck, ...]  # each binary against the arch set (binaries/verify.py)
    abi_checks: tuple[BinaryCheck, ...]
    size: SizeCheck
    stages: tuple[tuple[str, float], ...]  # (stage, seconds): compile, package, verify, publish
    seconds: float
    # What the import check ran, one line per top-level package and shared object ("import pkg
    # ok under torch 2.13.0+cpu", "import pkg._C ok ...", "torch.ops.load_library('pkg/_ops.so')
    # ok ..."); None: skipped.
    import_check: tuple[str, ...] | None = None
    # PEP 825 variant wheels only: the label, the properties in variant.json, and the null
    # variant published from the same build, if this is the one the matrix names.
    variant_label: str | None = None
    variant_properties: tuple[str, ...] = ()
    null_wheel: Path | None = None
    reproducible: str | None = None  # sha256 of the identical rebuild (--verify-reproducible)
    compile_cache: CacheStats | None = None  # None: no cache, or nothing was compiled
    jobs: tuple[JobReport, ...] = ()  # each compile this run ran, with its cost
    peak_memory: int | None = None  # bytes: the compiles' largest resident memory at once
    schedule: Schedule | None = None  # how -j, nvcc threads and the heavy pool were chosen
    # whether its .cu sources compiled as nvcc's steps shared between arch sets, and why
    device_share: DeviceShare | None = None
    shared_objects: tuple[SharedObject, ...] = ()  # the wheel's own, in the matrix's order
    generated: int = 0  # generate steps ninja ran
    # The list of every file the compiles read (packaging/provenance.py), beside the build: its
    # sha256 is the one in the wheel's build info.
    inputs: Path | None = None
    index: str | None = (
        None  # the index folder it was published to (cu124); None: the output folder
    )

    @property
    def tags(self) -> tuple[str, ...]:
        """The wheel's tags, sorted (from its file name)."""
        from packaging.utils import parse_wheel_filename

        from wheelforge.packaging import wheel_variants

        # A PEP 825 variant label is no tag, and packaging cannot parse a name that has one.
        _, _, _, tags = parse_wheel_filename(
            wheel_variants.plain_name(self.wheel, self.variant_label)
        )
        return tuple(sorted(str(t) for t in tags))

    @functools.cached_property
    def abi(self) -> AbiSummary:
        """Its binaries' ABI checks together."""
        return AbiSummary.of(self.abi_checks)

    @property
    def up_to_date(self) -> int:
        """Compile steps ninja did not need to run."""
        return self.sources - len(self.compiled)

    @property
    def cache_hits(self) -> int:
        """This run's compiles the compile cache answered."""
        return sum(1 for j in self.jobs if j.cached)

    @property
    def cpu_seconds(self) -> float:
        """The CPU time of this run's compiles (those measured)."""
        return sum(j.cpu_seconds or 0.0 for j in self.jobs)

    @property
    def costs_in_server(self) -> bool:
        """Whether the compiles ran in the compile cache's server (sccache), where their CPU
        time and memory are not measured."""
        cache = self.compile_cache
        return (
            cache is not None and cache.in_server and all(j.cpu_seconds is None for j in self.jobs)
        )

    def slowest(self, count: int) -> tuple[JobReport, ...]:
        """This run's *count* slowest compiles, slowest first."""
        return tuple(sorted(self.jobs, key=lambda j: -j.seconds)[:count])


@dataclass(frozen=True, kw_only=True)
class VariantFailure:
    """A variant that did not produce a wheel, and why; the other variants still build."""

    variant_id: str
    arch_set: ArchSet
    toolkit: str
    torch: str
    error: WheelforgeError
    size: SizeCheck | None  # set when the wheel was built but is over its size budget
    stages: tuple[tuple[str, float], ...]
    seconds: float


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    matrix: Path
    abi: AbiName = STABLE.name  # configuration/abi.py: what it decides
    target_version: tuple[int, int]
    built_against: str
    variants: tuple[VariantResult, ...]
    failures: tuple[VariantFailure, ...] = ()
    seconds: float = 0.0
    variants_json: Path | None = None  # the index-level {name}-{version}-variants.json
    # why no compile cache was used (toolchain/compilecache.none_reason); None: one was
    no_compile_cache: str | None = None
    # the torches `wheelforge test` runs the matrix's tests under; None: it has no tests section
    test_torches: tuple[str, ...] | None = None

    @property
    def first_error(self) -> WheelforgeError | None:
        return self.failures[0].error if self.failures else None

    @property
    def reused(self) -> int:
        """Wheels an earlier build made from the same inputs (up to date)."""
        return sum(1 for v in self.variants if v.reused)

    @property
    def built(self) -> int:
        """Wheels this run made."""
        return len(self.variants) - self.reused


def shared_objects(
    plan: VariantPlan, size: SizeCheck, imported: tuple[str, ...] | None
) -> tuple[SharedObject, ...]:
    """Each shared object *plan* made, as the wheel holds it: its size (from *size*) and what
    the import check loaded of it (*imported*, in the plan's order)."""
    sizes = {member_path(s.binary): s for s in size.shared_objects}
    out = []
    for link in plan.links:
        found = sizes.get(link.wheel_path)
        # its line among the import check's (which imports the wheel's packages first)
        heads = (f"import {link.extension.name} ", f"torch.ops.load_library('{link.wheel_path}')")
        out.append(
            SharedObject(
                name=link.extension.name,
                role=link.role,
                path=link.wheel_path,
                size=found.size if found else 0,
                budget=link.extension.size_budget,
                loaded=next((line for line in imported or () if line.startswith(heads)), None),
            )
        )
    return tuple(out)
