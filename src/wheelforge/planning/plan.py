"""The plan of one variant: every path, flag and step decided up front, in an immutable object
that the ninja writer, the packer, the checks and the report read. planning/planner.py makes it
from PlanInputs, the variant and the torch it compiles against; nothing changes a plan once it
is made: other inputs (the reproducibility twin's, torch's confirmed answer) make another plan.

A plan's parts follow who reads them: ``compile`` (the ninja file, the freshness stamp, the build
info), ``links`` (one per shared object of the wheel: its objects, link flags, where it lands,
what the import check does with it), ``wheel`` (packing, metadata) and ``abi`` (the flavour's
decisions: tag, pin, which rules hold the binaries)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.version import Version

from wheelforge.configuration.abi import AbiForTorch
from wheelforge.configuration.archs import ArchSet, gencode_flag
from wheelforge.configuration.matrix.model import ExtensionConfig, Matrix, PackageConfig
from wheelforge.configuration.settings import BuildSettings, Launchers
from wheelforge.foundation.resources import MemoryLimit
from wheelforge.planning import reproducible
from wheelforge.planning.jobcosts import JobCost
from wheelforge.planning.parallelism import Schedule
from wheelforge.planning.selection import Member, ProjectFiles
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.compilecache import CompileCache
from wheelforge.toolchain.headerlibs import HeaderLibrary
from wheelforge.toolchain.torchprobe import TorchEnv

# nvcc_host, nvcc_device, fatbin: nvcc's steps as jobs of their own (planning/devshare.py)
Rule = Literal["cxx", "cc", "nvcc", "nvcc_host", "nvcc_device", "fatbin"]


def flags_rule(rule: Rule) -> Literal["cxx", "cc", "nvcc"]:
    """Which of a FlagSet's flags *rule* compiles with: nvcc's steps take the nvcc flags."""
    return rule if rule in ("cxx", "cc") else "nvcc"


@dataclass(frozen=True, kw_only=True)
class DeviceShare:
    """Whether a variant's ``.cu`` sources compile as nvcc's steps, each (source, arch) once
    across the arch sets of one toolkit and flags (planning/devshare.py), and why."""

    on: bool
    why: str


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """What planning takes besides a variant and the torch it compiles against: the same for
    every variant of a build. The reproducibility twin's inputs are another value (twin())."""

    # The build's settings, read where planning needs them (never copied here field by field):
    # the matrix, build_root, out_dir, the host compilers and the launchers the environment
    # names (where it names none, the compile cache's: toolchain/compilecache.launchers), jobs
    # (ninja -j; None: ninja's default), nvcc_threads (NVCC_THREADS; None: as many as fill the
    # cores), cache_dir (where the probes planning asks are cached), python (the build Python:
    # what {python} runs in a generate step).
    settings: BuildSettings
    compile_cache: CompileCache | None = None
    cores: int = 1  # the cores the build may use (foundation/resources.cores)
    # the memory the compiles may use: --memory-limit, else what the machine and its cgroups
    # leave (foundation/resources.available_memory); None: not known, the cores decide
    memory: MemoryLimit | None = None
    # what earlier builds measured of each compile step (planning/jobcosts.py), by step key
    costs: Mapping[str, JobCost] = dataclasses.field(default_factory=dict)
    # The matrix's header libraries, found (toolchain/headerlibs.resolve): folders, versions.
    header_libraries: tuple[HeaderLibrary, ...] = ()
    # What of the project the wheels carry, found by the build's one walk (selection.py); the
    # reproducibility twin packs the same files
    files: ProjectFiles

    def twin(self, folder: Path) -> PlanInputs:
        """The inputs of ``--verify-reproducible``'s second build: in *folder*, with no compile
        cache and no launcher at all (a cache hit would hand it the first build's objects,
        identical by construction). Where nvcc runs through sccache, whose split of an nvcc
        compile names its temporaries its own way (toolchain/compilecache.py), the twin's
        nvcc runs through it too, on an empty cache of its own that nothing else reaches."""
        cache, settings = self.compile_cache, self.settings
        return dataclasses.replace(
            self,
            settings=dataclasses.replace(
                settings,
                build_root=folder / "build",
                out_dir=folder / "dist",
                compilers=dataclasses.replace(settings.compilers, launchers=Launchers()),
            ),
            compile_cache=cache.alone(folder / "sccache") if cache and cache.splits_nvcc else None,
        )


@dataclass(frozen=True, kw_only=True)
class CompileStep:
    source: Path
    object: Path
    rule: Rule
    arch_set: ArchSet | None = None  # for a source with arch limits: what it is compiled for
    # per-source flags: the source's path-free name for seeds (reproducible.py), then its own
    # (matrix.yaml's `{files: GLOB, flags: [...]}`)
    flags: str = ""
    # Which of CompilePlan.flag_sets it compiles with: the first extension's that lists it (a
    # source two extensions compile with the same flags is compiled once).
    flag_set: int = 0
    # its key in the job-cost history (planning/jobcosts.step_key): its name, rule, flags
    cost_key: str = ""
    heavy: bool = False  # in the heavy pool: at most schedule.heavy_depth of them at once
    # its wall time at the schedule's threads, from an earlier build; None: never measured
    expected_seconds: float | None = None
    # nvcc's steps (planning/devshare.py): an nvcc_device step's code (sm_90, compute_90); what
    # a step reads besides its source (a fatbin: the images and the host object) and what it
    # runs after (the host step: its source's device steps, one of which wrote the stub)
    code: str = ""
    inputs: tuple[Path, ...] = ()
    after: tuple[Path, ...] = ()

    @property
    def gencode(self) -> str | None:
        """Its own -gencode flags, for a source with arch limits or an nvcc_device step (its one
        code); else None: the plan's."""
        if self.code and self.arch_set is not None:
            return gencode_flag(self.arch_set.archs[0].ptx, self.code)
        return self.arch_set.gencode() if self.arch_set is not None else None


@dataclass(frozen=True, kw_only=True)
class FlagSet:
    """One extension's compile flags (without -gencode: that is per step)."""

    cxx: str
    cc: str
    nvcc: str


@dataclass(frozen=True, kw_only=True)
class GenerateEdge:
    """A generate step as ninja runs it: its command (placeholders filled in), run in its
    output folder, again whenever an input or the command changes."""

    name: str
    command: tuple[str, ...]
    written: tuple[str, ...]  # the command as matrix.yaml writes it ({python}, {out}: path-free)
    folder: Path  # its output folder (and working folder), inside the build folder
    inputs: tuple[Path, ...]  # what it reads: a change runs it again
    outputs: tuple[Path, ...]  # what it writes: the sources that name them wait for it
    timeout: int  # seconds


@dataclass(frozen=True, kw_only=True)
class GeneratedFile:
    path: Path
    text: str


@dataclass(frozen=True, kw_only=True)
class CompilePlan:
    """How the sources become objects: the compilers and what runs in front of them, their
    flags, one step per source, the generated files, and how many compile at once."""

    cxx: str
    cc: str
    nvcc: Path
    nvcc_host: str  # the host compiler nvcc runs (-ccbin): one the toolkit accepts
    launchers: Launchers  # words run in front of each compiler (ccache, sccache, distcc)
    compile_cache: CompileCache | None  # the cache the launchers are; its session wraps ninja
    flag_sets: tuple[FlagSet, ...]  # one per extension, in the order of VariantPlan.links
    gencode: str  # the arch set's -gencode flags; a limited source has its own
    steps: tuple[CompileStep, ...]
    left_out: tuple[Path, ...]  # limited sources with no arch in common with the arch set
    generated: tuple[GeneratedFile, ...]
    generate: tuple[GenerateEdge, ...]  # the matrix's generate steps, before any compile
    header_libraries: tuple[HeaderLibrary, ...]  # their include folders are in the flags
    # What every compile waits for and depends on besides its source: the header libraries'
    # content stamp (a changed library recompiles what it was given to)
    header_stamp: GeneratedFile | None
    # nvcc before CUDA 12.9: the fixed-pid library it runs with (reproducible.py); None: none
    nvcc_preload: Path | None
    # every folder the compiles read from, and its path-free name (reproducible.prefix_maps)
    input_folders: tuple[tuple[Path, str], ...]
    jobs: int | None  # ninja -j; None: ninja's default
    nvcc_threads: int  # nvcc --threads, given through NVCC_APPEND_FLAGS (build/ninja.py)
    # nvcc --split-compile's partitions, in the nvcc flags (planner.split_partitions); 0: none.
    # Its threads come from a jobserver ninja runs under (build/ninja.py)
    split_compile: int = 0
    # how -j, the threads and the heavy pool were chosen (planning/parallelism.py), with the
    # memory they keep to and the compiles' expected time
    schedule: Schedule
    # whether the .cu sources compile as nvcc's steps shared between arch sets, and why
    device_share: DeviceShare = DeviceShare(on=False, why="no .cu source")


@dataclass(frozen=True, kw_only=True)
class DeviceLink:
    """nvcc's device-link step of a shared object built from relocatable device code: the
    device code of *objects* linked into one host object (``nvcc -dlink``), for the arch set's
    -gencode. Without it the link leaves ``__cudaRegisterLinkedBinary_*`` undefined (NVIDIA's
    "Using Separate Compilation in CUDA", nvcc manual section 6)."""

    objects: tuple[Path, ...]  # the nvcc objects compiled with -rdc=true
    output: Path  # the object it writes, linked into the shared object
    flags: str  # -ccbin, -Xcompiler=-fPIC, the prefix maps: what its host compile needs


@dataclass(frozen=True, kw_only=True)
class LinkPlan:
    """One shared object of the wheel: what is linked into it, how, and where it lands."""

    extension: ExtensionConfig  # its name (pkg._C), leaf (_C), kind (module, library, plain)
    objects: tuple[Path, ...]  # the compile steps' objects linked into it
    ldflags: str
    library: Path  # the linked shared object in the build dir
    export_map: Path  # the linker version script (planner.export_map)
    wheel_path: str  # where it goes inside the wheel, e.g. pkg/_C.abi3.so
    # The stable-ABI torch it is compiled for (-DTORCH_TARGET_VERSION); None for the unstable ABI
    torch_target: tuple[int, int] | None = None
    # Relocatable device code (nvcc -rdc=true, CMake's CUDA_SEPARABLE_COMPILATION): the object
    # ``nvcc -dlink`` makes of its CUDA objects, linked in with them; None: no device link.
    device_link: DeviceLink | None = None

    @property
    def role(self) -> Literal["extension", "library"]:
        """What it is to the wheel, as binaries/facts.py names the roles: an ``extension``
        module imported by name, or a ``library`` (loaded with torch.ops.load_library, or a
        plain one with ctypes)."""
        return "extension" if self.extension.kind == "module" else "library"


@dataclass(frozen=True, kw_only=True)
class WheelPlan:
    """What goes into the wheel and how it is named, besides the ABI's tag and pin."""

    package: PackageConfig  # its packages, data, metadata
    requires_python: str
    version: str  # the package's, plus the variant's local label if any (wheel_version)
    dist_info: str  # its .dist-info folder (selection.dist_info)
    # every member, sorted by name: the project's files, the shared objects the build makes,
    # the .dist-info files (selection.wheel_members); the packer writes these and no other
    members: tuple[Member, ...]


@dataclass(frozen=True, kw_only=True)
class VariantPlan:
    variant: Variant
    torch: TorchEnv  # the torch it compiles against
    abi: AbiForTorch  # what the matrix's ABI decides given this torch (configuration/abi.py)
    project: Path  # the folder matrix.yaml is in
    matrix_path: Path  # matrix.yaml, for messages that name it
    build_dir: Path
    out_dir: Path
    compile: CompilePlan
    links: tuple[LinkPlan, ...]  # one per extension, in the matrix's order
    wheel: WheelPlan
    # Its C++ and C compiles, in the build folder every variant with the same commands shares
    # (planning/hostshare.py): a plan of their own with no link; None: all are in build_dir
    host: VariantPlan | None = None

    @property
    def python_tag(self) -> str:
        """The wheel's Python and ABI tags: the ABI's (cp310-abi3, cp311-cp311), or ``py3-none``
        where every binary is a plain library, no CPython extension module (bitsandbytes' own
        wheels: Python loads it with ctypes, so any CPython 3 can, limited API or not)."""
        if self.links and all(link.extension.kind == "plain" for link in self.links):
            return "py3-none"
        return self.abi.abi_tag

    def command_path(self, path: Path) -> str:
        """*path* as the compile commands name it (reproducible.spelling): relative to the build
        folder (where ninja runs them) when it lies in the build folder, or in the project while
        the build folder does too; absolute for nvcc before CUDA 12.9, which runs from /."""
        return self._spelling(path)

    @functools.cached_property
    def _spelling(self) -> Callable[[Path], str]:
        root = self.project.resolve()
        return reproducible.spelling(self.build_dir, root, self.variant.toolkit.version)


def wheel_version(matrix: Matrix, variant: Variant) -> str:
    """The wheel's version: the package's, plus the variant's local label if any."""
    label = variant.local_label
    return str(Version(f"{matrix.package.version}+{label}")) if label else matrix.package.version
