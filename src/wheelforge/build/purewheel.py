"""The build of a matrix with no extension (kernel-builder's ``torch-noarch`` kernels: Python
and data files only): one ``py3-none-any`` wheel of the package folders, as setuptools packs such
a project (kernel-builder's noarch pyproject.toml), with no toolkit, no torch and no arch set."""

from __future__ import annotations

import time

from wheelforge.binaries.sizecheck import SizeCheck
from wheelforge.build.results import BuildReport, VariantResult
from wheelforge.configuration import abi
from wheelforge.configuration.archs import ArchSet
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import fsutil, log
from wheelforge.packaging import wheel
from wheelforge.planning import selection

TAG = "py3-none-any"
# What a pure wheel is called where a compiled one names its variant.
NO_ARCH = ArchSet("none", ())


def members(matrix: Matrix) -> tuple[selection.Member, ...]:
    """Every member of the wheel, the .dist-info files the packer writes among them."""
    dist_info = selection.dist_info(matrix.package, matrix.package.version)
    files = selection.project_files(matrix)
    return tuple(
        m
        for m in selection.wheel_members(files, dist_info=dist_info, binaries=())
        if m.path.removeprefix(f"{dist_info}/") not in selection.PROVENANCE_NAMES
    )


def contents(matrix: Matrix) -> wheel.WheelContents:
    """The wheel of *matrix* as the packer writes it: the package folders' modules and data,
    the license files, METADATA (torch as the matrix names it) and WHEEL (purelib)."""
    pkg = matrix.package
    dist_info = selection.dist_info(pkg, pkg.version)
    return wheel.WheelContents(
        filename=f"{pkg.wheel_name}-{pkg.version}-{TAG}.whl",
        files=tuple(sorted((m.path, m.source) for m in members(matrix) if m.source is not None)),
        metadata=wheel.core_metadata(
            pkg,
            matrix.requires_python,
            version=pkg.version,
            # no binary uses torch: the matrix's torch as written (abi.torch_free_requirement)
            torch_requirement=abi.of(matrix.abi).requirement(matrix),
        ),
        wheel=wheel.wheel_text(TAG, purelib=True),
        dist_info=dist_info,
    )


def build(settings: BuildSettings) -> BuildReport:
    """The one pure wheel of *settings*' matrix, packed into the output folder."""
    start = time.perf_counter()
    matrix = settings.matrix
    packed = contents(matrix)
    log.info(f"building {packed.filename}: no extension, nothing to compile")
    path = wheel.pack(packed, settings.out_dir)
    size = path.stat().st_size
    seconds = time.perf_counter() - start
    result = VariantResult(
        variant_id=TAG,
        arch_set=NO_ARCH,
        toolkit="none",
        torch="none",
        wheel=path,
        wheel_size=size,
        sha256=fsutil.sha256(path),
        sources=0,
        compiled=(),
        reused=False,
        binaries=(),
        arch_checks=(),
        abi_checks=(),
        size=SizeCheck(
            wheel_size=size,
            budget=matrix.size_budget,
            over=size > matrix.size_budget,
            contributions=(),
            levers=(),
        ),
        stages=(("package", seconds),),
        seconds=seconds,
    )
    return BuildReport(
        matrix=matrix.path,
        abi=abi.of(matrix.abi).name,
        target_version=matrix.torch.floor,
        built_against="none",
        variants=(result,),
        seconds=seconds,
    )
