"""What went into a wheel, written inside it: a PEP 770 SBOM (CycloneDX JSON, in
``.dist-info/sboms/``) and wheelforge's own build info (``.dist-info/wheelforge-build.json``);
and beside the build, the list of every file the compiles read (``wheelforge-inputs.txt`` in
the variant's build folder), whose sha256 the build info carries: a thousand headers' hashes
are kilobytes in a report, not in every wheel.

Both must be as reproducible as the binaries: no clock but SOURCE_DATE_EPOCH, no random
identifiers (CycloneDX's serial number and bom-refs are derived from the content), and no
absolute paths (every file is named as the compilers saw it through the prefix maps,
planning/reproducible.py)."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge import __version__
from wheelforge.binaries.elf import open_elf_file
from wheelforge.binaries.facts import BinaryContents
from wheelforge.foundation import fsutil, proc
from wheelforge.packaging import buildinfo
from wheelforge.packaging.buildinfo import (
    Archs,
    BuildInfo,
    ExtensionFlags,
    ExtensionInfo,
    Flags,
    GenerateInfo,
    HeaderLibraryInfo,
    InputsInfo,
    ToolkitInfo,
    TorchInfo,
)
from wheelforge.packaging.wheel import source_date_epoch
from wheelforge.planning import reproducible
from wheelforge.planning.plan import VariantPlan
from wheelforge.planning.selection import BUILD_INFO_NAME, SBOM_NAME
from wheelforge.toolchain.headerlibs import HeaderLibrary

INPUTS_NAME = "wheelforge-inputs.txt"  # in the variant's build folder


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """What packaging writes for a variant: the files under .dist-info, and the inputs list."""

    dist_info: tuple[tuple[str, str], ...]  # (path under .dist-info, text), for wheel.contents
    inputs: str  # inputs_list(): the build info's inputs.sha256 is its sha256


def inputs_list(inputs: Mapping[str, str]) -> str:
    """Every input as ``<sha256>  <name>`` lines sorted by name (sha256sum's format): one line
    per file, so two builds' lists compare with diff, and its own sha256 is the inputs' digest."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(inputs.items()))


def inputs_digest(listed: str) -> str:
    return hashlib.sha256(listed.encode()).hexdigest()


def compiler_version(cxx: str) -> str:
    """The first line of ``<cxx> --version``, e.g. 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'."""
    out = proc.run([cxx, "--version"], hint="install g++", timeout=proc.PROBE_S).stdout
    first = out.splitlines()[0] if out else ""
    # The line starts with the name it was called by (a path for a provisioned GCC).
    return first.split(" ", 1)[1] if first.startswith("/") and " " in first else first


def read_inputs(plan: VariantPlan, read: Sequence[Path]) -> dict[str, str]:
    """The files the compiles read (*read*: sources, and the headers of ninja's deps) by their
    path-free names (planning/reproducible.path_namer), each with its sha256."""
    from concurrent.futures import ThreadPoolExecutor

    name_of = reproducible.path_namer(plan.compile.input_folders)
    with ThreadPoolExecutor() as pool:  # ~1000 headers: hashlib and reads release the GIL
        return dict(zip(map(name_of, read), pool.map(fsutil.sha256, read), strict=True))


def build_info(plan: VariantPlan, *, epoch: int, inputs: Mapping[str, str]) -> BuildInfo:
    """The build info: what the wheel was made with, and its inputs as one digest (the list
    itself is inputs_list(inputs), written beside the build)."""
    folders = plan.compile.input_folders
    toolkit = plan.variant.toolkit
    libraries = [_contents(link.library) for link in plan.links]
    free = _path_free(plan)

    def flags(index: int) -> ExtensionFlags:
        own = plan.compile.flag_sets[index]
        return ExtensionFlags(
            cxx=free(own.cxx),
            cc=free(own.cc),
            nvcc=free(own.nvcc),
            ldflags=free(plan.links[index].ldflags),
        )

    several = len(plan.links) > 1
    extensions = tuple(
        ExtensionInfo(
            name=link.extension.name,
            role=link.role,
            path=link.wheel_path,
            archs=Archs(sass=lib.sass_archs, ptx=lib.ptx_archs),
            flags=flags(i) if several else None,
        )
        for i, (link, lib) in enumerate(zip(plan.links, libraries, strict=True))
    )
    gencode = plan.compile.gencode
    return BuildInfo(
        wheelforge=__version__,
        source_date_epoch=epoch,
        variant=plan.variant.id,
        arch_set=str(plan.variant.arch_set),
        archs=Archs(
            sass=_union(lib.sass_archs for lib in libraries),
            ptx=_union(lib.ptx_archs for lib in libraries),
        ),
        toolkit=ToolkitInfo(release=str(toolkit.version), build=toolkit.build),
        host_compiler=compiler_version(plan.compile.cxx),
        nvcc_host_compiler=compiler_version(plan.compile.nvcc_host),
        torch=TorchInfo(headers_of=plan.torch.label, requirement=plan.abi.torch_requirement),
        abi=plan.abi.kind.name,
        target_version=plan.abi.target,
        python_abi=plan.python_tag,
        prefix_maps=tuple(sorted({name for _, name in folders})),
        # One extension's flags here; with several, each one's under "extensions".
        flags=Flags(gencode=gencode) if several else Flags(**vars(flags(0)), gencode=gencode),
        extensions=extensions,
        inputs=InputsInfo(
            files=len(inputs), sha256=inputs_digest(inputs_list(inputs)), list=INPUTS_NAME
        ),
        header_libraries=tuple(header_library(lib) for lib in plan.compile.header_libraries)
        or None,
        generate=tuple(
            GenerateInfo(
                name=e.name,
                run=e.written,
                outputs=tuple(o.relative_to(e.folder).as_posix() for o in e.outputs),
            )
            for e in plan.compile.generate
        )
        or None,
    )


def _path_free(plan: VariantPlan) -> Callable[[str], str]:
    """A command line without the folders it names (by their names) and without the prefix
    maps: they are listed once, by name, as their order follows the folders' path lengths,
    which differ between machines while the binaries do not."""
    folders = plan.compile.input_folders
    # The flags name project folders relative to the build folder (../..): those spellings too.
    spellings = (*folders, *reproducible.spelled(dict(folders), plan.command_path).items())

    def free(text: str) -> str:
        words = shlex.split(reproducible.path_free_text(text, spellings))
        return shlex.join(w for w in words if "-ffile-prefix-map=" not in w)

    return free


def _contents(library: Path) -> BinaryContents:
    from wheelforge.binaries.inspection import contents_of

    with open_elf_file(library) as image:
        return contents_of(image)


def header_library(lib: HeaderLibrary) -> HeaderLibraryInfo:
    """A header library as the build info records it (the SBOM names it from this)."""
    return HeaderLibraryInfo(
        name=lib.name,
        origin=lib.origin,
        version=lib.version,
        commit=lib.commit,
        pinned=lib.pinned,
        url=lib.url,
        requirement=lib.requirement,
        purl=lib.purl,
        sha256=lib.digest,
    )


def _union(archs: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """The archs of several shared objects, each once, in the order they first come."""
    return tuple(dict.fromkeys(a for group in archs for a in group))


def provenance(plan: VariantPlan, read: Callable[[], Sequence[Path]]) -> Provenance:
    """The SBOM and the build info for the wheel's .dist-info, and the inputs list; *read*
    answers every file the compiles read (from the freshness stamp, else ninja's deps log)."""
    # cyclonedx takes ~0.1 s to import: only a build that packs a wheel loads it.
    from wheelforge.packaging import sbom

    epoch = source_date_epoch()
    inputs = read_inputs(plan, read())
    info = build_info(plan, epoch=epoch, inputs=inputs)
    text = sbom.sbom(plan, info, inputs, epoch=epoch, build_info_name=BUILD_INFO_NAME)
    return Provenance(
        dist_info=((SBOM_NAME, text), (BUILD_INFO_NAME, buildinfo.text(info))),
        inputs=inputs_list(inputs),
    )


def published_variant(wheel: Path) -> tuple[str, str] | None:
    """(variant id, arch set) of the wheelforge build that made *wheel*, from its build info;
    None for a wheel without one (another tool's, or unreadable)."""
    info = buildinfo.read(wheel)
    return (info.variant, info.arch_set) if info is not None else None
