"""The captured build: what a project's own build would compile and pack, as every front door
reads it (setup.py run or read, CMake's compile commands, kernel-builder's build.toml, the
sources). Frozen data, paths relative to the project's folder; writer/matrixfile.py turns it into
matrix.yaml.

What could not be captured, or is a choice the user has to make, is a ``hand`` note; what was
translated in a way worth knowing (a flag left out because wheelforge sets it, an arch flag
turned into an arch set) is a ``done`` note. A build has one extension per shared object, the
header libraries its include folders lie in (or build.toml depends on), and the programs that
write its sources first (``steps``). A download or a command the build script tried and
wheelforge refused is a :class:`Refusal`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from wheelforge.configuration.archs import ArchSpec

FrontDoor = Literal[
    "setup.py", "setup.py (read)", "CMake", "setup.py + CMake", "build.toml", "sources"
]


@dataclass(frozen=True, kw_only=True)
class CapturedSource:
    path: str  # relative to the project folder, posix
    # The archs the project compiles this source for, when they differ from its extension's.
    archs: tuple[ArchSpec, ...] | None = None
    # The flags the project compiles this source alone with (beside its extension's).
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CapturedExtension:
    """One compiled module as the project builds it."""

    name: str | None  # the dotted module name, e.g. flash_attn_3._C
    kind: str  # CUDAExtension, CppExtension, Extension, a CMake target, a kernel-builder kernel
    where: str  # where the project declares it: setup.py:412, build.toml [kernel.activation]
    sources: tuple[CapturedSource, ...]
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()  # -D/-U for every compile
    cxx_flags: tuple[str, ...] = ()  # without defines and what wheelforge sets itself
    nvcc_flags: tuple[str, ...] = ()  # without defines, arch flags and what wheelforge sets
    archs: tuple[ArchSpec, ...] = ()  # the archs the project's flags name for every source
    libraries: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    link_flags: tuple[str, ...] = ()
    torch_target: str | None = None  # the stable-ABI target its flags name ("2.9")
    stable: bool | None = None  # the ABI its build declares (build.toml's stable-abi), if it does
    limited_api: str | None = None  # the Py_LIMITED_API its flags name ("3.9")
    # A plain shared library the package loads with ctypes/cffi (CMake's SHARED library where no
    # Python module is built): ``kind: plain``, its own exports kept.
    plain: bool = False
    # Where the project's Python loads it with torch.ops.load_library ("pkg/_lib.py:12"), as
    # the writer reads it (an operator library, ``kind: library``, when it defines no PyInit).
    loaded_at: str | None = None


@dataclass(frozen=True, kw_only=True)
class ProjectMetadata:
    name: str | None = None
    version: str | None = None
    summary: str | None = None
    license: str | None = None
    requires_python: str | None = None
    dependencies: tuple[str, ...] = ()  # without torch
    torch_requirement: str | None = None  # what the project asks of torch (install_requires)
    author: str | None = None
    author_email: str | None = None
    maintainer: str | None = None  # setup(maintainer=): METADATA's Maintainer
    maintainer_email: str | None = None
    url: str | None = None  # setup(url=): METADATA's Home-page
    download_url: str | None = None  # setup(download_url=): METADATA's Download-URL
    project_urls: tuple[tuple[str, str], ...] = ()
    classifiers: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()  # extras_require
    readme_sha256: str | None = None  # the digest of long_description's stripped text


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """Something the build script tried that init does not do: a download, a command."""

    what: Literal["network", "command", "write"]
    detail: str  # the host, the command line, the file
    where: str  # setup.py:517, or "" when unknown
    attempted: bool = True  # False: found in the script but not reached in this run


@dataclass(frozen=True, kw_only=True)
class GeneratedFile:
    """A file the project's build system writes before compiling, which init writes once (a
    kernel-builder kernel's registration.h and _ops.py)."""

    path: str  # relative to the project folder
    text: str


@dataclass(frozen=True, kw_only=True)
class CapturedHeaderLibrary:
    """A header library the build includes (CUTLASS/CuTe ...): a folder (a git submodule, a
    vendored tree; relative to the project folder, ``../`` when it lies above it) or a PyPI
    package that ships the headers."""

    name: str
    path: str | None = None
    pypi: str | None = None  # "nvidia-cutlass==3.8.0.0"
    include: tuple[str, ...] = ("include",)  # relative to path (or to the unpacked wheel)
    version: str | None = None  # written only where nothing else names it (no git checkout)
    pinned: str | None = None  # the commit the superproject's gitlink pins (said, not written)
    commit: str | None = None  # the commit its own checkout has (read by the build too)
    found: str = ""  # what named it: "include_dirs (a git submodule)", "build.toml depends"


@dataclass(frozen=True, kw_only=True)
class CapturedStep:
    """A program the build runs to write sources before compiling (FA3's generate_kernels.py):
    matrix.yaml's ``generate`` step. Sources written ``{name}/...`` are among its outputs."""

    name: str
    run: tuple[str, ...]  # with {python}, {project}, {out}
    inputs: tuple[str, ...]  # relative to the project folder
    outputs: tuple[str, ...]  # relative to its output folder
    found: str  # how it was found: "setup.py:498 runs it", "the sources it writes were missing"


@dataclass(frozen=True, kw_only=True)
class CapturedBuild:
    root: Path
    front_door: FrontDoor
    extensions: tuple[CapturedExtension, ...]
    # Nothing to compile, and that is the project's own word (kernel-builder's [torch-noarch]):
    # a matrix without extensions, one py3-none-any wheel.
    pure: bool = False
    metadata: ProjectMetadata = field(default_factory=ProjectMetadata)
    packages: tuple[str, ...] = ()  # package folders, relative; empty: wheelforge discovers them
    package_data: tuple[str, ...] = ()  # globs relative to each package folder
    # .py files in the package folders that are in no package setuptools packs (examples, tests)
    exclude: tuple[str, ...] = ()  # globs relative to each package folder
    modules: tuple[str, ...] = ()  # top-level modules' files (setup(py_modules=...))
    torch_seen: str | None = None  # the torch the build script saw ("2.13.0"), if a real one
    tests: str | None = None  # the test folder (or file)
    generated: tuple[GeneratedFile, ...] = ()
    header_libraries: tuple[CapturedHeaderLibrary, ...] = ()  # beside those in include dirs
    steps: tuple[CapturedStep, ...] = ()  # generate steps
    refusals: tuple[Refusal, ...] = ()
    missing: tuple[str, ...] = ()  # sources the build names that match no file
    hand: tuple[str, ...] = ()  # what needs a hand: real choices, or what could not be read
    done: tuple[str, ...] = ()  # what was translated in a way worth saying
