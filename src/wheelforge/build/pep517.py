"""What the PEP 517 backend (``wheelforge.build_meta``) does, over the builder the CLI uses: one
wheel for the machine the build runs on, an sdist, the wheel's metadata.

The arch list of that one wheel: TORCH_CUDA_ARCH_LIST (as torch.utils.cpp_extension reads it),
else ``-C archs=``, else the local GPUs' capabilities, else the matrix's first arch set. The
extension is built against the torch of the build environment: ``--no-build-isolation`` uses
the installed one; with build isolation, the torch of ``build-system.requires``, or the one
get_requires_for_build_wheel asks for (the matrix's torch requirement) when none is there.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from wheelforge.build.orchestration import run_build
from wheelforge.configuration import abi
from wheelforge.configuration.archs import ArchSet, arch_list_id, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.matrix.pyproject import load_toml
from wheelforge.configuration.settings import BuildSettings, Flags, resolve
from wheelforge.foundation import fsutil, log, numbers, readers, writers
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging import sdist, wheel
from wheelforge.planning import variants
from wheelforge.toolchain import gpu
from wheelforge.toolchain import toolkits as toolkit

# -C KEY=VALUE settings the backend takes, with what each does (the error for an unknown key
# lists them).
CONFIG_KEYS = {
    "archs": "arch list of the wheel, e.g. '8.0 9.0+PTX' (TORCH_CUDA_ARCH_LIST wins)",
    "matrix": "the matrix file, relative to pyproject.toml [default: tool.wheelforge.matrix, else matrix.yaml]",
    "only": "the variant id to build, as 'wheelforge matrix' lists them [default: the first]",
    "offline": "true: never download a CUDA toolkit",
    "build-dir": "folder for intermediate files [default: build/wheelforge beside the matrix]",
    "jobs": "parallel compile jobs (else MAX_JOBS)",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, kw_only=True)
class BackendOptions:
    """The backend's config settings, parsed."""

    matrix: Path
    archs: str | None = None
    only: str | None = None
    offline: bool = False
    build_dir: Path | None = None
    jobs: int | None = None


def _one(key: str, value: str | list[str]) -> str:
    if isinstance(value, list):
        if len(value) != 1:
            raise ConfigError(f"-C {key} was given {len(value)} times; give it once")
        return value[0]
    return value


def _matrix_path(root: Path, given: str | None) -> Path:
    """-C matrix, else ``[tool.wheelforge] matrix`` of pyproject.toml, else matrix.yaml."""
    if given is None:
        pyproject = root / "pyproject.toml"
        tables = load_toml(pyproject) or {}
        tool = tables.get("tool", {})
        table = tool.get("wheelforge", {}) if isinstance(tool, dict) else None
        if not isinstance(table, dict):
            raise ConfigError(
                f"{pyproject}: tool.wheelforge must be a table ([tool.wheelforge]), "
                f"not {type(table if isinstance(tool, dict) else tool).__name__}"
            )
        given = table.get("matrix", "matrix.yaml")
        if not isinstance(given, str):
            raise ConfigError(f"{pyproject}: tool.wheelforge.matrix must be a path string")
    return root / given


def parse_config_settings(
    config: Mapping[str, str | list[str]] | None, root: Path
) -> BackendOptions:
    """The ``-C``/``--config-settings`` of pip and build, checked: an unknown key is an error
    naming the known ones, so a typo is never silently ignored."""
    config = dict(config or {})
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in CONFIG_KEYS.items())
        raise ConfigError(
            f"-C {unknown[0]}: wheelforge.build_meta has no such setting; it takes {known}"
        )
    values = {k: _one(k, v) for k, v in config.items()}
    offline = values.get("offline", "false").lower()
    if offline not in _TRUE | _FALSE:
        raise ConfigError(f"-C offline={values['offline']}: write true or false")
    jobs = values.get("jobs")
    jobs_n = numbers.whole(jobs, low=1, high=numbers.MAX_JOBS) if jobs is not None else None
    if jobs is not None and jobs_n is None:
        shown = jobs if len(jobs) <= 40 else jobs[:37] + "..."
        raise ConfigError(
            f"-C jobs={shown}: must be a positive whole number (ASCII digits, at most "
            f"{numbers.MAX_JOBS})"
        )
    build_dir = values.get("build-dir")
    return BackendOptions(
        matrix=_matrix_path(root, values.get("matrix")),
        archs=values.get("archs") or None,
        only=values.get("only") or None,
        offline=offline in _TRUE,
        build_dir=(root / build_dir) if build_dir else None,
        jobs=jobs_n,
    )


def choose_archs(
    env: Mapping[str, str], config_archs: str | None, local_gpu: Callable[[], str | None]
) -> tuple[str | None, str]:
    """(arch list, where it came from) of the one wheel; (None, ...) means the matrix's first
    arch set. *local_gpu* is only asked when neither the environment nor -C said."""
    if env.get("TORCH_CUDA_ARCH_LIST"):
        return env["TORCH_CUDA_ARCH_LIST"], "TORCH_CUDA_ARCH_LIST"
    if config_archs:
        return config_archs, "-C archs"
    found = local_gpu()
    if found:
        return found, "the local GPU"
    return None, "the matrix's first arch set"


def one_variant_matrix(matrix: Matrix, archs: str | None, source: str) -> Matrix:
    """The matrix narrowed to the one arch set of this wheel, as a plain (non-variant) wheel:
    installers do not take PEP 825 wheels yet."""
    arch_sets = matrix.arch_sets[:1]
    if archs is not None:
        specs = parse_arch_list(archs, source=source)
        arch_sets = (ArchSet(arch_list_id(specs), specs),)
    return dataclasses.replace(matrix, arch_sets=arch_sets, wheel_variants=None)


def backend_settings(
    options: BackendOptions, out_dir: Path, env: Mapping[str, str] | None = None
) -> BuildSettings:
    env = os.environ if env is None else env
    python = Path(sys.executable)
    archs, source = choose_archs(env, options.archs, lambda: gpu.local_capabilities(python))
    # The arch list was chosen above (a matrix without arch-sets needs one); it replaces the
    # matrix's own arch sets.
    flags = Flags(
        matrix=options.matrix,
        archs=archs,
        out=out_dir,
        build_dir=options.build_dir,
        jobs=options.jobs,
        python=str(python),
        offline=options.offline,
    )
    settings = resolve(flags, {k: v for k, v in env.items() if k != "TORCH_CUDA_ARCH_LIST"})
    matrix = one_variant_matrix(settings.matrix, archs, source)
    expanded = variants.expand(matrix, toolkit.discover(cache=settings.cache_dir))
    chosen = (
        variants.select(expanded, (options.only,), flag="-C only")[0]
        if options.only
        else expanded[0]
    )
    if not abi.of(matrix.abi).per_torch:
        # One toolkit: one variant, so the wheel's version is the package's (no local label),
        # as prepare_metadata_for_build_wheel said.
        matrix = dataclasses.replace(matrix, cuda=(chosen.choice.release,))
    log.info(f"wheelforge.build_meta: one wheel ({chosen.id}), archs from {source}")
    return dataclasses.replace(
        settings,
        matrix=matrix,
        only=(chosen.id,),
        arch_source=source if archs else str(options.matrix),
    )


def build_wheel(
    options: BackendOptions, wheel_directory: Path, metadata_directory: Path | None = None
) -> str:
    settings = backend_settings(options, fsutil.resolved(wheel_directory))
    report = run_build(settings)
    if report.first_error is not None:  # a failed variant is data in the report, not raised
        raise report.first_error
    built = report.variants[0].wheel
    if metadata_directory is not None:
        same_metadata(built, metadata_directory)
    return built.name


def same_metadata(wheel_path: Path, metadata_directory: Path) -> None:
    """PEP 517: given the metadata_directory of prepare_metadata_for_build_wheel, the wheel must
    have that metadata. One that differs (the project changed between the two hooks) is an
    error naming the first line that differs; it was ignored."""
    given_path = metadata_directory / "METADATA"
    if not given_path.is_file():
        found = sorted(metadata_directory.glob("*.dist-info/METADATA"))
        given_path = found[0] if found else given_path
    try:
        given = readers.read_text(given_path, cap=readers.CONFIG_CAP)
    except FileNotFoundError:
        raise ConfigError(
            f"metadata_directory {metadata_directory} holds no METADATA; the frontend passed a "
            "folder prepare_metadata_for_build_wheel did not write"
        ) from None
    with zipfile.ZipFile(wheel_path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        made = zf.read(name).decode("utf-8", errors="replace")
    if made != given:
        differ = next(
            (
                f"{a!r} where it said {b!r}"
                for a, b in zip(made.splitlines(), given.splitlines(), strict=False)
                if a != b
            ),
            "other lines",
        )
        raise ConfigError(
            f"the wheel's METADATA differs from the one prepare_metadata_for_build_wheel wrote in "
            f"{metadata_directory} ({differ[:160]}); the project changed between the two hooks: "
            "build again"
        )


def torch_requires(options: BackendOptions) -> list[str]:
    """What a wheel build needs beyond build-system.requires: torch, when the build environment
    has none (then the matrix's requirement, e.g. ``torch>=2.10``)."""
    if importlib.util.find_spec("torch") is not None:
        return []
    matrix = load_matrix(options.matrix)
    return [abi.of(matrix.abi).build_requirement(matrix.torch)]


def build_sdist(root: Path, options: BackendOptions, sdist_directory: Path) -> str:
    matrix = load_matrix(options.matrix)
    return sdist.write_sdist(matrix, root, fsutil.resolved(sdist_directory)).name


def prepare_metadata(options: BackendOptions, metadata_directory: Path) -> str:
    """``{name}-{version}.dist-info`` with METADATA as build_wheel will write it, without
    compiling. An unstable-ABI wheel's torch pin is the build's: that case builds the wheel
    and takes its dist-info."""
    matrix = load_matrix(options.matrix)
    requirement = abi.of(matrix.abi).requirement(matrix)
    if requirement is None:
        return _metadata_from_wheel(options, metadata_directory)
    pkg = matrix.package
    dist_info = metadata_directory / f"{pkg.wheel_name}-{pkg.version}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    text = wheel.core_metadata(
        pkg, matrix.requires_python, version=pkg.version, torch_requirement=requirement
    )
    writers.write_atomic(dist_info / "METADATA", text)
    return dist_info.name


def _metadata_from_wheel(options: BackendOptions, metadata_directory: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="wheelforge-metadata-") as tmp:
        built = Path(tmp) / build_wheel(options, Path(tmp))
        with zipfile.ZipFile(built) as zf:
            names = [n for n in zf.namelist() if n.split("/", 1)[0].endswith(".dist-info")]
            zf.extractall(metadata_directory, members=names)
    return names[0].split("/", 1)[0]


def editable_refused() -> NoReturn:
    """PEP 660's editable install, refused: its compiled extension would be the one built at
    install time, whatever the sources became, so an edit of a kernel would silently not be in
    what Python imports."""
    raise ConfigError(
        "wheelforge's backend makes no editable installs (pip install -e, PEP 660): the compiled "
        "extension would not follow edits of its sources; install the wheel instead "
        "(pip install . --no-build-isolation), and again after each edit"
    )
