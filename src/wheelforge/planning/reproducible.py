"""The compile flags that make an object file depend on its inputs only: not on the folder the
sources, the build, torch or the toolkit lie in, nor on the process that compiled it. One place,
so the compile commands (and a compile cache keyed on them) are path-free by construction.

What varies, and what fixes it (measured with ``binaries/reprodiff.py`` on nvcc 13.0 and 11.8):

- ``__FILE__`` strings (``STD_TORCH_CHECK`` messages, asserts) carry the absolute paths of the
  sources and of torch's headers: ``-ffile-prefix-map=OLD=NEW`` rewrites them (GCC >= 8 and
  Clang >= 10; it implies ``-fmacro-prefix-map`` and ``-fdebug-prefix-map``). nvcc's
  preprocessing runs on the host compiler, so ``-Xcompiler`` carries the maps to device code too.
- nvcc's temporary files are called ``/tmp/tmpxft_<pid>_<counter>-<n>_<name>.cudafe1.cpp`` and
  that name becomes a symbol (``_GLOBAL__sub_I_tmpxft_…``) and a ``FILE`` entry of ``.symtab``:
  ``--objdir-as-tempdir`` puts them beside the object under the object's own name.
- Anonymous namespaces in ``.cu`` files are mangled ``_GLOBAL__N__<hash>_<len>_<name>_<hash>``;
  the first hash is of the absolute source path cudafe++ is given (``--orig_src_path_name``,
  also read by cicc, and the same in the cubins' kernel names and in the host's registration
  strings), the second is random per process from CUDA 12.9 on. ``-Xcudafe
  --orig_src_path_name=<path in the project>`` (the later option wins) and ``--frandom-seed``
  (CUDA >= 12.9; nvcc passes it on to GCC as ``-frandom-seed``) fix both. CUDA 11.8 derives the
  second from the source and needs no seed.
- Before CUDA 12.9 there is no seed: the module id that names those namespaces is made by cicc
  (cudafe++ from 12.x) from its process id and its working directory. nvcc then runs from ``/``
  and with ``LD_PRELOAD`` of a small generated library whose ``getpid()`` answers 1 to cicc and
  cudafe++ only (every other program, ptxas and the host compiler included, gets its real pid,
  so their temporary files stay apart). Measured on CUDA 11.8: identical objects from two
  folders, where they differed in every fatbin entry before.

Which of these a release needs (the fixed-pid library, --frandom-seed) is the release table's
(configuration/releases.py, ``Features``); nothing here compares release numbers.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.version import Version

from wheelforge.configuration import releases
from wheelforge.toolchain.headerlibs import HeaderLibrary
from wheelforge.toolchain.toolkits import Toolkit
from wheelforge.toolchain.torchprobe import TorchEnv

# Where each input folder appears inside the binaries. Stable, short and readable in an error
# message ("./kernels/csrc/ops.cpp:12", "torch/include/torch/csrc/stable/...").
# A file outside every mapped folder (a system header) reads as its path under this name.
SYSTEM = "system"
SOURCE_ROOT = "."
BUILD_DIR = "wheelforge-build"
TORCH = "torch"  # torch's package folder: torch/include/..., torch/lib
TORCH_CUDA = "nvidia"  # pip's CUDA headers beside a CUDA torch: nvidia/cu13/include/...
PYTHON_INCLUDE = "python/include"
TOOLKIT = "cuda"
TOOLKIT_HOST = "cuda-host"  # a provisioned toolkit's own host compiler and its headers
HEADER_LIBRARIES = "header-libraries"  # header-libraries/cutlass/include/cute/...


def header_library_name(name: str) -> str:
    """What a header library's folder reads as in the binaries (and in the build info)."""
    return f"{HEADER_LIBRARIES}/{name}"


def prefix_maps(folders: dict[Path, str]) -> tuple[str, ...]:
    """``-ffile-prefix-map`` flags for *folders* (path → what it reads as). GCC applies the last
    matching map (each new one is put in front of its list), so the deepest folder comes last:
    torch's headers inside a virtual environment inside the project map to torch/include."""
    ordered = sorted(
        ((str(path), name) for path, name in folders.items()), key=lambda kv: (len(kv[0]), kv[0])
    )
    return tuple(f"-ffile-prefix-map={path}={name}" for path, name in ordered)


def input_folders(
    root: Path,
    build_dir: Path,
    torch: TorchEnv,
    toolkit: Toolkit,
    libraries: Sequence[HeaderLibrary] = (),
) -> dict[Path, str]:
    """Every folder a compile reads from (the project, the build folder, torch's package folder,
    pip's CUDA headers beside a CUDA torch, Python's headers, the toolkit, the header
    libraries), and the fixed name it has in the binaries. A header library is named after
    itself even inside the project (its folder is the deeper one there)."""
    folders = {
        root: SOURCE_ROOT,
        build_dir: BUILD_DIR,
        torch.include_dir.parent: TORCH,
        torch.python_include: PYTHON_INCLUDE,
        toolkit.root: TOOLKIT,
    }
    # site-packages/nvidia/<cu13 or a library>/include (torchprobe): without a name of its own,
    # the torch environment's path (the user's cache) would be in the build info's flags and
    # inputs list, and so in the wheel.
    for include in torch.cuda_include_dirs:
        folders.setdefault(include.parents[1], TORCH_CUDA)
    if toolkit.host_cxx is not None:  # a provisioned toolkit: its GCC's own headers lie beside it
        common = Path(os.path.commonpath([toolkit.root, toolkit.host_cxx]))
        if common != Path(common.anchor):
            folders.setdefault(common, TOOLKIT_HOST)
    for lib in libraries:
        folders[lib.root] = header_library_name(lib.name)
    return folders


def spelling(build_dir: Path, root: Path, toolkit: Version) -> Callable[[Path], str]:
    """How the compile commands name a path: relative to the build folder where command_path()
    says so, except for an nvcc that runs from / (before CUDA 12.9: every path absolute)."""
    if releases.features(toolkit).absolute_paths:
        return str
    return functools.partial(command_path, build_dir=build_dir, root=root)


def names_project_relatively(build_dir: Path, root: Path, toolkit: Version) -> bool:
    """Whether the commands name the project's files relative to the build folder (spelling):
    the build folder lies in the project and nvcc does not run from / (12.9 or newer)."""
    return not releases.features(toolkit).absolute_paths and build_dir.is_relative_to(root)


def command_path(path: Path, build_dir: Path, root: Path) -> str:
    if path.is_relative_to(build_dir) or (
        build_dir.is_relative_to(root) and path.is_relative_to(root)
    ):
        return os.path.relpath(path, build_dir)
    return str(path)


def spelled(folders: dict[Path, str], spell: Callable[[Path], str]) -> dict[Path, str]:
    """*folders* as the compile commands spell them (plan.command_path): a folder they name
    relative to the build folder is mapped under that relative spelling (``../..=.`` for the
    project), so no map holds the folder a clone lies in and a compile cache keyed on the
    command line hits from any checkout (a fresh clone in another folder). The build folder itself (``.``) needs no
    map: its files are named ``gen/…``, ``obj/…``. Folders outside the project stay absolute."""
    out: dict[Path, str] = {}
    for folder, name in folders.items():
        spelling = spell(folder)
        if spelling != ".":
            out[Path(spelling)] = name
    return out


def path_namer(folders: tuple[tuple[Path, str], ...]) -> Callable[[Path], str]:
    """Names paths as the binaries name them: under the deepest mapped folder that holds each,
    else under SYSTEM (a host compiler's or the system's header, at a fixed place on any
    machine). The folders are ordered once and each path is matched as a string (a
    build names ~1000 inputs: Path.is_relative_to per folder and input cost ~0.5 s on the H200
    machine, a quarter of a rebuild from a warm compile cache)."""
    deepest = sorted(folders, key=lambda f: -len(f[0].parts))
    prefixes = [(str(folder).rstrip("/") + "/", name) for folder, name in deepest]

    def name_of(path: Path) -> str:
        text = str(path)
        for prefix, name in prefixes:
            if text.startswith(prefix) or text == prefix[:-1]:
                return (Path(name) / text[len(prefix) :]).as_posix()
        return (Path(SYSTEM) / path.relative_to(path.anchor)).as_posix()

    return name_of


def path_free_text(text: str, folders: tuple[tuple[Path, str], ...]) -> str:
    """*text* (a command line) with each mapped folder replaced by its name, deepest first."""
    for folder, name in sorted(folders, key=lambda f: -len(str(f[0]))):
        text = text.replace(str(folder), name)
    return text


def source_name(source: Path, root: Path) -> str:
    """A source's path in the project: its object's name, its seeds' name, and its key in the
    job-cost history; a source outside the project reads as ``_abs/<its absolute path>``."""
    try:
        rel = source.relative_to(root)
    except ValueError:
        rel = Path("_abs", *source.parts[1:])
    return rel.as_posix()


def host_source_flags(name: str) -> tuple[str, ...]:
    """Per-source flags for the host compiler; *name* is the source's path in the project. GCC
    uses its random seed only for LTO and a few internal names; fixing it costs nothing."""
    return (f"-frandom-seed={name}",)


def nvcc_source_flags(name: str, toolkit: Version) -> tuple[str, ...]:
    """Per-source flags for nvcc (see the module notes)."""
    flags = [f"-Xcudafe=--orig_src_path_name={name}"]
    if releases.features(toolkit).random_seed:
        flags.append(f"--frandom-seed={name}")
    return tuple(flags)


# nvcc's temporaries beside the object file, named after it: no pid in any symbol.
NVCC_FLAGS = ("--objdir-as-tempdir",)


def split_nvcc_maps(root: Path) -> tuple[str, ...]:
    """The prefix map an nvcc run through sccache needs besides the others. sccache splits the
    compile into nvcc's own steps (``nvcc --dryrun``), which it runs in a temporary folder of
    its own, naming the temporaries ``x_0.cudafe1.cpp``... (no pid, no folder: they need no
    ``--objdir-as-tempdir``, which it does not support), and it hands the steps the source by
    its absolute path (it canonicalises it), so ``__FILE__`` in the project's files reads
    ``/clone/kernels/x.h`` however the command spells it: the project's absolute path is mapped
    too. Its threads come from the command line alone: sccache drops ``NVCC_APPEND_FLAGS``
    (and the thread count from its cache keys). Measured on CUDA 13.0 with sccache 0.16: the
    same objects from two folders, cached or not."""
    return (f"-Xcompiler=-ffile-prefix-map={root}={SOURCE_ROOT}",)


def needs_fixed_pid(toolkit: Version) -> bool:
    """Whether nvcc of this release must run with the fixed-pid library (no --frandom-seed)."""
    return releases.features(toolkit).fixed_pid


FIXED_PID_LIBRARY = "wheelforge_fixed_pid.so"
FIXED_PID_SOURCE = """\
// Generated by wheelforge (planning/reproducible.py): nvcc before CUDA 12.9 names anonymous
// namespaces after the process id of cicc and cudafe++; this gives them a fixed one.
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

pid_t getpid(void) {
  const char* name = program_invocation_short_name;
  if (strcmp(name, "cicc") == 0 || strcmp(name, "cudafe++") == 0) return 1;
  return (pid_t)syscall(SYS_getpid);
}
"""
