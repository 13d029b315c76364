"""The build report (``wheelforge build --report PATH``): one JSON document per run. Its model
is the frozen dataclasses below; the document is written from them (foundation/document.py)
and its JSON Schema generated from them (foundation/schemagen.py), so neither is written twice.
The schema ships in the package as data/build-report.schema.json; a test keeps it current.

Bump SCHEMA_VERSION when a key changes meaning or goes away (adding keys is compatible)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from packaging.utils import parse_wheel_filename

from wheelforge import __version__
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.binaries.rule import Violation
from wheelforge.binaries.sizecheck import SizeCheck
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation.diagnostics import Diagnostic
from wheelforge.foundation.document import to_document
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.foundation.schemagen import json_schema
from wheelforge.packaging import wheel_variants
from wheelforge.running.results import BuildReport, VariantFailure, VariantResult
from wheelforge.toolchain.compilecache import CacheStats

SCHEMA_VERSION = 1
SCHEMA_FILE = "build-report.schema.json"


def _doc(text: str, **more: Any) -> dict[str, Any]:
    """Field metadata for schemagen: the key's description (and more, e.g. a fixed schema)."""
    return {"doc": text, **more}


@dataclass(frozen=True, kw_only=True)
class ErrorDoc:
    """Why a run or a variant failed."""

    kind: str = field(
        metadata=_doc("configuration, tool, build, verification, size-budget, environment, ...")
    )
    exit_code: int = field(metadata=_doc("the exit code this error gives"))
    message: str = field(metadata=_doc("the one-line message"))
    details: str | None = field(metadata=_doc("more lines: a compiler's output, further problems"))
    diagnostics: tuple[Diagnostic, ...] = field(
        metadata=_doc("files and lines the error points at")
    )


@dataclass(frozen=True, kw_only=True)
class ArchSetDoc:
    name: str
    archs: str = field(metadata=_doc('as written in matrix.yaml: "8.0 9.0a 12.0+PTX"'))


@dataclass(frozen=True, kw_only=True)
class MatrixDoc:
    """The matrix the run used (after --archs / TORCH_CUDA_ARCH_LIST)."""

    path: str
    package: str
    version: str
    abi: Literal["stable", "unstable"]
    python_abi: str
    torch: str = field(metadata=_doc("the torch requirement"))
    target: str = field(metadata=_doc("the stable-ABI target torch version"))
    cuda: tuple[str, ...]
    arch_sets: tuple[ArchSetDoc, ...]


@dataclass(frozen=True, kw_only=True)
class SettingsDoc:
    arch_source: str = field(metadata=_doc("where the arch sets came from"))
    out_dir: str
    build_dir: str
    jobs: int | None
    python: str
    only: tuple[str, ...]
    offline: bool
    size_budget: int = field(metadata=_doc("bytes allowed per wheel"))


@dataclass(frozen=True, kw_only=True)
class WheelDoc:
    path: str = field(metadata=_doc("absolute path of the published wheel"))
    size: int
    sha256: str
    tags: tuple[str, ...] = field(metadata=_doc("e.g. cp310-abi3-manylinux_2_34_x86_64"))
    reused: bool = field(metadata=_doc("already in the output folder, made from the same inputs"))
    import_check: str | None = field(
        default=None,
        metadata=_doc(
            "the import of its extension module before publishing; null: --no-import-check"
        ),
    )
    reproducible: str | None = field(
        default=None,
        metadata=_doc("sha256 of the identical rebuild in another folder (--verify-reproducible)"),
    )
    inputs: str | None = field(
        default=None,
        metadata=_doc(
            "the list of every file the compiles read, with its sha256 (beside the build); its own sha256 is inputs.sha256 in the wheel's wheelforge-build.json"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class BinaryDoc:
    path: str = field(metadata=_doc("x.whl!pkg/_C.abi3.so"))
    size: int
    fatbins: tuple[FatbinEntry, ...]


@dataclass(frozen=True, kw_only=True)
class AbiDoc:
    """The stable-ABI check of the variant's binaries."""

    verdict: Literal["ok", "violations", "not-checked"]
    target: str = field(metadata=_doc("the lowest torch the binaries must load on"))
    newest_shim: str | None = field(metadata=_doc("the torch version of the newest shim used"))
    shims: tuple[str, ...]
    python_symbols: tuple[str, ...]
    violations: tuple[Violation, ...]


@dataclass(frozen=True, kw_only=True)
class CompileDoc:
    """What ninja did, and what the compile cache answered for the compiles it ran."""

    sources: int
    compiled: int = field(metadata=_doc("sources compiled in this run"))
    up_to_date: int = field(metadata=_doc("sources ninja found up to date and skipped"))
    cache: CacheStats | None = field(
        default=None,
        metadata=_doc(
            "the compile cache's counts for this run (ccache or sccache); null: no cache, or nothing was compiled"
        ),
    )


@dataclass(frozen=True, kw_only=True)
class StageDoc:
    name: str = field(metadata=_doc("compile, package, verify, publish"))
    seconds: float


@dataclass(frozen=True, kw_only=True)
class VariantDoc:
    id: str
    arch_set: ArchSetDoc
    toolkit: str = field(metadata=_doc("CUDA version"))
    torch: str = field(metadata=_doc("the torch compiled against"))
    status: Literal["built", "up-to-date", "failed"]
    error: ErrorDoc | None
    wheel: WheelDoc | None
    binaries: tuple[BinaryDoc, ...]
    abi: AbiDoc | None
    size: SizeCheck | None = field(metadata=_doc("the wheel against its size budget, per arch"))
    compile: CompileDoc | None
    stages: tuple[StageDoc, ...]
    seconds: float


@dataclass(frozen=True, kw_only=True)
class Report:
    """One wheelforge build run."""

    schema_version: int = field(
        metadata=_doc("bumped when a key changes meaning", schema={"const": SCHEMA_VERSION})
    )
    wheelforge: str = field(metadata=_doc("the wheelforge version"))
    status: Literal["success", "failed"]
    exit_code: int
    error: ErrorDoc | None = field(
        metadata=_doc("the run's error: the first failure, or what stopped it")
    )
    matrix: MatrixDoc | None = field(metadata=_doc("null when the matrix could not be read"))
    settings: SettingsDoc | None
    built_against: str | None = field(metadata=_doc("the torch the extension was compiled against"))
    variants: tuple[VariantDoc, ...]
    seconds: float


def error_doc(exc: WheelforgeError) -> ErrorDoc:
    return ErrorDoc(kind=exc.kind, exit_code=exc.exit_code, message=exc.message,
                    details=exc.details, diagnostics=exc.diagnostics)  # fmt: skip


def _abi(checks: tuple[BinaryCheck, ...], target: tuple[int, int]) -> AbiDoc:
    newest = max((c.newest_shim for c in checks if c.newest_shim), default=None)
    violations = tuple(v for c in checks for v in c.violations)
    return AbiDoc(
        verdict="not-checked" if not checks else "violations" if violations else "ok",
        target=f"{target[0]}.{target[1]}",
        newest_shim=f"{newest[0]}.{newest[1]}" if newest else None,
        shims=tuple(sorted({s for c in checks for s in c.shims})),
        python_symbols=tuple(sorted({s for c in checks for s in c.python_symbols})),
        violations=violations,
    )


def _tags(wheel: Path, label: str | None) -> tuple[str, ...]:
    # A PEP 825 variant label is no tag, and packaging cannot parse a name that has one.
    _, _, _, tags = parse_wheel_filename(wheel_variants.plain_name(wheel, label))
    return tuple(sorted(str(t) for t in tags))


def variant_doc(v: VariantResult | VariantFailure, target: tuple[int, int]) -> VariantDoc:
    arch_set = ArchSetDoc(name=v.arch_set.name, archs=str(v.arch_set))
    stages = tuple(StageDoc(name=n, seconds=s) for n, s in v.stages)
    if isinstance(v, VariantFailure):
        return VariantDoc(id=v.variant_id, arch_set=arch_set, toolkit=v.toolkit, torch=v.torch, status="failed",
                          error=error_doc(v.error), wheel=None, binaries=(), abi=None, size=v.size, compile=None,
                          stages=stages, seconds=round(v.seconds, 3))  # fmt: skip
    return VariantDoc(
        id=v.variant_id, arch_set=arch_set, toolkit=v.toolkit, torch=v.torch,
        status="up-to-date" if v.reused else "built", error=None,
        wheel=WheelDoc(path=str(v.wheel), size=v.wheel_size, sha256=v.sha256, tags=_tags(v.wheel, v.variant_label), reused=v.reused,
                       import_check=v.import_check, reproducible=v.reproducible,
                       inputs=str(v.inputs) if v.inputs else None),
        binaries=tuple(BinaryDoc(path=b.path, size=b.size, fatbins=b.entries) for b in v.binaries),
        abi=_abi(v.abi_checks, target), size=v.size,
        compile=CompileDoc(sources=v.sources, compiled=len(v.compiled), up_to_date=v.sources - len(v.compiled),
                           cache=v.compile_cache),
        stages=stages, seconds=round(v.seconds, 3),
    )  # fmt: skip


def _matrix(settings: BuildSettings) -> MatrixDoc:
    m = settings.matrix
    return MatrixDoc(
        path=str(m.path), package=m.package.name, version=m.package.version, abi=m.abi,
        python_abi=m.python_abi, torch=m.torch.requirement, target=f"{m.torch.target[0]}.{m.torch.target[1]}",
        cuda=m.cuda, arch_sets=tuple(ArchSetDoc(name=a.name, archs=str(a)) for a in m.arch_sets),
    )  # fmt: skip


def _settings(s: BuildSettings) -> SettingsDoc:
    return SettingsDoc(arch_source=s.arch_source, out_dir=str(s.out_dir), build_dir=str(s.build_root),
                       jobs=s.jobs, python=str(s.python), only=s.only, offline=s.offline,
                       size_budget=s.size_budget)  # fmt: skip


def build_report(
    *,
    settings: BuildSettings | None,
    result: BuildReport | None,
    error: WheelforgeError | None,
    seconds: float,
) -> Report:
    """The report of a run: its result when it got that far, and the error that ended it."""
    error = error or (result.first_error if result else None)
    target = settings.matrix.torch.target if settings else (0, 0)
    outcomes: list[VariantResult | VariantFailure] = (
        [*result.variants, *result.failures] if result else []
    )
    return Report(
        schema_version=SCHEMA_VERSION,
        wheelforge=__version__,
        status="failed" if error else "success",
        exit_code=error.exit_code if error else 0,
        error=error_doc(error) if error else None,
        matrix=_matrix(settings) if settings else None,
        settings=_settings(settings) if settings else None,
        built_against=result.built_against if result else None,
        variants=tuple(variant_doc(v, target) for v in outcomes),
        seconds=round(seconds, 3),
    )


def report_json(report: Report) -> str:
    return json.dumps(to_document(report), indent=2) + "\n"


def schema() -> dict[str, Any]:
    """The report's JSON Schema, generated from the model."""
    return json_schema(
        Report,
        title="wheelforge build report",
        schema_id=f"wheelforge/build-report/{SCHEMA_VERSION}",
    )


def packaged_schema() -> dict[str, Any]:
    """The schema as shipped in the package (data/build-report.schema.json)."""
    text = (
        resources.files("wheelforge")
        .joinpath("data")
        .joinpath(SCHEMA_FILE)
        .read_text(encoding="utf-8")
    )
    loaded: dict[str, Any] = json.loads(text)
    return loaded


if __name__ == "__main__":
    # Regenerate the shipped schema: python -m wheelforge.interface.report > src/wheelforge/data/build-report.schema.json
    sys.stdout.write(json.dumps(schema(), indent=2) + "\n")
