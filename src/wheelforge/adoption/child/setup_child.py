"""The child process of init's setup.py capture: runs a project's setup.py as pip would (in the
project's folder, ``__name__ == "__main__"``, ``sys.argv = [setup.py, bdist_wheel]``, the user's
environment), with ``setuptools.setup``, torch's ``CUDAExtension``/``CppExtension`` and
setuptools' ``Extension`` recording what they are given instead of building anything.

It never compiles and never downloads: the network is closed (socket connections and name
lookups fail, and are recorded), a command other than a read-only query (``nvcc -V``,
``git rev-parse``, ``nvidia-smi``) is refused and recorded (``git submodule update``,
``pip download``, ``cmake --build``), and a file may be written only inside the project folder
or the temporary folder (FlashAttention-3 writes its flash_attn_config.py, as under pip).

torch: the build Python's, when it imports. A CPU build of torch is shown to setup.py as the
CUDA build wheelforge compiles against (``torch.version.cuda``, the ``+cuXYZ`` label,
``CUDA_HOME``: the toolkit the parent found), since that is what the wheel is built with; the
GPU stays as it is (none here: ``torch.cuda.is_available()`` is false). Without torch, a
stand-in ``torch`` package (capture_standin.py) answers what setup.py files ask at that stage
as an installed torch would (its module spec, its distribution's metadata, version, CUDA home,
``torch.utils.cpp_extension``'s names) and records any name it lacks.

Run by setupcapture.py as ``python setup_child.py CONTEXT.json``; it writes its findings as JSON
to the file the context names. It imports nothing from wheelforge: the build Python may not
have it, and it must run under any CPython from 3.10.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import reprlib
import runpy
import sys
import tempfile
import traceback
import types
from collections.abc import Callable
from typing import Any

RECORD: dict[str, Any] = {
    "setup_calls": [],
    "extensions": [],
    "cmdclass": [],
    "network": [],
    "refused": [],
    "writes": [],
    "written": [],
    "generators": [],
    "stub_missing": [],
    "torch": None,
    "ninja": {},
    "build_ext_options": [],
    "error": None,
}
_CONTEXT: dict[str, Any] = {}
_LIVE: dict[str, Any] = {}  # setup()'s extensions and cmdclass as given (_drive_build_ext)
_REAL_OPEN = builtins.open
_THIS = os.path.abspath(__file__)  # noqa: PTH100 - plain os calls: this file runs in any Python


def _sibling(name: str) -> Any:
    """A module of this folder, loaded by its path under a name no project uses (the folder is
    not on sys.path: setup.py must not import it by chance)."""
    path = os.path.join(os.path.dirname(_THIS), f"{name}.py")  # noqa: PTH118, PTH120
    spec = importlib.util.spec_from_file_location(f"_wheelforge_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _in_root(path: str) -> bool:
    root = _CONTEXT["root"]
    return path == root or path.startswith(root + os.sep)


def _where() -> str:
    """``setup.py:123``: the innermost frame of the project's own code."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith("<"):  # <frozen runpy>, <string>: no file of the project
            continue
        name = os.path.abspath(frame.filename)  # noqa: PTH100
        if name != _THIS and _in_root(name) and "site-packages" not in name:
            return f"{os.path.relpath(name, _CONTEXT['root'])}:{frame.lineno}"
    return ""


def _where_in(tb: types.TracebackType | None) -> str:
    where = ""
    for frame in traceback.extract_tb(tb):
        if frame.filename.startswith("<"):  # <frozen runpy>, <string>: no file of the project
            continue
        name = os.path.abspath(frame.filename)  # noqa: PTH100
        if name != _THIS and _in_root(name) and "site-packages" not in name:
            where = f"{os.path.relpath(name, _CONTEXT['root'])}:{frame.lineno}"
    return where


# -- setuptools and torch -------------------------------------------------------------------------


def _repr(value: Any) -> str:
    """A value's repr cut to 200 characters; nesting past reprlib's levels is ``[...]``, so a
    list 100,000 deep is no RecursionError (issue 39)."""
    shown = reprlib.Repr()  # its keyword arguments are Python 3.12's
    shown.maxlevel, shown.maxstring, shown.maxother = 3, 200, 200
    try:
        return shown.repr(value)[:200]
    except Exception as exc:  # a project's __repr__ may raise anything
        return f"<{type(value).__name__}: repr raised {type(exc).__name__}>"


def _jsonable(value: Any, depth: int = 0) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if depth > 6:
        return {"repr": _repr(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_jsonable(v, depth + 1) for v in items]
    if isinstance(value, type):
        return {"class": value.__name__}
    return {"repr": _repr(value)}


def _extension_factory(kind: str) -> Callable[..., Any]:
    extension: Any = importlib.import_module("setuptools").Extension

    def factory(name: str, sources: Any, *args: Any, **kwargs: Any) -> Any:
        dlink = kwargs.pop("dlink", None)
        kwargs.pop("dlink_libraries", None)
        ext = extension(name, [os.fspath(s) for s in sources], *args, **kwargs)
        ext._wheelforge_kind = kind
        ext._wheelforge_where = _where()
        ext._wheelforge_dlink = bool(dlink)
        return ext

    factory.__name__ = kind
    return factory


_EXT_FIELDS = (
    "sources",
    "include_dirs",
    "define_macros",
    "undef_macros",
    "library_dirs",
    "libraries",
    "runtime_library_dirs",
    "extra_objects",
    "extra_compile_args",
    "extra_link_args",
    "depends",
    "language",
    "py_limited_api",
)


def _describe_extension(ext: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": getattr(ext, "name", None),
        "kind": getattr(ext, "_wheelforge_kind", type(ext).__name__),
        "where": getattr(ext, "_wheelforge_where", ""),
        "dlink": getattr(ext, "_wheelforge_dlink", False),
    }
    for key in _EXT_FIELDS:
        out[key] = _jsonable(getattr(ext, key, None))
    return out


def _source_file(obj: Any) -> str:
    try:
        path = inspect.getsourcefile(obj) or ""
        line = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return ""
    path = os.path.abspath(path)  # noqa: PTH100
    return f"{os.path.relpath(path, _CONTEXT['root'])}:{line}" if _in_root(path) else ""


def _describe_command(name: str, cls: Any) -> dict[str, Any]:
    """A cmdclass entry: its class, the base it comes from, and what the project's own classes
    in its MRO override (what would run at build time and init does not run)."""
    if not isinstance(cls, type):
        return {"name": name, "class": repr(cls)[:100], "overrides": [], "base": "", "where": ""}
    own = [k for k in cls.__mro__ if k.__module__ == "__main__"]
    overrides = sorted(
        {m for k in own for m, v in vars(k).items() if inspect.isfunction(v) and m != "__init__"}
    )
    texts = []
    for k in own:
        try:
            texts.append(inspect.getsource(k))
        except (OSError, TypeError):
            continue
    base = next((k.__name__ for k in cls.__mro__ if k.__module__ != "__main__"), "")
    return {
        "name": name,
        "class": own[0].__name__ if own else base,
        "base": base,
        "overrides": overrides,
        "where": _source_file(own[0]) if own else "",
        "source": "\n".join(texts)[:20000],
    }


def _record_setup(**attrs: Any) -> None:
    exts = attrs.pop("ext_modules", None) or []
    cmdclass = attrs.pop("cmdclass", None) or {}
    _LIVE.update(exts=list(exts), cmdclass=dict(cmdclass), name=attrs.get("name"))
    RECORD["extensions"] = [_describe_extension(e) for e in exts]
    RECORD["cmdclass"] = [_describe_command(n, c) for n, c in dict(cmdclass).items()]
    # The readme's text: maybe large; its digest finds the file it was read from (init).
    long_description = attrs.pop("long_description", None)
    if isinstance(long_description, str) and long_description.strip():
        digest = hashlib.sha256(long_description.strip().encode("utf-8", "replace"))
        attrs["long_description_sha256"] = digest.hexdigest()
    RECORD["setup_calls"].append({k: _jsonable(v) for k, v in attrs.items()})
    RECORD["setup_where"] = _where()


def _patch_setuptools() -> None:
    setuptools: Any = importlib.import_module("setuptools")
    setuptools.setup = _record_setup
    try:
        from distutils import core  # setuptools' own, once setuptools is imported
    except ImportError:  # pragma: no cover - a Python without distutils and an old setuptools
        return
    core.setup = _record_setup  # type: ignore[assignment]


def _cuda_label() -> str:
    version = _CONTEXT.get("cuda_version") or ""
    return "cu" + version.replace(".", "") if version else ""


def _record_options(build_ext: Any) -> None:
    """BuildExtension.with_options(**options): what the project hands its build_ext (xformers
    passes the files its build_ext writes into the package)."""
    real = build_ext.__dict__["with_options"].__func__

    def with_options(cls: type, /, **options: Any) -> Any:
        RECORD["build_ext_options"].append(
            {"class": cls.__name__, "where": _where(), "options": _jsonable(options)}
        )
        return real(cls, **options)

    build_ext.with_options = classmethod(with_options)


def _patch_cpp_extension(ext: Any) -> None:
    ext.CUDAExtension = _extension_factory("CUDAExtension")
    ext.CppExtension = _extension_factory("CppExtension")
    if "with_options" in vars(ext.BuildExtension):
        _record_options(ext.BuildExtension)
    # What torch's BuildExtension puts before every nvcc command (unix_cuda_flags).
    RECORD["torch_nvcc_flags"] = [str(f) for f in getattr(ext, "COMMON_NVCC_FLAGS", [])]
    if getattr(ext, "CUDA_HOME", None) is None and _CONTEXT.get("cuda_home"):
        ext.CUDA_HOME = _CONTEXT["cuda_home"]
    RECORD["ninja_writer"] = getattr(ext, "_write_ninja_file", None)


def _real_torch() -> bool:
    """The build Python's torch, shown to setup.py as a CUDA build (see the docstring)."""
    if importlib.util.find_spec("torch") is None:  # the spec only: nothing is imported
        return False
    try:
        torch: Any = importlib.import_module("torch")
        ext = importlib.import_module("torch.utils.cpp_extension")
    except Exception as exc:  # a broken torch: the stand-in answers instead
        RECORD["torch_error"] = f"{type(exc).__name__}: {exc}"
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[name]
        return False
    seen = str(torch.__version__)
    RECORD["torch"] = {"version": seen, "real": True, "cuda": torch.version.cuda}
    release, _, local = seen.partition("+")
    if torch.version.cuda is None and _CONTEXT.get("cuda_version"):
        torch.version.cuda = _CONTEXT["cuda_version"]
        if local in ("", "cpu"):
            torch.__version__ = type(torch.__version__)(f"{release}+{_cuda_label()}")
        RECORD["torch"]["shown_as"] = str(torch.__version__)
    _patch_cpp_extension(ext)
    return True


# -- the per-source rules of a replaced ninja writer ----------------------------------------------


def _ninja_of(writer: Callable[..., Any], ext: dict[str, Any], folder: str) -> str | None:
    """FlashAttention-3 replaces torch's ninja writer to give ``*_sm90.cu`` other -gencode
    flags than ``*_sm80.cu``: run the project's writer on the captured flags (it writes a
    text file, nothing more) so the parent reads each source's flags from its rule."""
    args = ext["extra_compile_args"]
    cxx = args.get("cxx", []) if isinstance(args, dict) else list(args or [])
    nvcc = args.get("nvcc", []) if isinstance(args, dict) else list(args or [])
    sources = [os.path.abspath(s) for s in ext["sources"]]  # noqa: PTH100
    given = {
        "path": os.path.join(folder, "build.ninja"),  # noqa: PTH118
        "cflags": [],
        "post_cflags": list(cxx),
        "cuda_cflags": [],
        "cuda_post_cflags": list(nvcc),
        "cuda_dlink_post_cflags": [],
        "sycl_cflags": [],
        "sycl_post_cflags": [],
        "sycl_dlink_post_cflags": [],
        "sources": sources,
        "objects": [os.path.join(folder, f"{i}.o") for i in range(len(sources))],  # noqa: PTH118
        "ldflags": [],
        "library_target": None,
        "with_cuda": True,
        "with_sycl": False,
    }
    params = inspect.signature(writer).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in given.items() if takes_any or k in params}
    writer(**kwargs)
    with _REAL_OPEN(str(given["path"])) as f:
        return f.read()


def _replaced_ninja(original: object) -> None:
    ext_mod = sys.modules.get("torch.utils.cpp_extension")
    writer = getattr(ext_mod, "_write_ninja_file", None)
    if writer is None or writer is original or not callable(writer):
        return
    RECORD["ninja_replaced_at"] = _source_file(writer)
    for ext in RECORD["extensions"]:
        if not any(str(s).endswith(".cu") for s in ext["sources"] or []):
            continue
        folder = tempfile.mkdtemp(prefix="wheelforge-init-", dir=_CONTEXT["tmp"])
        try:
            RECORD["ninja"][ext["name"]] = _ninja_of(writer, ext, folder)
        except Exception as exc:
            RECORD["ninja_error"] = f"{type(exc).__name__}: {exc}"


# -- running it -----------------------------------------------------------------------------------


def _run(setup: str) -> None:
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(_THIS):  # noqa: PTH100, PTH120
        del sys.path[0]  # this folder, which python put first: setup.py's comes instead
    os.chdir(os.path.dirname(setup))  # noqa: PTH120
    sys.path.insert(0, os.path.dirname(setup))  # noqa: PTH120
    sys.argv = [setup, "bdist_wheel"]
    try:
        runpy.run_path(setup, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            RECORD["error"] = {
                "type": "SystemExit",
                "message": str(exc.code),
                "where": _where_in(exc.__traceback__),
                "traceback": "",
            }
    except BaseException as exc:
        # What it was raised from (a RuntimeError of the project's own, raised while an
        # ImportError was handled): the parent tells a name the stand-in torch lacks by it.
        cause = exc.__cause__ or exc.__context__
        RECORD["error"] = {
            "type": type(exc).__name__,
            "message": str(exc)[:2000],
            "where": _where_in(exc.__traceback__),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[
                -6000:
            ],
            "cause": None
            if cause is None
            else {"type": type(cause).__name__, "message": str(cause)[:2000]},
        }


def _drive_build_ext() -> None:
    """Extensions setup.py gives no sources, built by its own build_ext another way (NATTEN's
    runs scripts/autogen_*.py, then ``cmake csrc/ -D...``): that build_extension run as pip's
    build would, under the guards, into a temporary build folder. The project scripts it runs
    run here and are recorded (generators); the cmake it starts is refused and recorded with
    its arguments, which init's CMake door configures with."""
    cls = _LIVE.get("cmdclass", {}).get("build_ext")
    bare = [e for e in _LIVE.get("exts", []) if not list(getattr(e, "sources", None) or [])]
    if not bare or not isinstance(cls, type):
        return
    if not any(k.__module__ == "__main__" and "build_extension" in vars(k) for k in cls.__mro__):
        return
    try:
        from setuptools.dist import Distribution  # type: ignore[import-untyped,unused-ignore]

        dist = Distribution({"name": _LIVE.get("name") or "project", "ext_modules": bare})
        dist.script_name = "setup.py"
        command = cls(dist)
        command.initialize_options()
        command.finalize_options()
        command.build_lib = command.build_temp = tempfile.mkdtemp(prefix="wheelforge-build-")
    except Exception as exc:
        RECORD["build_ext_error"] = f"{type(exc).__name__}: {exc}"[:500]
        return
    for ext in bare:
        try:
            command.build_extension(ext)
        except BaseException as exc:  # the refused cmake fails it: what it ran so far is recorded
            RECORD["build_ext_error"] = f"{type(exc).__name__}: {exc}"[:500]


def _package_files() -> None:
    """The package data setuptools' build_py would ship (capture_packagedata.py), with the
    unguarded file opener: its egg-info goes to a temporary folder and is no write of
    setup.py's."""
    import io

    guarded = builtins.open, io.open
    builtins.open = io.open = _REAL_OPEN
    try:
        exts = [types.SimpleNamespace(**e) for e in RECORD["extensions"]]
        packagedata = _sibling("capture_packagedata")
        call = RECORD["setup_calls"][-1]
        call.update(_jsonable(packagedata.configured_packages(call, _CONTEXT["root"])))
        RECORD["package_files"] = packagedata.data_files(call, exts, _CONTEXT["root"])
    except Exception as exc:  # setuptools refused the arguments: the static reading stands
        RECORD["package_files_error"] = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        builtins.open, io.open = guarded


def main(context_path: str) -> int:
    with _REAL_OPEN(context_path) as f:
        _CONTEXT.update(json.load(f))
    _CONTEXT["root"] = os.path.realpath(_CONTEXT["root"])
    try:
        _patch_setuptools()
    except ImportError as exc:  # a build Python without setuptools: pip would install it
        RECORD["error"] = {
            "type": type(exc).__name__,
            "message": str(exc),
            "where": "",
            "traceback": "",
        }
        with _REAL_OPEN(str(_CONTEXT["out"]), "w") as f:
            json.dump(RECORD, f, default=str)
        return 0
    if _CONTEXT.get("stand_in") or not _real_torch():
        standin = _sibling("capture_standin")
        _patch_cpp_extension(
            standin.install(_CONTEXT, RECORD, _REAL_OPEN, _cuda_label(), where=_where)
        )
    original = RECORD.pop("ninja_writer", None)
    guards = _sibling("capture_guards").Guards(RECORD, _CONTEXT["root"], _where, skip=(_THIS,))
    guards.install()
    if _CONTEXT.get("generator"):  # a generator init tries: run it alone, into a temp folder
        given = _CONTEXT["generator"]
        RECORD["generator_exit"] = guards.run_script(given["argv"], given["cwd"])
        with _REAL_OPEN(str(_CONTEXT["out"]), "w") as f:
            json.dump(RECORD, f, default=str)
        return 0
    _run(_CONTEXT["setup"])
    if RECORD["setup_calls"]:
        _drive_build_ext()
        _replaced_ninja(original)
        _package_files()
    with _REAL_OPEN(str(_CONTEXT["out"]), "w") as f:
        json.dump(RECORD, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
