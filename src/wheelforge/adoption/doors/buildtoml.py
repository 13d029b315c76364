"""The kernel-builder front door: a Hugging Face ``build.toml`` (huggingface/kernels,
docs/source/builder/writing-kernels.md; the kernels of huggingface/kernels-community).

What kernel-builder's CMake templates do for a CUDA build, translated: the ``[torch]`` sources
and every ``backend = "cuda"`` kernel's make one extension (``<name>._<name>_cuda``, the Python
package in ``torch-ext/<name>``); a kernel's ``cuda-capabilities`` become its sources' archs
(kernel-builder's loose intersection is wheelforge's per-source rule); ``cuda-flags`` and
``cxx-flags`` go to the compilers; the defines its preamble adds (``USE_CUDA``,
``CUDA_KERNEL``), torch's nvcc flags as kernel-builder keeps them, ``-fno-gnu-unique``; the
stable-ABI version becomes the torch floor. The two files kernel-builder generates at build time,
``registration.h`` (its op-registration macros) and the package's ``_ops.py`` (the op namespace),
are written by init. A ``cutlass_X_Y`` dependency is the header library nvidia-cutlass X.Y.Z.0
from PyPI where that release exists (kernel-builder's version table below), unless the project
has CUTLASS itself (a submodule its include folders name); other ``depends`` need a hand."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wheelforge.adoption.doors.flags import merge_archs, sort_flags
from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedHeaderLibrary,
    CapturedSource,
    GeneratedFile,
    ProjectMetadata,
)
from wheelforge.configuration.archs import ArchSpec, parse_arch_list
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES
from wheelforge.foundation import readers
from wheelforge.foundation.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# kernel-builder's preamble.cmake for CUDA: its defines, and torch's COMMON_NVCC_FLAGS less the
# half-precision guards it removes (utils.cmake get_torch_gpu_compiler_flags, CUDA 11.8+).
_DEFINES = ("-DUSE_CUDA=1", "-DCUDA_KERNEL")
_NVCC_FLAGS = ("--expt-relaxed-constexpr", "-DENABLE_FP8")
_CXX_FLAGS = ("-fno-gnu-unique",)
# preamble.cmake's CUDA_DEFAULT_KERNEL_ARCHS for CUDA 13.0+: what a kernel without
# cuda-capabilities is built for.
DEFAULT_CAPABILITIES = "7.5 8.0 8.6 8.7 8.9 9.0 10.0 11.0 12.0 12.1+PTX"

# kernel-builder's CUTLASS dependencies and the release each is (huggingface/kernels
# nix-builder/pkgs/cutlass/default.nix: tag v<version> of NVIDIA/cutlass, headers only).
KERNEL_BUILDER_CUTLASS = {
    "cutlass_2_10": "2.10.0",
    "cutlass_3_5": "3.5.1",
    "cutlass_3_6": "3.6.0",
    "cutlass_3_8": "3.8.0",
    "cutlass_3_9": "3.9.2",
    "cutlass_4_0": "4.0.0",
    "cutlass_4_4": "4.4.2",
    "cutlass_4_5": "4.5.2",
}
# The nvidia-cutlass releases on PyPI whose wheel ships CUTLASS's headers (under
# cutlass_library/source/), as pip lists them (checked for 3.5.1.0, 3.6.0.0, 3.8.0.0, 4.2.0.0).
NVIDIA_CUTLASS_RELEASES = (
    "3.3.0.0",
    "3.4.0.0",
    "3.4.1.0",
    "3.5.0.0",
    "3.5.1.0",
    "3.6.0.0",
    "3.7.0.0",
    "3.8.0.0",
    "4.2.0.0",
)
NVIDIA_CUTLASS_INCLUDE = (
    "cutlass_library/source/include",
    "cutlass_library/source/tools/util/include",
)

# kernel-builder's templates/torch/registration.h (vLLM's csrc/core/registration.h).
REGISTRATION_H = """\
// Written by 'wheelforge init': the registration macros kernel-builder generates
// (huggingface/kernels templates/torch/registration.h, from vLLM's csrc/core/registration.h).
#pragma once

#include <Python.h>

#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)

#define _STRINGIFY(A) #A
#define STRINGIFY(A) _STRINGIFY(A)

#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) \\
  STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// REGISTER_EXTENSION: the module's init function, so `import` loads the library.
#define REGISTER_EXTENSION(NAME)                                               \\
  PyMODINIT_FUNC CONCAT(PyInit_, NAME)() {                                     \\
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,                 \\
                                        STRINGIFY(NAME), nullptr, 0, nullptr}; \\
    return PyModule_Create(&module);                                           \\
  }
"""

_OPS_PY = '''\
# Written by 'wheelforge init': the module kernel-builder generates (templates/torch/_ops.py.in).
import torch

from . import {ops}

ops = torch.ops.{ops}


def add_op_namespace_prefix(op_name: str) -> str:
    """Prefix op by namespace."""
    return f"{ops}::{{op_name}}"
'''


# kernels-data's python_dependencies.json: a python-depends name as the PyPI requirement(s) it is
# (general, and per backend); a name it does not list is written as it is.
PYTHON_DEPENDS = {"einops": ("einops",), "helion": ("helion",), "tvm-ffi": ("apache-tvm-ffi",)}
BACKEND_PYTHON_DEPENDS = {
    "cuda": {"nvidia-cutlass-dsl": ("nvidia-cutlass-dsl",)},
    "neuron": {"nki": ("nki",)},
    "xpu": {"onednn": ("onednn-devel",)},
}

# kernel-builder's templates/torch/noarch/_ops.py: the op namespace of the backend torch is
# built for, found when the package is imported (kernel-builder adds a build id after it).
_NOARCH_OPS_PY = '''\
# Written by 'wheelforge init': the module kernel-builder generates (templates/torch/noarch/_ops.py).
import torch


def get_backend() -> str:
    """Detect the backend by inspecting torch."""
    if torch.version.cuda is not None:
        return "cuda"
    elif torch.version.hip is not None:
        return "rocm"
    elif torch.backends.mps.is_available():
        return "metal"
    elif hasattr(torch.version, "xpu") and torch.version.xpu is not None:
        return "xpu"
    return "cpu"


_OPS_NAME = f"_{name}_{{get_backend()}}"

ops = getattr(torch.ops, _OPS_NAME)


def add_op_namespace_prefix(op_name: str) -> str:
    """Prefix op by namespace."""
    return f"{{_OPS_NAME}}::{{op_name}}"
'''
# What kernel-builder's noarch pyproject.toml template writes (templates/torch/noarch/pyproject.toml).
NOARCH_VERSION = "0.0.1"
NOARCH_TORCH = ">=2.8"
NOARCH_PYTHON = ">=3.9"


def python_depends(general: Mapping[str, Any], backend: str | None = None) -> tuple[str, ...]:
    """build.toml's python-depends (``[general]``, or ``[general.<backend>]``) as PyPI
    requirements, through kernels-data's table."""
    table = general.get(backend) if backend else general
    names = _strings(table, "python-depends") if isinstance(table, dict) else []
    known = BACKEND_PYTHON_DEPENDS.get(backend, {}) if backend else PYTHON_DEPENDS
    return tuple(dict.fromkeys(p for n in names for p in known.get(n, (n,))))


def is_kernel_builder(path: Path) -> bool:
    """Whether *path* is a kernel-builder build.toml (a [general] table naming backends)."""
    try:
        data = tomllib.loads(readers.read_text(path, cap=readers.CONFIG_CAP))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    general = data.get("general")
    return (
        isinstance(general, dict)
        and "name" in general
        and ("kernel" in data or "torch" in data or "torch-noarch" in data)
    )


def _strings(table: Mapping[str, Any], key: str) -> list[str]:
    value = table.get(key) or []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _stable_target(torch: Mapping[str, Any]) -> str | None:
    stable = torch.get("stable-abi")
    if isinstance(stable, str):
        return stable
    if isinstance(stable, dict) and isinstance(stable.get("cuda"), str):
        return str(stable["cuda"])
    return None


class _Kernels:
    """The CUDA build's parts: the [torch] sources and each CUDA kernel's."""

    def __init__(self, root: Path, torch: Mapping[str, Any]) -> None:
        self.root = root
        self.sources: list[CapturedSource] = []
        self.missing: list[str] = []
        self.includes: list[str] = _strings(torch, "include")
        self.cuda_flags: dict[str, tuple[str, ...]] = {}
        self.cxx_flags: list[str] = []
        self.capabilities: list[tuple[ArchSpec, ...] | None] = []
        self.depends: set[str] = set()
        self.done: list[str] = []
        self.add(_strings(torch, "src"), None)

    def add(self, files: list[str], archs: tuple[ArchSpec, ...] | None) -> None:
        for file in files:
            if Path(file).suffix not in SOURCE_SUFFIXES:
                continue  # headers: kernel-builder lists them for its file sets
            if not (self.root / file).is_file():
                self.missing.append(file)
            self.sources.append(CapturedSource(path=file, archs=archs))

    def kernel(self, name: str, kernel: Mapping[str, Any]) -> None:
        where = f"build.toml [kernel.{name}]"
        caps = _strings(kernel, "cuda-capabilities")
        archs = (
            parse_arch_list(" ".join(caps), source=f"{where} cuda-capabilities") if caps else None
        )
        self.capabilities.append(archs)
        self.add(_strings(kernel, "src"), archs)
        self.includes += _strings(kernel, "include")
        self.cuda_flags[name] = tuple(_strings(kernel, "cuda-flags"))
        self.cxx_flags += _strings(kernel, "cxx-flags")
        self.depends.update(d for d in _strings(kernel, "depends") if d != "torch")
        if kernel.get("cuda-minver"):
            self.done.append(
                f"{where}: cuda-minver {kernel['cuda-minver']}: build it with that CUDA or newer"
            )

    def archs(self) -> tuple[ArchSpec, ...]:
        """The arch set: the kernels' capabilities, or kernel-builder's default when one has none."""
        if all(self.capabilities):
            return merge_archs(*(a for a in self.capabilities if a))
        self.done.append(
            "arch-sets: kernel-builder's default capabilities for CUDA 13 "
            f"({DEFAULT_CAPABILITIES}): a kernel without cuda-capabilities is built for all of "
            "them"
        )
        return parse_arch_list(DEFAULT_CAPABILITIES, source="kernel-builder's default capabilities")


def _load(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = tomllib.loads(readers.read_text(path, cap=readers.CONFIG_CAP))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} could not be read: {exc}") from None
    return data


def _cuda_kernels(
    path: Path, data: Mapping[str, Any], done: list[str]
) -> dict[str, dict[str, Any]]:
    kernels = {k: v for k, v in (data.get("kernel") or {}).items() if isinstance(v, dict)}
    cuda = {
        k: v for k, v in kernels.items() if v.get("backend", v.get("language")) in ("cuda", None)
    }
    others = sorted(f"{k} ({v.get('backend')})" for k, v in kernels.items() if k not in cuda)
    if others:
        done.append(f"build.toml: left out the kernels of other backends: {', '.join(others)}")
    if not cuda:
        raise ConfigError(
            f'{path}: no kernel with backend = "cuda"; wheelforge builds CUDA extensions'
        )
    return cuda


def _nvcc_flags(parts: _Kernels, hand: list[str]) -> tuple[str, ...]:
    if len(set(parts.cuda_flags.values())) > 1:
        hand.append(
            "build.toml: the CUDA kernels have different cuda-flags ("
            + "; ".join(f"{k}: {' '.join(v) or 'none'}" for k, v in parts.cuda_flags.items())
            + "); matrix.yaml has one nvcc-flags list: wrote their union"
        )
    given = list(dict.fromkeys(f for flags in parts.cuda_flags.values() for f in flags))
    return tuple(dict.fromkeys([*_NVCC_FLAGS, *sort_flags(given).kept]))


def header_libraries(
    depends: set[str], hand: list[str], done: list[str]
) -> tuple[CapturedHeaderLibrary, ...]:
    """build.toml's ``cutlass_X_Y`` as the nvidia-cutlass release of that version on PyPI;
    one with no such release (or another dependency) needs a hand. A git submodule or vendored
    tree the include folders name takes the place of the PyPI one (writer/matrixfile.py)."""
    out: list[CapturedHeaderLibrary] = []
    for dep in sorted(depends):
        version = KERNEL_BUILDER_CUTLASS.get(dep)
        release = f"{version}.0" if version else None
        if release in NVIDIA_CUTLASS_RELEASES and out:
            hand.append(
                f"build.toml depends on {dep} besides {out[0].found.rsplit(' ', 1)[-1]}: one CUTLASS "
                f"compiles every source; wrote {out[0].pypi}"
            )
        elif release in NVIDIA_CUTLASS_RELEASES:
            out.append(
                CapturedHeaderLibrary(
                    name="cutlass",
                    pypi=f"nvidia-cutlass=={release}",
                    include=NVIDIA_CUTLASS_INCLUDE,
                    found=f"build.toml depends on {dep}",
                )
            )
            done.append(
                f"header-libraries: build.toml's {dep} is CUTLASS {version} (kernel-builder's); wrote "
                f"pypi: nvidia-cutlass=={release}, whose wheel ships those headers (downloaded once into the cache)"
            )
        elif version:
            hand.append(
                f"build.toml depends on {dep}, CUTLASS {version} in kernel-builder, which has no nvidia-cutlass "
                f"release on PyPI ({', '.join(NVIDIA_CUTLASS_RELEASES[-3:])}, ...): add CUTLASS v{version} as a git "
                "submodule (git submodule add https://github.com/NVIDIA/cutlass third_party/cutlass; git -C "
                f"third_party/cutlass checkout v{version}) and write header-libraries: [{{name: cutlass, path: "
                "third_party/cutlass, include: [include, tools/util/include]}]"
            )
        else:
            hand.append(
                f"build.toml depends on {dep} (a dependency kernel-builder provides); put it in the project "
                "(a git submodule) and name it under header-libraries, or its include folder in include-dirs"
            )
    return tuple(out)


def _extension(
    parts: _Kernels, name: str, torch: Mapping[str, Any], hand: list[str]
) -> CapturedExtension:
    archs = parts.archs()
    if "csrc" not in parts.includes and (parts.root / "csrc").is_dir():
        parts.includes.append("csrc")  # define_gpu_extension_target adds it
    return CapturedExtension(
        name=name,
        kind="kernel-builder",
        where="build.toml",
        sources=tuple(
            CapturedSource(path=s.path, archs=s.archs if s.archs and s.archs != archs else None)
            for s in parts.sources
        ),
        include_dirs=tuple(dict.fromkeys(parts.includes)),
        defines=_DEFINES,
        cxx_flags=tuple(dict.fromkeys([*_CXX_FLAGS, *parts.cxx_flags])),
        nvcc_flags=_nvcc_flags(parts, hand),
        archs=archs,
        torch_target=_stable_target(torch),
        stable=_stable_target(torch) is not None,
    )


# The build.toml edition this door reads (huggingface/kernels docs/source/builder/writing-kernels.md).
EDITION = 5


def _edition_notes(general: Mapping[str, Any], torch: Mapping[str, Any], done: list[str]) -> None:
    """What an edition-5 build.toml asks that a matrix holds another way, said once."""
    edition = general.get("edition")
    if isinstance(edition, int) and edition > EDITION:
        done.append(
            f"build.toml: edition {edition}, read as edition {EDITION} (the newest known here)"
        )
    for table, where in ((torch, "[torch]"), (general.get("cuda") or {}, "[general.cuda]")):
        bounds = [
            f"{k} {table[k]}"
            for k in ("minver", "maxver")
            if isinstance(table, dict) and table.get(k)
        ]
        if bounds:
            done.append(
                f"build.toml {where} {', '.join(bounds)}: kernel-builder's build-variant bounds; "
                "wheelforge builds the torch and CUDA releases the matrix names"
            )


def _pyext_globs(torch: Mapping[str, Any]) -> list[str]:
    """``[torch] pyext``: the file extensions kernel-builder ships from the package folder
    (py and pyi by default, which the packages key ships anyway), as package-data globs."""
    return [f"**/*.{ext}" for ext in _strings(torch, "pyext") if ext not in ("py", "pyi")]


def _typed(package: Path) -> list[str]:
    """``py.typed``, which setuptools (69+) packs with a package that has one (PEP 561)."""
    return ["py.typed"] if (package / "py.typed").is_file() else []


def kernel_metadata(
    general: Mapping[str, Any], kernel_id: str, archs: tuple[ArchSpec, ...] | None
) -> str:
    """The ``metadata.json`` kernel-builder writes beside the kernel's package files
    (kernels-data's Metadata for the CUDA backend): what the kernels library and the Hub read.
    A torch-noarch kernel names archs only where build.toml lists them (cuda-capabilities)."""
    document: dict[str, Any] = {
        "name": str(general.get("name", "")),
        "id": kernel_id,
        "version": general.get("version", 1),
        "license": str(general.get("license", "")),
    }
    for key in ("upstream", "source"):
        if general.get(key):
            document[key] = str(general[key])
    document["python-depends"] = list(python_depends(general) + python_depends(general, "cuda"))
    document["kernel-depends"] = _strings(general, "kernel-depends")
    document["backend"] = {"type": "cuda"}
    if archs is not None:
        document["backend"]["archs"] = sorted({str(a.arch) for a in archs})
    return json.dumps(document, indent=2) + "\n"


def read_build_toml(root: Path) -> CapturedBuild:
    path = root / "build.toml"
    data = _load(path)
    general = data.get("general") or {}
    python_name = str(general.get("name") or root.name).replace("-", "_")
    if not python_name.isidentifier():
        # It names the package folder torch-ext/<name> that init writes _ops.py into:
        # ``name = "../../x"`` once wrote outside the project.
        raise ConfigError(
            f"{path}: [general] name {general.get('name') or root.name!r} is not a Python package "
            "name; use letters, digits, '_' and '-' (kernel-builder's names, such as 'flash-attn')"
        )
    torch = data.get("torch")
    if not isinstance(torch, dict):
        if isinstance(data.get("torch-noarch"), dict):
            return _noarch(root, general, data["torch-noarch"], python_name)
        raise ConfigError(f"{path}: no [torch] table; wheelforge builds compiled extensions")
    hand: list[str] = []
    parts = _Kernels(root, torch)
    _edition_notes(general, torch, parts.done)
    for name, kernel in _cuda_kernels(path, data, parts.done).items():
        parts.kernel(name, kernel)
    package, leaf = f"torch-ext/{python_name}", f"_{python_name}_cuda"
    extension = _extension(parts, f"{python_name}.{leaf}", torch, hand)
    libraries = header_libraries(parts.depends, hand, parts.done)
    if not (root / package / "__init__.py").is_file():
        hand.append(f"build.toml: the Python package {package} has no __init__.py")
    parts.done.append(
        f"wrote {package}/_ops.py, {package}/metadata.json and torch-ext/registration.h, which "
        f"kernel-builder generates at build time (the op namespace is {leaf})"
    )
    metadata_json = kernel_metadata(general, leaf, extension.archs)
    package_data = ["metadata.json", *_pyext_globs(torch), *_typed(root / package)]
    tests = _tests(root, hand)
    return CapturedBuild(
        root=root,
        front_door="build.toml",
        extensions=(extension,),
        metadata=ProjectMetadata(
            name=python_name,
            version="0.1.0",  # what kernel-builder's pyproject.toml template writes
            license=str(general["license"]) if general.get("license") else None,
            url=str(general["upstream"]) if general.get("upstream") else None,
            dependencies=python_depends(general),
        ),
        packages=(package,),
        package_data=tuple(package_data),
        tests=tests,
        generated=(
            GeneratedFile(path="torch-ext/registration.h", text=REGISTRATION_H),
            GeneratedFile(path=f"{package}/_ops.py", text=_OPS_PY.format(ops=leaf)),
            GeneratedFile(path=f"{package}/metadata.json", text=metadata_json),
        ),
        header_libraries=libraries,
        missing=tuple(parts.missing),
        hand=tuple(hand),
        done=tuple(parts.done),
    )


def _tests(root: Path, hand: list[str]) -> str | None:
    """A kernel's tests folder, with the line on how kernel-builder's tests load the kernel."""
    if not (root / "tests").is_dir():
        return None
    hand.append(
        "tests: kernel-builder's tests load the kernel with kernels.get_kernel(...) from the Hub "
        "or LOCAL_KERNELS; to test the installed wheel, import the package instead"
    )
    return "tests"


def _noarch(
    root: Path, general: Mapping[str, Any], noarch: Mapping[str, Any], python_name: str
) -> CapturedBuild:
    """A ``[torch-noarch]`` kernel (Python and data files only, JIT-compiled or plain torch):
    the wheel kernel-builder's noarch pyproject.toml makes (py3-none-any, version 0.0.1,
    torch>=2.8, backend python-depends as extras), with the _ops.py and metadata.json it
    writes into the package."""
    package = f"torch-ext/{python_name}"
    hand: list[str] = []
    done = [
        "build.toml [torch-noarch]: nothing to compile; matrix.yaml has no extension, and "
        "wheelforge build packs one py3-none-any wheel, as kernel-builder's noarch "
        "pyproject.toml does",
        f"wrote {package}/_ops.py and {package}/metadata.json, which kernel-builder generates "
        f"at build time (the op namespace is _{python_name}_<backend>)",
    ]
    if not (root / package / "__init__.py").is_file():
        hand.append(f"build.toml: the Python package {package} has no __init__.py")
    caps = _strings(noarch, "cuda-capabilities")
    archs = (
        parse_arch_list(" ".join(caps), source="build.toml [torch-noarch] cuda-capabilities")
        if caps
        else None
    )
    extras = tuple(
        (backend, deps)
        for backend in sorted(BACKEND_PYTHON_DEPENDS.keys() | {"cpu", "metal", "rocm"})
        if (deps := python_depends(general, backend))
    )
    data_globs = [f"**/*.{ext}" for ext in _strings(noarch, "pyext") if ext not in ("py", "pyi")]
    tests = _tests(root, hand)
    return CapturedBuild(
        root=root,
        front_door="build.toml",
        extensions=(),
        pure=True,
        metadata=ProjectMetadata(
            name=str(general.get("name") or python_name),
            version=NOARCH_VERSION,
            license=str(general["license"]) if general.get("license") else None,
            url=str(general["upstream"]) if general.get("upstream") else None,
            requires_python=NOARCH_PYTHON,
            dependencies=python_depends(general),
            torch_requirement=f"torch{NOARCH_TORCH}",
            extras=extras,
        ),
        packages=(package,),
        package_data=("metadata.json", *data_globs, *_typed(root / package)),
        tests=tests,
        generated=(
            GeneratedFile(path=f"{package}/_ops.py", text=_NOARCH_OPS_PY.format(name=python_name)),
            GeneratedFile(
                path=f"{package}/metadata.json",
                text=kernel_metadata(general, f"_{python_name}_cuda", archs),
            ),
        ),
        hand=tuple(hand),
        done=tuple(done),
    )
