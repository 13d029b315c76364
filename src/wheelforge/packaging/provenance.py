"""What went into a wheel, written inside it: a PEP 770 SBOM (CycloneDX JSON, in
``.dist-info/sboms/``) and wheelforge's own build info (``.dist-info/wheelforge-build.json``).

Both must be as reproducible as the binaries: no clock but SOURCE_DATE_EPOCH, no random
identifiers (CycloneDX's serial number and bom-refs are derived from the content), and no
absolute paths (every file is named as the compilers saw it through the prefix maps,
planning/reproducible.py)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from wheelforge import __version__
from wheelforge.binaries.elf import open_elf_file
from wheelforge.binaries.inspection import contents_of
from wheelforge.foundation import fsutil, proc
from wheelforge.packaging.wheel import source_date_epoch
from wheelforge.planning import reproducible
from wheelforge.planning.plan import VariantPlan

SBOM_NAME = "sboms/wheelforge.cdx.json"  # PEP 770: any file name under .dist-info/sboms/
BUILD_INFO_NAME = "wheelforge-build.json"


def compiler_version(cxx: str) -> str:
    """The first line of ``<cxx> --version``, e.g. 'c++ (Debian 12.2.0-14+deb12u1) 12.2.0'."""
    out = proc.run([cxx, "--version"], hint="install g++").stdout
    first = out.splitlines()[0] if out else ""
    # The line starts with the name it was called by (a path for a provisioned GCC).
    return first.split(" ", 1)[1] if first.startswith("/") and " " in first else first


def build_info(plan: VariantPlan, read: Sequence[Path], *, epoch: int) -> dict[str, object]:
    """wheelforge's build info; *read* is every file the compiles read (sources and headers)."""
    folders = plan.compile.input_folders
    toolkit = plan.variant.toolkit
    with open_elf_file(plan.link.library) as image:
        library = contents_of(image)
    name_of = reproducible.path_namer(folders)
    with ThreadPoolExecutor() as pool:  # ~1000 headers: hashlib and reads release the GIL
        inputs = dict(zip(map(name_of, read), pool.map(fsutil.sha256, read), strict=True))
    # The flags name project folders relative to the build folder (../..): those spellings too.
    spellings = (*folders, *reproducible.spelled(dict(folders), plan.command_path).items())

    def free(text: str) -> str:
        # The prefix maps are listed once, by name: their order follows the folders' path
        # lengths, which differ between machines while the binaries do not.
        words = shlex.split(reproducible.path_free_text(text, spellings))
        return shlex.join(w for w in words if "-ffile-prefix-map=" not in w)

    return {
        "wheelforge": __version__,
        "source_date_epoch": epoch,
        "variant": plan.variant.id,
        "arch_set": str(plan.variant.arch_set),
        "archs": {"sass": list(library.sass_archs), "ptx": list(library.ptx_archs)},
        "toolkit": {"release": str(toolkit.version), "build": toolkit.build},
        "host_compiler": compiler_version(plan.compile.cxx),
        "nvcc_host_compiler": compiler_version(plan.compile.nvcc_host),
        "torch": {"headers_of": plan.torch.label, "requirement": plan.abi.torch_requirement},
        "abi": plan.abi.kind.name,
        "target_version": list(plan.abi.target),
        "python_abi": plan.abi.abi_tag,
        "prefix_maps": sorted({name for _, name in folders}),
        "flags": {
            "cxx": free(plan.compile.cxx_flags),
            "cc": free(plan.compile.cc_flags),
            "nvcc": free(plan.compile.nvcc_flags),
            "gencode": plan.compile.gencode,
            "ldflags": free(plan.link.ldflags),
        },
        "inputs": dict(sorted(inputs.items())),
    }


def dist_info_files(
    plan: VariantPlan, read: Callable[[], Sequence[Path]]
) -> tuple[tuple[str, str], ...]:
    """(path under .dist-info, text) of the SBOM and the build info, for wheel.contents; *read*
    answers every file the compiles read (from the freshness stamp, else ninja's deps log)."""
    # cyclonedx takes ~0.1 s to import: only a build that packs a wheel loads it.
    from wheelforge.packaging import sbom

    epoch = source_date_epoch()
    info = build_info(plan, read(), epoch=epoch)
    text = sbom.sbom(plan, info, epoch=epoch, build_info_name=BUILD_INFO_NAME)
    return ((SBOM_NAME, text), (BUILD_INFO_NAME, json.dumps(info, indent=1) + "\n"))
