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


def _module(name: str, *, package: bool = False, **names: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    if package:
        module.__path__ = []
    for key, value in names.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return module


def _no_gpu(*args: object, **kwargs: object) -> Any:
    raise RuntimeError("Found no NVIDIA driver on your system (wheelforge init's stand-in torch)")


def _torch(version: str, cuda_version: str | None) -> types.ModuleType:
    """torch, torch.version, torch.cuda (no GPU), torch._C, torch.__config__, torch.utils."""
    return _module(
        "torch",
        package=True,
        __version__=version,
        version=_module("torch.version", __version__=version, cuda=cuda_version, hip=None),
        cuda=_module(
            "torch.cuda",
            is_available=lambda: False,
            device_count=lambda: 0,
            get_device_capability=_no_gpu,
            get_device_properties=_no_gpu,
        ),
        _C=_module("torch._C", _GLIBCXX_USE_CXX11_ABI=True),
        __config__=_module(
            "torch.__config__",
            parallel_info=lambda: "ATen parallel backend: OpenMP\n",
            show=lambda: "",
        ),
        utils=_module("torch.utils", package=True),
    )


def _cpp_extension(cuda_home: str | None, real_open: Callable[..., Any]) -> dict[str, Any]:
    """The names of torch.utils.cpp_extension a setup.py reads before anything is built."""
    build_ext: Any = importlib.import_module("setuptools.command.build_ext").build_ext

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

    return {
        "BuildExtension": BuildExtension,
        "CUDA_HOME": cuda_home,
        "ROCM_HOME": None,
        "HIP_HOME": None,
        "SYCL_HOME": None,
        "IS_HIP_EXTENSION": False,
        "IS_WINDOWS": False,
        "IS_MACOS": False,
        "SUBPROCESS_DECODE_ARGS": (),
        "COMMON_HIP_FLAGS": [],
        "COMMON_HIPCC_FLAGS": [],
        "COMMON_MSVC_FLAGS": [],
        "COMMON_NVCC_FLAGS": [
            "-D__CUDA_NO_HALF_OPERATORS__",
            "-D__CUDA_NO_HALF_CONVERSIONS__",
            "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
            "-D__CUDA_NO_HALF2_OPERATORS__",
            "--expt-relaxed-constexpr",
        ],
        "include_paths": lambda *a, **k: [],
        "library_paths": lambda *a, **k: [],
        "get_cxx_compiler": lambda: os.environ.get("CXX", "c++"),
        "_is_cuda_file": lambda p: os.path.splitext(p)[1] in (".cu", ".cuh"),  # noqa: PTH122
        "_join_cuda_home": join_cuda_home,
        "_join_rocm_home": join_cuda_home,
        "_maybe_write": maybe_write,
        "_write_ninja_file": lambda *a, **k: None,
    }


def install(
    context: dict[str, Any], record: dict[str, Any], real_open: Callable[..., Any], cuda_label: str
) -> types.ModuleType:
    """The stand-in torch in sys.modules; its torch.utils.cpp_extension."""
    version = f"{context['torch_version']}+{cuda_label or 'cpu'}"
    torch = _torch(version, context.get("cuda_version"))
    ext = _module(
        "torch.utils.cpp_extension", **_cpp_extension(context.get("cuda_home"), real_open)
    )

    def missing(name: str) -> Any:
        if name.startswith("__"):  # the import system asks (__path__, __spec__): not setup.py
            raise AttributeError(name)
        record["stub_missing"].append(f"torch.utils.cpp_extension.{name}")
        raise AttributeError(f"wheelforge init's stand-in torch has no {name}")

    setattr(ext, "__getattr__", missing)  # noqa: B010 - a module's __getattr__ (PEP 562)
    torch.utils.cpp_extension = ext
    record["torch"] = {"version": version, "real": False, "cuda": context.get("cuda_version")}
    return ext
