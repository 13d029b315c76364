"""The stand-in torch of init's setup.py capture child (setup_child.py loads this file by its
path), for a build Python without torch: a CUDA build of torch on a machine without a GPU, as
far as a setup.py looks before anything is compiled.

What it answers, as an installed torch would:
- the import system: ``torch`` and its stand-in submodules are in ``sys.modules`` with a module
  spec and a loader (``importlib.util.find_spec("torch")``, exllamav2's probe, raised
  "torch.__spec__ is None" before), ``__file__`` and ``__path__`` in a folder of the scratch
  space (``os.path.dirname(torch.__file__)``, ``torch.__path__[0]``);
- its distribution: a ``torch-X.dist-info`` in that folder, found by ``importlib.metadata``
  (``version("torch")``, ``distribution("torch")``) and by ``pkg_resources``;
- its version (``torch.__version__``, ``torch.version``: compared with strings and tuples as
  torch's TorchVersion is), CUDA build and home (``torch.version.cuda``, ``CUDA_HOME``), no GPU
  (``torch.cuda.is_available()`` false, a device asked for raises the driver's words), its C++
  ABI (``torch._C._GLIBCXX_USE_CXX11_ABI``), and ``torch.utils.cpp_extension``'s constants and
  helpers.

A name it lacks (``torch.nn``, ``cpp_extension.load``) raises as a missing name would and is
recorded with the line of setup.py that asked, so init can say which one (setupcapture.py).
Like setup_child.py, it imports nothing from wheelforge and runs under any CPython from 3.10.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import shutil
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

# The stand-in's modules; an import of another torch submodule is a name it lacks.
_PACKAGES = ("torch", "torch.cuda", "torch.utils", "torch.backends")


def _version_class() -> Any:
    """packaging's Version, as torch's TorchVersion uses it: packaging itself, else the copy
    setuptools vendors; None when neither imports."""
    for name in ("packaging.version", "setuptools.extern.packaging.version"):
        try:
            return importlib.import_module(name).Version
        except ImportError:
            continue
    return None


def _key(value: object) -> Any:
    """*value* (a version string, or a tuple of numbers) as a comparable version."""
    text = ".".join(str(v) for v in value) if isinstance(value, tuple | list) else str(value)
    version = _version_class()
    if version is not None:
        try:
            return version(text)
        except ValueError:
            raise TypeError(
                f"'{text}' is not a version torch's TorchVersion compares with"
            ) from None
    release, _, local = text.strip().partition("+")
    if re.fullmatch(r"\d+(\.\d+)*", release) is None:
        raise TypeError(f"'{text}' is not a version torch's TorchVersion compares with")
    numbers = [int(v) for v in release.split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return (tuple(numbers), local)


class TorchVersion(str):
    """``torch.__version__``: a str that compares with a version string or a tuple of numbers
    (``torch.__version__ >= (2, 4)``, ``>= "2.4"``) as torch.torch_version.TorchVersion does,
    by packaging's version rules."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return bool(_key(self) < _key(other))

    def __le__(self, other: object) -> bool:
        return bool(_key(self) <= _key(other))

    def __gt__(self, other: object) -> bool:
        return bool(_key(self) > _key(other))

    def __ge__(self, other: object) -> bool:
        return bool(_key(self) >= _key(other))

    def __eq__(self, other: object) -> bool:
        try:
            return bool(_key(self) == _key(other))
        except TypeError:
            return False

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


class _Loader(importlib.abc.Loader):
    """The loader of the stand-in's specs: the module is already made (importlib.reload and
    a module_from_spec get it back as it is)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return sys.modules.get(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:  # noqa: ARG002 - made already
        return None


class _Finder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: an import of a torch submodule the stand-in lacks is recorded
    (and then not found, as the import system goes on to an empty folder), a stand-in module
    reloaded gets its own spec back; ``importlib.metadata`` asked for torch's distribution
    gets the stand-in's ``torch-X.dist-info``."""

    def __init__(self, dist_info: str, missing: Callable[[str], None]) -> None:
        self.dist_info = dist_info
        self.missing = missing

    def find_spec(
        self,
        fullname: str,
        path: object = None,  # noqa: ARG002 - the finder protocol's
        target: object = None,  # noqa: ARG002
    ) -> importlib.machinery.ModuleSpec | None:
        module = sys.modules.get(fullname)
        if module is not None and isinstance(getattr(module, "__loader__", None), _Loader):
            return module.__spec__  # importlib.reload(torch) finds its spec again: this one
        if fullname.startswith("torch.") and module is None:
            self.missing(f"import {fullname}")
        return None

    def find_distributions(self, context: Any = None) -> Iterator[Any]:
        name = getattr(context, "name", None)
        if name is not None and re.sub(r"[-_.]+", "-", str(name)).lower() == "torch":
            yield importlib.import_module("importlib.metadata").PathDistribution(
                importlib.import_module("pathlib").Path(self.dist_info)
            )


class StandIn:
    """The stand-in torch's modules and files for one child run: *folder* (in the scratch
    space) holds its package folder and dist-info; *record* gets the names setup.py asked of
    it and it lacks, each with *where* (setup.py's line)."""

    def __init__(
        self,
        folder: str,
        record: dict[str, Any],
        where: Callable[[], str],
        real_open: Callable[..., Any],
    ) -> None:
        self.folder = folder
        self.record = record
        self.where = where
        self.real_open = real_open
        self.package = os.path.join(folder, "torch")  # noqa: PTH118
        self.loader = _Loader()

    def missing(self, name: str) -> None:
        self.record["stub_missing"].append({"name": name, "where": self.where()})

    def module(self, name: str, **names: Any) -> types.ModuleType:
        """*name* in sys.modules, with a spec as an installed torch's module has, and a
        ``__getattr__`` that records a name it lacks (PEP 562)."""
        package = name in _PACKAGES
        leaf = name.split(".")[1:]
        folder = os.path.join(self.package, *leaf) if package else None  # noqa: PTH118
        origin = (
            os.path.join(folder, "__init__.py")  # noqa: PTH118
            if folder
            else os.path.join(self.package, *leaf[:-1], f"{leaf[-1]}.py")  # noqa: PTH118
        )
        os.makedirs(os.path.dirname(origin), exist_ok=True)  # noqa: PTH103, PTH120
        with self.real_open(origin, "w") as f:  # its __file__ is a file, as pip installs it
            f.write("# wheelforge init's stand-in torch: its modules are in sys.modules\n")
        spec = importlib.machinery.ModuleSpec(name, self.loader, origin=origin, is_package=package)
        if folder:
            assert spec.submodule_search_locations is not None
            spec.submodule_search_locations.append(folder)
        spec.has_location = True
        module = importlib.util.module_from_spec(spec)
        for key, value in names.items():
            setattr(module, key, value)

        def lacks(attr: str) -> Any:
            if attr.startswith("__"):  # the import system asks (__path__, __wrapped__)
                raise AttributeError(attr)
            self.missing(f"{name}.{attr}")
            raise AttributeError(f"wheelforge init's stand-in torch has no {name}.{attr}")

        setattr(module, "__getattr__", lacks)  # noqa: B010 - a module's __getattr__ (PEP 562)
        sys.modules[name] = module
        if "." in name:
            parent, _, child = name.rpartition(".")
            setattr(sys.modules[parent], child, module)
        return module

    def write_dist_info(self, release: str) -> str:
        """``torch-<release>.dist-info`` beside the package folder, as pip installs it; its
        path."""
        dist_info = os.path.join(self.folder, f"torch-{release}.dist-info")  # noqa: PTH118
        os.makedirs(dist_info, exist_ok=True)  # noqa: PTH103
        files = {
            "METADATA": (
                f"Metadata-Version: 2.1\nName: torch\nVersion: {release}\n"
                "Summary: wheelforge init's stand-in torch (the build Python has none)\n"
            ),
            "INSTALLER": "wheelforge-init\n",
            "top_level.txt": "torch\n",
            "RECORD": "",
        }
        for name, text in files.items():
            with self.real_open(os.path.join(dist_info, name), "w") as f:  # noqa: PTH118
                f.write(text)
        return dist_info

    def cpp_extension(self, cuda_home: str | None) -> dict[str, Any]:
        """The names of torch.utils.cpp_extension a setup.py reads before anything is built."""
        build_ext: Any = importlib.import_module("setuptools.command.build_ext").build_ext
        real_open = self.real_open

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

        def verify_ninja_availability() -> None:
            if shutil.which("ninja") is None:
                raise RuntimeError("Ninja is required to load C++ extensions")

        return {
            "BuildExtension": BuildExtension,
            "CUDA_HOME": cuda_home,
            "CUDNN_HOME": os.environ.get("CUDNN_HOME") or os.environ.get("CUDNN_PATH"),
            "ROCM_HOME": None,
            "HIP_HOME": None,
            "SYCL_HOME": None,
            "IS_HIP_EXTENSION": False,
            "IS_WINDOWS": False,
            "IS_MACOS": False,
            "TORCH_LIB_PATH": os.path.join(self.package, "lib"),  # noqa: PTH118
            "_TORCH_PATH": self.package,
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
            "is_ninja_available": lambda: shutil.which("ninja") is not None,
            "verify_ninja_availability": verify_ninja_availability,
            "_is_cuda_file": lambda p: os.path.splitext(p)[1] in (".cu", ".cuh"),  # noqa: PTH122
            "_join_cuda_home": join_cuda_home,
            "_join_rocm_home": join_cuda_home,
            "_maybe_write": maybe_write,
            "_write_ninja_file": lambda *a, **k: None,
        }

    def install(self, version: str, cuda_version: str | None, cuda_home: str | None) -> Any:
        """torch, its submodules and distribution in place; its torch.utils.cpp_extension."""
        release = version.partition("+")[0]
        dist_info = self.write_dist_info(release)
        shown = TorchVersion(version)
        self.module("torch", __version__=shown)
        self.module(
            "torch.version",
            __version__=shown,
            cuda=cuda_version,
            hip=None,
            xpu=None,
            debug=False,
            git_version="",
        )
        self.module(
            "torch.cuda",
            is_available=lambda: False,
            is_initialized=lambda: False,
            device_count=lambda: 0,
            get_arch_list=lambda: [],
            _is_compiled=lambda: cuda_version is not None,
            current_device=_no_gpu,
            get_device_capability=_no_gpu,
            get_device_properties=_no_gpu,
            get_device_name=_no_gpu,
        )
        self.module("torch._C", _GLIBCXX_USE_CXX11_ABI=True)
        self.module(
            "torch.__config__",
            parallel_info=lambda: "ATen parallel backend: OpenMP\n",
            show=lambda: "",
        )
        self.module("torch.backends")
        self.module("torch.utils")
        ext = self.module("torch.utils.cpp_extension", **self.cpp_extension(cuda_home))
        sys.meta_path.insert(0, _Finder(dist_info, self.missing))
        # pkg_resources reads sys.path once, when imported: the folder on it for a later
        # import, added to its working set when setuptools imported it already.
        sys.path.append(self.folder)
        pkg_resources = sys.modules.get("pkg_resources")
        if pkg_resources is not None:
            pkg_resources.working_set.add_entry(self.folder)
        return ext


def _no_gpu(*args: object, **kwargs: object) -> Any:
    raise RuntimeError("Found no NVIDIA driver on your system (wheelforge init's stand-in torch)")


def install(
    context: dict[str, Any],
    record: dict[str, Any],
    real_open: Callable[..., Any],
    cuda_label: str,
    where: Callable[[], str] = lambda: "",
) -> types.ModuleType:
    """The stand-in torch in sys.modules, its files in the context's scratch folder; its
    torch.utils.cpp_extension."""
    version = f"{context['torch_version']}+{cuda_label or 'cpu'}"
    folder = os.path.join(context["tmp"], "wheelforge-stand-in-torch")  # noqa: PTH118
    ext: types.ModuleType = StandIn(folder, record, where, real_open).install(
        version, context.get("cuda_version"), context.get("cuda_home")
    )
    record["torch"] = {
        "version": version,
        "real": False,
        "cuda": context.get("cuda_version"),
        "forced": bool(context.get("stand_in")),  # the stand-in though the Python has torch
    }
    return ext
