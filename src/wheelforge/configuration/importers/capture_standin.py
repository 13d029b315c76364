"""The stand-in torch of init's setup.py capture child (setup_child.py loads this file by its
path), for a build Python without torch: the names setup.py files ask of torch before anything
is compiled (its version, CUDA build and home, ``torch.utils.cpp_extension``'s constants and
helpers); a name it lacks is recorded, so init can say which one."""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable
from typing import Any


def install(
    context: dict[str, Any], record: dict[str, Any], real_open: Callable[..., Any], cuda_label: str
) -> types.ModuleType:
    """A stand-in torch for a build Python without one."""
    build_ext: Any = importlib.import_module("setuptools.command.build_ext").build_ext

    version = f"{context['torch_version']}+{cuda_label or 'cpu'}"
    cuda_home = context.get("cuda_home")

    def module(name: str, package: bool = False) -> types.ModuleType:
        mod = types.ModuleType(name)
        if package:
            mod.__path__ = []
        sys.modules[name] = mod
        return mod

    def no_gpu(*args: object, **kwargs: object) -> Any:
        raise RuntimeError(
            "Found no NVIDIA driver on your system (wheelforge init's stand-in torch)"
        )

    torch = module("torch", package=True)
    torch.__version__ = version  # type: ignore[attr-defined]
    torch_version = module("torch.version")
    torch_version.__version__ = version  # type: ignore[attr-defined]
    torch_version.cuda = context.get("cuda_version")  # type: ignore[attr-defined]
    torch_version.hip = None  # type: ignore[attr-defined]
    cuda = module("torch.cuda")
    cuda.is_available = lambda: False  # type: ignore[attr-defined]
    cuda.device_count = lambda: 0  # type: ignore[attr-defined]
    cuda.get_device_capability = no_gpu  # type: ignore[attr-defined]
    cuda.get_device_properties = no_gpu  # type: ignore[attr-defined]
    c = module("torch._C")
    c._GLIBCXX_USE_CXX11_ABI = True  # type: ignore[attr-defined]
    config = module("torch.__config__")
    config.parallel_info = lambda: "ATen parallel backend: OpenMP\n"  # type: ignore[attr-defined]
    config.show = lambda: ""  # type: ignore[attr-defined]
    utils = module("torch.utils", package=True)
    ext = module("torch.utils.cpp_extension")

    class BuildExtension(build_ext):  # type: ignore[misc]
        @classmethod
        def with_options(cls, **options: Any) -> type:
            class WithOptions(cls):  # type: ignore[misc, valid-type]
                pass

            return WithOptions

    def join_cuda_home(*paths: str) -> str:
        return os.path.join(cuda_home or "/usr/local/cuda", *paths)  # noqa: PTH118

    def maybe_write(path: str, content: str) -> None:
        with real_open(path, "w") as f:
            f.write(content)

    names: dict[str, Any] = {
        "BuildExtension": BuildExtension, "CUDA_HOME": cuda_home, "ROCM_HOME": None,
        "HIP_HOME": None, "SYCL_HOME": None, "IS_HIP_EXTENSION": False, "IS_WINDOWS": False,
        "IS_MACOS": False, "SUBPROCESS_DECODE_ARGS": (), "COMMON_HIP_FLAGS": [],
        "COMMON_HIPCC_FLAGS": [], "COMMON_MSVC_FLAGS": [],
        "COMMON_NVCC_FLAGS": ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                              "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
                              "--expt-relaxed-constexpr"],
        "include_paths": lambda *a, **k: [], "library_paths": lambda *a, **k: [],
        "get_cxx_compiler": lambda: os.environ.get("CXX", "c++"),
        "_is_cuda_file": lambda p: os.path.splitext(p)[1] in (".cu", ".cuh"),  # noqa: PTH122
        "_join_cuda_home": join_cuda_home, "_join_rocm_home": join_cuda_home,
        "_maybe_write": maybe_write, "_write_ninja_file": lambda *a, **k: None,
    }  # fmt: skip
    for key, value in names.items():
        setattr(ext, key, value)

    def missing(name: str) -> Any:
        record["stub_missing"].append(f"torch.utils.cpp_extension.{name}")
        raise AttributeError(f"wheelforge init's stand-in torch has no {name}")

    setattr(ext, "__getattr__", missing)  # noqa: B010 - a module's __getattr__ (PEP 562)
    torch.version = torch_version  # type: ignore[attr-defined]
    torch.cuda = cuda  # type: ignore[attr-defined]
    torch._C = c  # type: ignore[attr-defined]
    torch.__config__ = config  # type: ignore[attr-defined]
    torch.utils = utils  # type: ignore[attr-defined]
    utils.cpp_extension = ext  # type: ignore[attr-defined]
    record["torch"] = {"version": version, "real": False, "cuda": context.get("cuda_version")}
    return ext
