"""What the ABI flavour decides once torch is probed: how sources see torch and Python, what
the link adds, how the module and wheel are named and pinned (the AbiFlavour of a plan). What
it decides before (configuration/abi.py) is the flavour's *kind*. What differs between the
extensions of one wheel (their include folders, TORCH_EXTENSION_NAME) is the planner's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration import abi as abis
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.planning.plan import AbiFlavour, GeneratedFile
from wheelforge.toolchain.torchprobe import TorchEnv

Rel = Callable[[Path], str]  # a path as the compile commands name it (command_path)


def _stable_abi(matrix: Matrix, torch: TorchEnv, weak: GeneratedFile, rel: Rel) -> AbiFlavour:
    """One binary for every torch from the target up: torch's stable headers hide what is newer
    than the target, Python's limited API keeps the abi3 tag true."""
    return AbiFlavour(
        kind=abis.STABLE,
        target=matrix.torch.floor,
        # Each shared object's -DTORCH_TARGET_VERSION comes first (AbiFlavour.defines_for).
        defines=(f"-DPy_LIMITED_API={matrix.limited_api_macro}",),
        # Python's headers too: a source may include <Python.h> (Py_LIMITED_API still holds).
        includes=tuple(f"-I{rel(d)}" for d in (torch.include_dir, torch.python_include)),
        force_include=("-include", rel(weak.path)),
        generated=(weak,),
        extra_ldflags=(),
        abi_tag=f"{matrix.python_abi}-abi3",
        module_suffix=".abi3.so",
        torch_requirement=matrix.torch.requirement,
    )


def _unstable_abi(matrix: Matrix, torch: TorchEnv, _weak: GeneratedFile, rel: Rel) -> AbiFlavour:
    """torch's full C++ API, as torch.utils.cpp_extension compiles it: every include folder,
    Python's headers (pybind11), the C++ ABI libtorch was built with; one torch, one CPython."""
    cp = "cp" + torch.python_version.replace(".", "")
    # as torch.utils.cpp_extension.CUDAExtension links them (classic extensions use c10::cuda)
    cuda_libs = ("-lc10_cuda", "-ltorch_cuda") if torch.cuda else ()
    return AbiFlavour(
        kind=abis.UNSTABLE,
        target=matrix.torch.target,
        defines=(
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={torch.cxx11_abi}",
        ),
        includes=tuple(f"-I{rel(d)}" for d in (*torch.include_dirs, torch.python_include)),
        force_include=(),
        generated=(),
        extra_ldflags=(
            "-ltorch_python",
            *cuda_libs,
        ),  # -ltorch_python: pybind11 bindings of torch's types
        abi_tag=f"{cp}-{cp}",  # the full Python C API: one CPython only
        module_suffix=torch.ext_suffix,
        torch_requirement=f"torch=={torch.version.major}.{torch.version.minor}.*",
        # as torch.utils.cpp_extension of that torch compiles (torch 2.14's headers #error below C++20)
        cxx_std=torch.cxx_std,
        # A provisioned toolkit holds the compiler, not cusparse.h and its kind: those of the
        # torch environment's CUDA, after the toolkit's own (its cuda_runtime.h wins).
        system_includes=tuple(w for d in torch.cuda_include_dirs for w in ("-isystem", rel(d))),
    )


_FLAVOURS = {abis.STABLE: _stable_abi, abis.UNSTABLE: _unstable_abi}


def flavour(matrix: Matrix, torch: TorchEnv, weak: GeneratedFile, rel: Rel) -> AbiFlavour:
    """The flavour of the ABI *matrix* names, for *torch*; *weak* is the weak-shims header."""
    return _FLAVOURS[abis.of(matrix.abi)](matrix, torch, weak, rel)
