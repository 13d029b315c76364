"""What a run produced, as data: the build's results per variant. Rendering (terminal, JSON
report, GitHub Actions) lives in the interface layer and only reads these."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.elf import member_path
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.sizecheck import SizeCheck
from wheelforge.binaries.verify import ArchCheck
from wheelforge.configuration.abi import STABLE, AbiName
from wheelforge.configuration.archs import ArchSet
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.planning.parallelism import Schedule
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain.compilecache import CacheStats


@dataclass(frozen=True, kw_only=True)
class JobReport:
    """One compile this run ran, and what it cost (running/build/jobwatch.py)."""

    source: str  # its path in the project
    rule: str  # nvcc, cxx, cc
    seconds: float  # wall time (ninja's log)
    # user + system time of all its processes, and bytes: the largest sum of their resident
    # memory at one moment, the largest single one; None: it ended before /proc was read
    cpu_seconds: float | None
    peak: int | None
    largest: int | None
    threads: int  # nvcc --threads it ran with (1 for a C/C++ compile)
    cached: bool | None  # the compile cache answered it; None: the cache does not say
    # its key in the job-cost history (planning/jobcosts.py)
    cost_key: str = field(default="", metadata={"internal": True})


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
    # What the import check ran, one line per shared object ("import pkg._C ok under torch
    # 2.13.0+cpu", "torch.ops.load_library('pkg/_ops.so') ok ..."); None: skipped.
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
    shared_objects: tuple[SharedObject, ...] = ()  # the wheel's own, in the matrix's order
    generated: int = 0  # generate steps ninja ran
    # The list of every file the compiles read (packaging/provenance.py), beside the build: its
    # sha256 is the one in the wheel's build info.
    inputs: Path | None = None
    index: str | None = (
        None  # the index folder it was published to (cu124); None: the output folder
    )


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


def shared_objects(
    plan: VariantPlan, size: SizeCheck, imported: tuple[str, ...] | None
) -> tuple[SharedObject, ...]:
    """Each shared object *plan* made, as the wheel holds it: its size (from *size*) and what
    the import check loaded of it (*imported*, in the plan's order)."""
    sizes = {member_path(s.binary): s for s in size.shared_objects}
    out = []
    for i, link in enumerate(plan.links):
        found = sizes.get(link.wheel_path)
        out.append(
            SharedObject(
                name=link.extension.name,
                role=link.role,
                path=link.wheel_path,
                size=found.size if found else 0,
                budget=link.extension.size_budget,
                loaded=imported[i] if imported and i < len(imported) else None,
            )
        )
    return tuple(out)
