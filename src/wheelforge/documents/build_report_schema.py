"""The build report (``wheelforge build --report PATH``): one JSON document per run, also when
the run fails, and what the GitHub Actions step summary (cli/ci.py) is written from.
Its model is the frozen dataclasses below (documents/kinds.py says what every document
shares); a binary's fatbins are written as inspect --json writes them, a violation as
binaries/rule.Violation writes itself (as in check --json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from wheelforge import __version__
from wheelforge.binaries.rule import Violation
from wheelforge.binaries.sizecheck import SizeCheck
from wheelforge.build.results import (
    AbiSummary,
    BuildReport,
    JobReport,
    SharedObject,
    VariantFailure,
    VariantResult,
)
from wheelforge.configuration.abi import AbiName
from wheelforge.configuration.settings import BuildSettings
from wheelforge.documents.inspect_schema import BinaryDoc, binary_doc
from wheelforge.documents.kinds import DocumentKind, Version2, doc, version_text
from wheelforge.foundation.diagnostics import Diagnostic
from wheelforge.foundation.document import schema_version
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.planning.parallelism import Schedule
from wheelforge.planning.plan import DeviceShare
from wheelforge.toolchain.compilecache import CacheStats

VERSION = 1


@dataclass(frozen=True, kw_only=True)
class ErrorDoc:
    """Why a run or a variant failed."""

    kind: str = field(
        metadata=doc("configuration, tool, build, verification, size-budget, environment, ...")
    )
    exit_code: int = field(metadata=doc("the exit code this error gives"))
    message: str = field(metadata=doc("the one-line message"))
    details: str | None = field(metadata=doc("more lines: a compiler's output, further problems"))
    diagnostics: tuple[Diagnostic, ...] = field(metadata=doc("files and lines the error points at"))


@dataclass(frozen=True, kw_only=True)
class ArchSetDoc:
    name: str
    archs: str = field(metadata=doc('as written in matrix.yaml: "8.0 9.0a 12.0+PTX"'))


@dataclass(frozen=True, kw_only=True)
class MatrixDoc:
    """The matrix the run used (after --archs / TORCH_CUDA_ARCH_LIST)."""

    path: str
    package: str
    version: str
    abi: AbiName
    python_abi: str
    torch: str = field(metadata=doc("the torch requirement"))
    target: str = field(metadata=doc("the stable-ABI target torch version"))
    cuda: tuple[str, ...]
    arch_sets: tuple[ArchSetDoc, ...]


@dataclass(frozen=True, kw_only=True)
class SettingsDoc:
    arch_source: str = field(metadata=doc("where the arch sets came from"))
    out_dir: str
    build_dir: str
    jobs: int | None
    python: str
    only: tuple[str, ...]
    offline: bool
    size_budget: int = field(metadata=doc("bytes allowed per wheel"))


@dataclass(frozen=True, kw_only=True)
class WheelDoc:
    path: str = field(metadata=doc("absolute path of the published wheel"))
    size: int
    sha256: str
    tags: tuple[str, ...] = field(metadata=doc("e.g. cp310-abi3-manylinux_2_34_x86_64"))
    reused: bool = field(metadata=doc("already in the output folder, made from the same inputs"))
    import_check: str | None = field(
        default=None,
        metadata=doc(
            "the import of its shared objects before publishing, one per shared object joined "
            "by '; '; null: --no-import-check"
        ),
    )
    reproducible: str | None = field(
        default=None,
        metadata=doc("sha256 of the identical rebuild in another folder (--verify-reproducible)"),
    )
    inputs: str | None = field(
        default=None,
        metadata=doc(
            "the list of every file the compiles read, with its sha256 (beside the build); "
            "its own sha256 is inputs.sha256 in the wheel's wheelforge-build.json"
        ),
    )
    index: str | None = field(
        default=None,
        metadata=doc(
            "the index folder it went to in the output folder (cuda-index), the package index it "
            "belongs in: cu124; null: the output folder itself"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class AbiDoc:
    """The stable-ABI check of the variant's binaries."""

    verdict: Literal["ok", "violations", "not-checked"]
    target: str = field(metadata=doc("the lowest torch the binaries must load on"))
    newest_shim: str | None = field(metadata=doc("the torch version of the newest shim used"))
    shims: tuple[str, ...]
    python_symbols: tuple[str, ...]
    violations: tuple[Violation, ...]


@dataclass(frozen=True, kw_only=True)
class CompileDoc:
    """What ninja did, and what the compile cache answered for the compiles it ran."""

    sources: int
    compiled: int = field(metadata=doc("sources compiled in this run"))
    up_to_date: int = field(metadata=doc("sources ninja found up to date and skipped"))
    generated: int = field(
        default=0, metadata=doc("generate steps ninja ran (their inputs or command changed)")
    )
    cache: CacheStats | None = field(
        default=None,
        metadata=doc(
            "the compile cache's counts for this run (ccache or sccache); null: no cache, or "
            "nothing was compiled"
        ),
    )
    jobs: tuple[JobReport, ...] = field(
        default=(),
        metadata=doc(
            "each compile this run ran: wall and CPU seconds, peak memory (bytes: the sum of "
            "its processes' resident memory at its peak; largest: its largest process), nvcc "
            "threads, whether the cache answered it (null: the cache does not say)"
        ),
    )
    peak_memory: int | None = field(
        default=None,
        metadata=doc("bytes: the compiles' largest resident memory at one moment; null: none ran"),
    )
    schedule: Schedule | None = field(
        default=None,
        metadata=doc(
            "how -j, the nvcc threads and the heavy pool were chosen: the memory kept to "
            "(bytes, and what set it), the heavy steps and how many of them run at once, the "
            "expected peak and seconds, how many steps earlier builds measured"
        ),
    )
    device_share: DeviceShare | None = field(
        default=None,
        metadata=doc(
            "whether the .cu sources compiled as nvcc's steps, each (source, arch) and each "
            "source's host side once for every arch set of the toolkit and flags (on), or one "
            "nvcc -c per source and arch set (off), and why"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class StageDoc:
    name: str = field(metadata=doc("compile, package, verify, publish"))
    seconds: float


@dataclass(frozen=True, kw_only=True)
class VariantDoc:
    id: str
    arch_set: ArchSetDoc
    toolkit: str = field(metadata=doc("CUDA version"))
    torch: str = field(metadata=doc("the torch compiled against"))
    status: Literal["built", "up-to-date", "failed"]
    error: ErrorDoc | None
    wheel: WheelDoc | None
    binaries: tuple[BinaryDoc, ...]
    shared_objects: tuple[SharedObject, ...] = field(
        metadata=doc(
            "the wheel's own shared objects (matrix.yaml's extensions), each with its role, "
            "size, budget and import check"
        )
    )
    abi: AbiDoc | None
    size: SizeCheck | None = field(
        metadata=doc(
            "the wheel against its size budget, per arch; each shared object against its own"
        )
    )
    compile: CompileDoc | None
    stages: tuple[StageDoc, ...]
    seconds: float


@dataclass(frozen=True, kw_only=True)
class BuildReportDocument:
    """One wheelforge build run."""

    schema_version: int = schema_version(VERSION)
    wheelforge: str = field(metadata=doc("the wheelforge version"))
    status: Literal["success", "failed"]
    exit_code: int
    error: ErrorDoc | None = field(
        metadata=doc("the run's error: the first failure, or what stopped it")
    )
    matrix: MatrixDoc | None = field(metadata=doc("null when the matrix could not be read"))
    settings: SettingsDoc | None
    built_against: str | None = field(metadata=doc("the torch the extension was compiled against"))
    variants: tuple[VariantDoc, ...]
    seconds: float
    no_compile_cache: str | None = field(
        default=None, metadata=doc("why no compile cache was used; null: one was, or none ran")
    )


KIND = DocumentKind("build-report", BuildReportDocument, VERSION, "wheelforge build report")


def error_doc(exc: WheelforgeError) -> ErrorDoc:
    return ErrorDoc(
        kind=exc.kind,
        exit_code=exc.exit_code,
        message=exc.message,
        details=exc.details,
        diagnostics=exc.diagnostics,
    )


def _abi(found: AbiSummary, target: Version2) -> AbiDoc:
    return AbiDoc(
        verdict="not-checked" if not found.checked else "violations" if found.violations else "ok",
        target=f"{target[0]}.{target[1]}",
        newest_shim=version_text(found.newest_shim),
        shims=found.shims,
        python_symbols=found.python_symbols,
        violations=found.violations,
    )


def _failed(v: VariantFailure) -> VariantDoc:
    return VariantDoc(
        id=v.variant_id,
        arch_set=ArchSetDoc(name=v.arch_set.name, archs=str(v.arch_set)),
        toolkit=v.toolkit,
        torch=v.torch,
        status="failed",
        error=error_doc(v.error),
        wheel=None,
        binaries=(),
        shared_objects=(),
        abi=None,
        size=v.size,
        compile=None,
        stages=tuple(StageDoc(name=n, seconds=s) for n, s in v.stages),
        seconds=round(v.seconds, 3),
    )


def variant_doc(v: VariantResult | VariantFailure, target: Version2) -> VariantDoc:
    if isinstance(v, VariantFailure):
        return _failed(v)
    wheel = WheelDoc(
        path=str(v.wheel),
        size=v.wheel_size,
        sha256=v.sha256,
        tags=v.tags,
        reused=v.reused,
        import_check="; ".join(v.import_check) if v.import_check is not None else None,
        reproducible=v.reproducible,
        inputs=str(v.inputs) if v.inputs else None,
        index=v.index,
    )
    compiled = CompileDoc(
        sources=v.sources,
        compiled=len(v.compiled),
        up_to_date=v.up_to_date,
        generated=v.generated,
        cache=v.compile_cache,
        jobs=v.jobs,
        peak_memory=v.peak_memory,
        schedule=v.schedule,
        device_share=v.device_share,
    )
    return VariantDoc(
        id=v.variant_id,
        arch_set=ArchSetDoc(name=v.arch_set.name, archs=str(v.arch_set)),
        toolkit=v.toolkit,
        torch=v.torch,
        status="up-to-date" if v.reused else "built",
        error=None,
        wheel=wheel,
        binaries=tuple(binary_doc(b) for b in v.binaries),
        shared_objects=v.shared_objects,
        abi=_abi(v.abi, target),
        size=v.size,
        compile=compiled,
        stages=tuple(StageDoc(name=n, seconds=s) for n, s in v.stages),
        seconds=round(v.seconds, 3),
    )


def _matrix(settings: BuildSettings) -> MatrixDoc:
    m = settings.matrix
    return MatrixDoc(
        path=str(m.path),
        package=m.package.name,
        version=m.package.version,
        abi=m.abi,
        python_abi=m.python_abi,
        torch=m.torch.requirement,
        target=f"{m.torch.floor[0]}.{m.torch.floor[1]}",  # the wheel's: its highest target
        cuda=m.cuda,
        arch_sets=tuple(ArchSetDoc(name=a.name, archs=str(a)) for a in m.arch_sets),
    )


def _settings(s: BuildSettings) -> SettingsDoc:
    return SettingsDoc(
        arch_source=s.arch_source,
        out_dir=str(s.out_dir),
        build_dir=str(s.build_root),
        jobs=s.jobs,
        python=str(s.python),
        only=s.only,
        offline=s.offline,
        size_budget=s.size_budget,
    )


def build_report(
    *,
    settings: BuildSettings | None,
    result: BuildReport | None,
    error: WheelforgeError | None,
    seconds: float,
) -> BuildReportDocument:
    """The report of a run: its result when it got that far, and the error that ended it."""
    error = error or (result.first_error if result else None)
    target = settings.matrix.torch.floor if settings else (0, 0)
    outcomes: list[VariantResult | VariantFailure] = (
        [*result.variants, *result.failures] if result else []
    )
    return BuildReportDocument(
        wheelforge=__version__,
        status="failed" if error else "success",
        exit_code=error.exit_code if error else 0,
        error=error_doc(error) if error else None,
        matrix=_matrix(settings) if settings else None,
        settings=_settings(settings) if settings else None,
        built_against=result.built_against if result else None,
        variants=tuple(variant_doc(v, target) for v in outcomes),
        seconds=round(seconds, 3),
        no_compile_cache=result.no_compile_cache if result else None,
    )
