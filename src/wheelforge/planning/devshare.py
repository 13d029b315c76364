"""Each (source, arch) compiled once across a matrix's arch sets: a ``.cu`` source compiles as
nvcc's own steps, each a ninja job (build/nvccsplit.py), instead of one ``nvcc -c``:

- ``nvcc_host``: the host preprocessing, cudafe++ and host compile, for no arch set;
- ``nvcc_device``: one per arch (``nvcc -cubin``; ``-ptx`` for +PTX);
- ``fatbin``: the arch set's fatbin, as an object linked beside the host object.

The host and device steps lie with the C++ compiles in the folder every variant of the same
toolkit, torch and flags shares (planning/hostshare.py): "8.0 9.0" then "9.0 10.0" compile
sm_90 once, and the host side once; only the fatbin (fatbinary and an assembler, well under a
second) and the link are the variant's. bench/shared_archs.py measures it.

Sound only where no step reads the arch list: nvcc defines ``__CUDA_ARCH_LIST__`` for every
preprocessing, and CCCL (which torch's headers include) names its inline namespaces after it
unless the project's nvcc flags turn that off (the four defines below, as PyTorch's own build
does). Where they do not, or a ``.cu`` source names the macro, or the steps cannot be run as
jobs (decide), each variant keeps one ``nvcc -c`` per source, and the plan says why (build
--dry-run, the report's ``compile.device_share``). Headers are checked where they are read:
the host step preprocesses again with another arch list and fails, naming the way out, where
the text differs (CUB's dispatch follows the list: build/nvccsplit.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, ArchSpec
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import readers
from wheelforge.planning.plan import CompileStep, DeviceShare, LinkPlan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.compilecache import CompileCache

# CCCL's arch-list namespaces off: Thrust's ABI namespace and CUB's namespace "magic"
# (cub/util_namespace.cuh, thrust/detail/config/namespace.h), and their checks that every
# translation unit agrees.
CCCL_OFF = (
    "-DTHRUST_DISABLE_ABI_NAMESPACE",
    "-DTHRUST_IGNORE_ABI_NAMESPACE_ERROR",
    "-DCUB_DISABLE_NAMESPACE_MAGIC",
    "-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR",
)
ARCH_LIST = "__CUDA_ARCH_LIST__"
DEVICE_FOLDER = "dev"  # the device images, in the shared folder


def decide(
    matrix: Matrix,
    variant: Variant,
    cu_sources: Iterable[Path],
    *,
    cache: CompileCache | None,
    fixed_pid: bool,
    partitions_asked: bool,
    relocatable: str | None,
) -> DeviceShare:
    """Whether *variant*'s ``.cu`` sources compile as nvcc's steps, and why. It reads the
    matrix and the toolkit, never which variants are built: a variant built alone and within
    the matrix is planned alike, and gives the same wheel."""
    sources = sorted(set(cu_sources))
    if not sources:
        return DeviceShare(on=False, why="no .cu source")
    if cache is not None and cache.splits_nvcc:
        return DeviceShare(
            on=False, why=f"{cache.tool} splits nvcc into its steps and caches each arch's itself"
        )
    if fixed_pid:
        return DeviceShare(
            on=False, why=f"CUDA {variant.toolkit.release} (nvcc's steps need 12.9+)"
        )
    if matrix.generate:
        return DeviceShare(
            on=False, why="the matrix has generate steps (their outputs are each variant's)"
        )
    if partitions_asked:
        return DeviceShare(
            on=False, why="WHEELFORGE_SPLIT_COMPILE is set: one nvcc -c per arch set, as it says"
        )
    if relocatable is not None:
        return DeviceShare(on=False, why=f"{relocatable}: relocatable device code (nvcc -dlink)")
    if len(matrix.arch_sets) < 2:
        # the steps cost about a fifth more CPU than nvcc -c on one arch set (a process per
        # step, the host side preprocessed twice for the arch-list check: docs/performance.md)
        return DeviceShare(on=False, why="one arch set: nothing for nvcc's steps to share")
    for ext in matrix.extensions:
        missing = [d for d in CCCL_OFF if d not in ext.nvcc_flags]
        if missing:
            return DeviceShare(
                on=False,
                why=(
                    f"{ext.name}'s nvcc-flags leave CCCL's arch-list namespaces on (each arch's "
                    f"code differs between arch sets); add {' '.join(missing)}"
                ),
            )
    for source in sources:
        try:
            text = readers.read_text(source, cap=readers.CONFIG_CAP, errors="replace")
        except (OSError, readers.FileRefused):
            text = ""  # the compile says what is wrong with it
        named = ARCH_LIST in text
        if named:
            return DeviceShare(on=False, why=f"{source.name} names {ARCH_LIST}")
    # ccache caches a whole nvcc -c, not nvcc -cubin ("called for link"): the C++ compiles
    # still go through it, the .cu's steps do not
    uncached = "; ccache does not cache nvcc's steps" if cache is not None else ""
    return DeviceShare(
        on=True,
        why="each (source, arch) and each .cu's host side compiled once for every arch set of "
        f"this toolkit and flags; a fatbin per arch set{uncached}",
    )


def host_arch(variant: Variant) -> int:
    """The arch the host step is preprocessed for: the toolkit's lowest, the same for every
    arch set (nothing reads it: decide)."""
    return min(variant.toolkit.sass)


def split(
    steps: Sequence[CompileStep],
    links: Sequence[LinkPlan],
    variant: Variant,
    build_dir: Path,
) -> tuple[list[CompileStep], list[LinkPlan]]:
    """*steps* with each ``nvcc`` step cut into its host step (the object it had), one device
    step per code of its arch set (``dev/<name>.<code>.cubin`` or ``.ptx``) and its fatbin
    step (``<object>.fatbin.o``); *links* with each such object followed by its fatbin's.
    The images are named after the object (``dev/obj/<source>.<code>.cubin``)."""
    out: list[CompileStep] = []
    fatbins: dict[Path, Path] = {}
    for step in steps:
        if step.rule != "nvcc":
            out.append(step)
            continue
        arch_set = step.arch_set or variant.arch_set
        images = build_dir / DEVICE_FOLDER / step.object.relative_to(build_dir).with_suffix("")
        device = [
            dataclasses.replace(
                step,
                rule="nvcc_device",
                object=images.with_name(f"{images.name}.{code}.{kind}"),
                arch_set=ArchSet(arch_set.name, (ArchSpec(spec.arch),)),
                code=code,
            )
            for spec in arch_set.specs
            for code, kind in (
                [(spec.arch.sass, "cubin")] + ([(spec.arch.ptx, "ptx")] if spec.ptx else [])
            )
        ]
        # after one device step, whose cicc wrote the stub the host compile includes
        host = dataclasses.replace(step, rule="nvcc_host", arch_set=None, after=(device[0].object,))
        fatbin = dataclasses.replace(
            step,
            rule="fatbin",
            object=step.object.with_name(step.object.name + ".fatbin.o"),
            arch_set=arch_set,
            inputs=(*(d.object for d in device), step.object),
        )
        fatbins[step.object] = fatbin.object
        out += [*device, host, fatbin]
    linked = [
        dataclasses.replace(
            link,
            objects=tuple(
                o
                for obj in link.objects
                for o in ((obj, fatbins[obj]) if obj in fatbins else (obj,))
            ),
        )
        for link in links
    ]
    return out, linked


def images_of(step: CompileStep) -> Path:
    """The host step's device images' name, less ``.<code>.<kind>`` (nvccsplit host --images)."""
    first = step.after[0]
    return first.with_name(first.name.rsplit(".", 2)[0])
