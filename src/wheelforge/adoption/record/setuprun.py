"""What init's setup.py capture found, as one typed record (SetupRun): the child's JSON document
(child/setup_child.py writes it) is read into it by record/childdocument.py, once and nowhere
else; the static reading of setup.py (doors/staticsetup.py) gives the same record through the
same constructors (:meth:`ExtensionArgs.given`, :meth:`SetupArgs.given`), so
doors/setuprecord.py reads one shape whichever way setup.py was read.

Two kinds of wrong are told apart. What the child itself writes (its lists of refusals, files
written, generators, the torch it saw, its error) has one shape; a document that breaks it (a
wheelforge bug, or a setup.py that reached into the child's record) is a :class:`ToolError`
naming the field. What setup.py gave ``setup()`` and its Extension classes is the project's
own: an argument of a type setuptools cannot use (``extra_compile_args=42``) is a
:class:`ConfigError` naming it and its extension, with the fix; a value only shown back to the
user (``entry_points``, ``extra_objects``) is kept as given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

from wheelforge.foundation.errors import ConfigError, ToolError

# A JSON value as json.loads gives it (or a literal the static reading evaluated).
Json = None | bool | int | float | str | list["Json"] | dict[str, "Json"] | tuple["Json", ...]

_FIX = "fix setup.py and run init again"


class MalformedRecord(ToolError):
    """The child's document breaks its own shape."""


# -- what setup.py gave setup() and its Extension classes -------------------------------------------


def _strings(value: object) -> tuple[str, ...]:
    """A list of strings as setuptools reads one: a string is one; numbers are their text;
    anything else in the list is left out."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple | dict):
        raise TypeError(value)
    return tuple(str(v) for v in value if isinstance(v, str | int | float))


def _lenient(value: object) -> tuple[str, ...]:
    """_strings, with a value it cannot read as nothing (an extra's or a package's globs)."""
    try:
        return _strings(value)
    except TypeError:
        return ()


def json_value(value: object) -> Json:
    """A value kept as setup.py gave it (JSON from the child, a literal from the static reading)."""
    return cast("Json", value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _not_strings(value: object) -> bool:
    return value is not None and not isinstance(value, str | list | tuple)


# Extension arguments setuptools takes as lists of strings (a string is read as one), and the
# one it also takes as a dict of such lists by compiler (torch's BuildExtension: cxx, nvcc).
_LIST_FIELDS = (
    "sources",
    "include_dirs",
    "undef_macros",
    "library_dirs",
    "libraries",
    "runtime_library_dirs",
    "extra_objects",
    "extra_link_args",
    "depends",
)


def _refuse_shapes(label: str, given: Mapping[str, object]) -> None:
    """An Extension argument of a type setuptools cannot use (``extra_compile_args=42``), named
    with its extension and where the script made it."""
    args = given.get("extra_compile_args")
    bad = [(key, given.get(key)) for key in _LIST_FIELDS if _not_strings(given.get(key))]
    macros = given.get("define_macros")
    if isinstance(macros, str) or _not_strings(macros):
        bad.append(("define_macros", macros))
    if isinstance(args, dict) and "repr" not in args:
        bad += [(f"extra_compile_args['{k}']", v) for k, v in args.items() if _not_strings(v)]
    elif _not_strings(args):
        bad.append(("extra_compile_args", args))
    for key, value in bad[:1]:
        shown = value["repr"] if isinstance(value, dict) and "repr" in value else repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        also = (
            " or a dict of them by compiler ('cxx', 'nvcc')" if key == "extra_compile_args" else ""
        )
        raise ConfigError(
            f"{label}: {key} is {shown}, where setuptools takes a list of strings{also}; {_FIX}"
        )


@dataclass(frozen=True, kw_only=True)
class ExtensionArgs:
    """One Extension (CUDAExtension, CppExtension) as setup.py made it."""

    name: str | None
    kind: str = "Extension"
    where: str = "setup.py"  # setup.py:412
    sources: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    define_macros: tuple[tuple[str, str | None], ...] = ()  # (name, value or None)
    undef_macros: tuple[str, ...] = ()
    cxx_args: tuple[str, ...] = ()  # extra_compile_args for the C++ compiler
    nvcc_args: tuple[str, ...] = ()  # ... and for nvcc (a plain list: both)
    libraries: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    extra_link_args: tuple[str, ...] = ()
    # Link inputs wheelforge does not take, kept as given for the note that names them.
    extra_objects: Json = None
    runtime_library_dirs: Json = None
    dlink: bool = False  # torch's dlink=True: a device-link step

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name} ({self.where})"

    @classmethod
    def given(cls, args: Mapping[str, object]) -> ExtensionArgs:
        """The Extension's arguments as setup.py passed them (the child's description, or the
        static reading's); ConfigError for one setuptools could not use."""
        name = args.get("name")
        if name is not None and not isinstance(name, str):
            raise MalformedRecord(f"an extension's name is {name!r}, where a string belongs")
        kind = _text(args.get("kind")) or "Extension"
        where = _text(args.get("where")) or "setup.py"
        made = cls(name=name, kind=kind, where=where)
        _refuse_shapes(made.label, args)
        compile_args = args.get("extra_compile_args") or []
        if isinstance(compile_args, dict):
            cxx, nvcc = _strings(compile_args.get("cxx")), _strings(compile_args.get("nvcc"))
        else:
            cxx = nvcc = _strings(compile_args)
        macros = args.get("define_macros") or []
        assert isinstance(macros, list | tuple)  # _refuse_shapes let only lists through
        return cls(
            name=name,
            kind=kind,
            where=where,
            sources=_strings(args.get("sources")),
            include_dirs=_strings(args.get("include_dirs")),
            define_macros=tuple(
                (str(m[0]), str(m[1]) if len(m) > 1 and m[1] is not None else None)
                for m in macros
                if isinstance(m, list | tuple) and m
            ),
            undef_macros=_strings(args.get("undef_macros")),
            cxx_args=cxx,
            nvcc_args=nvcc,
            libraries=_strings(args.get("libraries")),
            library_dirs=_strings(args.get("library_dirs")),
            extra_link_args=_strings(args.get("extra_link_args")),
            extra_objects=json_value(args.get("extra_objects")),
            runtime_library_dirs=json_value(args.get("runtime_library_dirs")),
            dlink=bool(args.get("dlink")),
        )


@dataclass(frozen=True, kw_only=True)
class SetupArgs:
    """What setup.py gave ``setup()`` (its last call), the keys init reads."""

    name: str | None = None
    version: str | None = None  # a number given is its text
    description: str | None = None
    license: str | None = None
    python_requires: str | None = None
    install_requires: tuple[str, ...] = ()
    author: str | None = None
    author_email: str | None = None
    maintainer: str | None = None
    maintainer_email: str | None = None
    url: str | None = None
    download_url: str | None = None
    project_urls: tuple[tuple[str, str], ...] = ()
    classifiers: tuple[str, ...] = ()
    keywords: str | tuple[str, ...] = ()  # a string is split on commas by setuptools
    extras_require: tuple[tuple[str, tuple[str, ...]], ...] = ()
    long_description_sha256: str | None = None  # the child's digest of long_description
    long_description_content_type: str | None = None
    packages: tuple[str, ...] = ()
    package_dir: tuple[tuple[str, str], ...] = ()
    py_modules: tuple[str, ...] = ()
    package_data: tuple[tuple[str, tuple[str, ...]], ...] = ()
    include_package_data: bool = False
    # setup() arguments matrix.yaml has no key for, kept as given for the note that names them.
    entry_points: Json = None
    scripts: Json = None
    data_files: Json = None

    @classmethod
    def given(cls, args: Mapping[str, object]) -> SetupArgs:
        def strings(key: str) -> tuple[str, ...]:
            try:
                return _strings(args.get(key))
            except TypeError:
                raise ConfigError(
                    f"setup({key}={args.get(key)!r}): setuptools takes a list of strings; {_FIX}"
                ) from None

        def mapping(key: str) -> Mapping[object, object]:
            value = args.get(key) or {}
            if not isinstance(value, dict):
                raise ConfigError(f"setup({key}={value!r}): setuptools takes a dict here; {_FIX}")
            return value

        version = args.get("version")
        urls, extras = args.get("project_urls") or {}, args.get("extras_require") or {}
        keywords = args.get("keywords")
        return cls(
            name=_text(args.get("name")),
            version=str(version) if isinstance(version, str | int | float) else None,
            description=_text(args.get("description")),
            license=_text(args.get("license")),
            python_requires=_text(args.get("python_requires")),
            install_requires=strings("install_requires"),
            author=_text(args.get("author")),
            author_email=_text(args.get("author_email")),
            maintainer=_text(args.get("maintainer")),
            maintainer_email=_text(args.get("maintainer_email")),
            url=_text(args.get("url")),
            download_url=_text(args.get("download_url")),
            project_urls=tuple((str(k), str(v)) for k, v in urls.items())
            if isinstance(urls, dict)
            else (),
            classifiers=strings("classifiers"),
            keywords=keywords if isinstance(keywords, str) else strings("keywords"),
            extras_require=tuple((str(k), _lenient(v)) for k, v in extras.items())
            if isinstance(extras, dict)
            else (),
            long_description_sha256=_text(args.get("long_description_sha256")),
            long_description_content_type=_text(args.get("long_description_content_type")),
            packages=strings("packages"),
            package_dir=tuple((str(k), str(v)) for k, v in dirs.items())
            if isinstance(dirs := args.get("package_dir"), dict)
            else (),
            py_modules=strings("py_modules"),
            package_data=tuple((str(k), _lenient(v)) for k, v in mapping("package_data").items()),
            include_package_data=bool(args.get("include_package_data")),
            entry_points=json_value(args.get("entry_points")),
            scripts=json_value(args.get("scripts")),
            data_files=json_value(args.get("data_files")),
        )


# -- what the child recorded besides -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """A connection, a command or a write the child's guards refused."""

    detail: str  # the host, the command line, "write <path>"
    where: str  # setup.py:517, or ""


@dataclass(frozen=True, kw_only=True)
class Command:
    """A cmdclass entry: its class, what the project's own classes override, their source."""

    name: str
    class_name: str
    base: str = ""
    overrides: tuple[str, ...] = ()
    where: str = ""
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class Entry:
    """The call into a project module that wrote a file: ``gen.kernels.main("out")``."""

    module: str | None = None
    function: str | None = None
    args: tuple[Json, ...] = ()  # strings, numbers, None; {"type": ...} for an object


@dataclass(frozen=True, kw_only=True)
class Written:
    """A file written during the run, and which project module wrote it."""

    path: str
    by: str | None = None  # relative to the project: setup.py, gen/kernels.py
    entry: Entry = field(default_factory=Entry)


@dataclass(frozen=True, kw_only=True)
class GeneratorRun:
    """A project script setup.py ran as a command (``python gen.py -o out``), run in the child."""

    script: str
    argv: tuple[str, ...] = ()
    cwd: str | None = None
    where: str = ""
    exit: int | None = None


@dataclass(frozen=True, kw_only=True)
class BuildExtOptions:
    """``BuildExtension.with_options(**options)``: what the project hands its build_ext."""

    class_name: str
    where: str = ""
    options: tuple[tuple[str, Json], ...] = ()


@dataclass(frozen=True, kw_only=True)
class TorchSeen:
    version: str
    real: bool  # the build Python's torch (False: the stand-in)
    cuda: str | None = None
    shown_as: str | None = None  # a CPU build shown as this CUDA build
    forced: bool = False  # the stand-in though the build Python has torch (--stand-in)


@dataclass(frozen=True, kw_only=True)
class StandInMiss:
    """A name setup.py asked of the stand-in torch that it lacks, and the line that asked."""

    name: str  # torch.utils.cpp_extension.ROCM_HOME, "import torch.nn"
    where: str = ""  # setup.py:12, or "" where no line of the project's was on the stack


@dataclass(frozen=True, kw_only=True)
class SetupFailure:
    """setup.py's own exception, or its sys.exit with a non-zero code."""

    type: str | None = None
    message: str = ""
    where: str = ""  # setup.py:12
    traceback: str = ""
    cause: SetupFailure | None = None  # what it was raised from (type and message)


@dataclass(frozen=True, kw_only=True)
class SetupRun:
    """What setup.py gave ``setup()`` and its extensions, and what its run did."""

    setup: SetupArgs | None  # None: setup() was never called
    extensions: tuple[ExtensionArgs, ...] = ()
    cmdclass: tuple[Command, ...] = ()
    network: tuple[Attempt, ...] = ()
    refused: tuple[Attempt, ...] = ()
    writes: tuple[str, ...] = ()  # files setup.py wrote, relative to the project
    written: tuple[Written, ...] = ()
    generators: tuple[GeneratorRun, ...] = ()
    stub_missing: tuple[StandInMiss, ...] = ()
    torch: TorchSeen | None = None
    torch_error: str | None = None  # why the build Python's torch did not import
    torch_nvcc_flags: tuple[str, ...] = ()  # what BuildExtension puts before nvcc's flags
    ninja: tuple[tuple[str, str], ...] = ()  # an extension's name -> its replaced writer's file
    ninja_replaced_at: str | None = None
    build_ext_options: tuple[BuildExtOptions, ...] = ()
    package_files: tuple[str, ...] | None = None  # setuptools' own build_py's list
    package_files_error: str | None = None
    error: SetupFailure | None = None
    # What the parent knows of the run: the folders, the interpreter, what it printed.
    root: str | None = None
    setup_file: str = "setup.py"
    python: str | None = None
    output: str = ""
    stderr: str = ""
