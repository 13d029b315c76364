"""Reading a project's setup.py statically (the ``ast`` module; it is never executed) for its
``CUDAExtension``/``CppExtension`` calls and ``setup()`` arguments, for ``wheelforge init``.

Only what can be known without running code is translated: literals, names bound to literals,
``this_dir``-style paths, ``os.path.join``/``Path / "x"``, ``glob.glob`` patterns, list
concatenation. Everything else becomes a note that says what needs a hand."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

from wheelforge.foundation import readers
from wheelforge.foundation.errors import ConfigError

EXTENSION_CALLS = ("CUDAExtension", "CppExtension")
# Flags wheelforge sets from the matrix (arch sets, threads): dropped from nvcc's list, noted.
_ARCH_FLAGS = ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code")
_IDENTITY_CALLS = {"abspath", "realpath", "Path", "str", "normpath", "fspath"}
# setup() arguments matrix.yaml has no key for: they belong in pyproject.toml [project].
_PYPROJECT_ONLY = ("long_description",)
_SETUP_ARGS = (
    "name",
    "version",
    "description",
    "install_requires",
    "python_requires",
    "license",
    "author",
    "author_email",
    "maintainer",
    "maintainer_email",
    "url",
    "download_url",
    "project_urls",
    "classifiers",
    "keywords",
    "py_modules",
)


class Untranslatable(Exception):
    """An expression that can't be known without running setup.py."""


class _Here(str):
    """A path relative to setup.py's folder (``os.path.dirname(__file__)`` and friends)."""

    __slots__ = ()


@dataclass
class ExtensionCall:
    kind: str  # CUDAExtension or CppExtension
    line: int
    name: str | None = None
    sources: list[str] = field(default_factory=list)
    include_dirs: list[str] = field(default_factory=list)
    cxx_flags: list[str] = field(default_factory=list)
    nvcc_flags: list[str] = field(default_factory=list)
    link_flags: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    library_dirs: list[str] = field(default_factory=list)
    py_limited_api: bool | None = None


@dataclass
class SetupScan:
    extensions: list[ExtensionCall] = field(default_factory=list)
    setup_args: dict[str, object] = field(default_factory=dict)  # name, version, ... if known
    notes: list[str] = field(default_factory=list)  # what could not be translated


class _Evaluator:
    def __init__(self, tree: ast.Module, notes: list[str]) -> None:
        self.notes = notes
        self.bindings: dict[str, list[tuple[ast.expr, bool]]] = {}
        # Names changed in place (cc_flag.append(...)): those changes are not followed.
        self.mutated = {
            n.func.value.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("append", "extend", "insert", "update")
            and isinstance(n.func.value, ast.Name)
        }
        self._bind(tree.body, hip=False)

    def _bind(self, body: list[ast.stmt], *, hip: bool) -> None:
        """Name → assigned values, in order, marking those only a ROCm/HIP build takes."""
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    self.bindings.setdefault(target.id, []).append((stmt.value, hip))
            elif isinstance(stmt, ast.If):
                test = ast.unparse(stmt.test).lower()
                about_hip = "hip" in test or "rocm" in test
                self._bind(stmt.body, hip=hip or about_hip)
                self._bind(stmt.orelse, hip=hip)
            elif isinstance(stmt, ast.For | ast.While | ast.With | ast.Try):
                for part in ("body", "orelse", "finalbody"):
                    self._bind(getattr(stmt, part, []) or [], hip=hip)

    def name(self, node: ast.Name) -> object:
        if node.id == "__file__":
            return _Here("setup.py")
        values = self.bindings.get(node.id, [])
        chosen = [v for v, hip in values if not hip] or [v for v, _ in values]
        if not chosen:
            raise Untranslatable(f"'{node.id}' is not assigned in setup.py")
        if node.id in self.mutated:
            self.notes.append(
                f"'{node.id}' is changed in place (.append/.extend) in setup.py; those changes "
                "were not followed"
            )
            self.mutated.discard(node.id)
        if len(chosen) > 1:
            self.notes.append(
                f"'{node.id}' is assigned {len(chosen)} times; used the first (line "
                f"{chosen[0].lineno})"
            )
        return self.value(chosen[0])

    def value(self, node: ast.expr) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return [self.value(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            return {
                self.value(k): self.value(v)
                for k, v in zip(node.keys, node.values, strict=True)
                if k
            }
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.JoinedStr):
            return "".join(
                str(self.value(v.value)) if isinstance(v, ast.FormattedValue) else str(v.value)
                for v in node.values
                if isinstance(v, ast.FormattedValue | ast.Constant)
            )
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.Attribute) and node.attr == "parent":
            return _parent(self.value(node.value))
        if isinstance(node, ast.Call):
            return self.call(node)
        raise Untranslatable(_shown(node))

    def binop(self, node: ast.BinOp) -> object:
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.Div) and isinstance(left, str) and isinstance(right, str):
            return _join(left, right)
        if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
            return left + right
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            return _Here(left + right) if isinstance(left, _Here) else left + right
        raise Untranslatable(_shown(node))

    def call(self, node: ast.Call) -> object:
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if fname in _IDENTITY_CALLS and len(node.args) == 1:
            return self.value(node.args[0])
        if fname in ("resolve", "absolute") and isinstance(func, ast.Attribute) and not node.args:
            return self.value(func.value)
        if fname == "dirname" and node.args:
            return _parent(self.value(node.args[0]))
        if fname == "join" and node.args:
            parts = [self.value(a) for a in node.args]
            if all(isinstance(p, str) for p in parts):
                out = str(parts[0])
                for p in parts[1:]:
                    out = _join(out, str(p))
                return out
        if fname in ("glob", "iglob") and node.args:
            pattern = self.value(node.args[0])
            if isinstance(pattern, str):
                return [pattern]  # matrix.yaml takes the glob itself
        # An unknown helper wrapping one list (append_nvcc_threads([...])): keep the list.
        if len(node.args) == 1 and not node.keywords:
            inner = self.value(node.args[0])
            if isinstance(inner, list):
                self.notes.append(
                    f"{_shown(func)}(...) at line {node.lineno} was not run; used its list "
                    "argument as is"
                )
                return inner
        raise Untranslatable(_shown(node))


# How much of an expression a note shows: a 400 kB literal is named, not printed.
_SHOWN_CHARS = 80


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _shown(node: ast.AST) -> str:
    """An expression of setup.py as a note shows it: its source, cut to _SHOWN_CHARS."""
    try:
        return _short(ast.unparse(node))
    except RecursionError:
        return f"<an expression nested too deeply, line {getattr(node, 'lineno', '?')}>"


def _parent(value: object) -> str:
    if not isinstance(value, str):
        raise Untranslatable(f"the parent of {_short(repr(value))}")
    parent = os.path.dirname(value)  # noqa: PTH120 - a relative string, not a Path on disk
    return _Here(parent or ".") if isinstance(value, _Here) else parent


def _join(left: str, right: str) -> str:
    joined = os.path.normpath(os.path.join(left, right))  # noqa: PTH118 - see _parent
    return _Here(joined) if isinstance(left, _Here) else joined


def _strings(value: object, what: str, notes: list[str]) -> list[str]:
    if isinstance(value, int | float):  # extra_compile_args=42: as setuprecord refuses it
        raise ConfigError(
            f"{what} is {value!r}, where setuptools takes a list of strings; fix setup.py and "
            "run init again"
        )
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, str | int | float):
            out.append(str(item))
        else:
            notes.append(f"{what}: {_short(repr(item))} is not a string; left out")
    return out


def _arg(call: ast.Call, key: str, position: int | None = None) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == key:
            return kw.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def _paths(value: object, what: str, notes: list[str]) -> list[str]:
    out = []
    for item in _strings(value, what, notes):
        if os.path.isabs(item):  # noqa: PTH117 - a string from setup.py
            notes.append(f"{what}: '{item}' is an absolute path; make it relative to the project")
            continue
        out.append(os.path.normpath(item))
    return out


def _without_arch_flags(flags: list[str], notes: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    dropped = []
    for flag in flags:
        if skip:
            skip = False
            dropped.append(flag)
            continue
        if flag in _ARCH_FLAGS:
            skip = True
            dropped.append(flag)
        elif flag.startswith(tuple(f + "=" for f in _ARCH_FLAGS)) or flag.startswith("arch="):
            dropped.append(flag)
        else:
            out.append(flag)
    if dropped:
        notes.append(
            f"nvcc arch flags ({' '.join(dropped[:4])}{' ...' if len(dropped) > 4 else ''}) left out: "
            "archs come from arch-sets, --archs or TORCH_CUDA_ARCH_LIST"
        )
    return out


def _extension(call: ast.Call, kind: str, ev: _Evaluator, notes: list[str]) -> ExtensionCall:
    ext = ExtensionCall(kind=kind, line=call.lineno)
    where = f"{kind} at setup.py:{call.lineno}"

    def get(key: str, position: int | None = None) -> object:
        node = _arg(call, key, position)
        if node is None:
            return None
        try:
            return ev.value(node)
        except Untranslatable as exc:
            notes.append(
                f"{where}: {key}={_shown(node)} needs a hand ({exc} is computed when setup.py runs)"
            )
            return None

    name = get("name", 0)
    ext.name = name if isinstance(name, str) else None
    ext.sources = _paths(get("sources", 1) or [], f"{where}: sources", notes)
    ext.include_dirs = _paths(get("include_dirs") or [], f"{where}: include_dirs", notes)
    ext.library_dirs = _paths(get("library_dirs") or [], f"{where}: library_dirs", notes)
    ext.libraries = _strings(get("libraries") or [], f"{where}: libraries", notes)
    ext.link_flags = _strings(get("extra_link_args") or [], f"{where}: extra_link_args", notes)
    macros = get("define_macros") or []
    defines = []
    for macro in macros if isinstance(macros, list) else []:
        if isinstance(macro, list) and len(macro) == 2:
            defines.append(f"-D{macro[0]}" + (f"={macro[1]}" if macro[1] is not None else ""))
    compile_args = get("extra_compile_args")
    if isinstance(compile_args, dict):
        ext.cxx_flags = _strings(compile_args.get("cxx", []), f"{where}: cxx", notes)
        nvcc = _strings(compile_args.get("nvcc", []), f"{where}: nvcc", notes)
        ext.nvcc_flags = _without_arch_flags(nvcc, notes)
    elif compile_args is not None:
        ext.cxx_flags = _strings(compile_args, f"{where}: extra_compile_args", notes)
    ext.cxx_flags = defines + ext.cxx_flags
    ext.nvcc_flags = (defines + ext.nvcc_flags) if kind == "CUDAExtension" else []
    limited = get("py_limited_api")
    ext.py_limited_api = limited if isinstance(limited, bool) else None
    return ext


def _setup_args(call: ast.Call, ev: _Evaluator, notes: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for kw in call.keywords:
        if kw.arg in _PYPROJECT_ONLY:
            notes.append(
                f"setup({kw.arg}=...): matrix.yaml has no key for it; give it in pyproject.toml"
                " [project]"
            )
            continue
        if kw.arg not in _SETUP_ARGS:
            continue
        try:
            out[kw.arg] = ev.value(kw.value)
        except Untranslatable:
            notes.append(f"setup({kw.arg}={_shown(kw.value)}) is computed when setup.py runs")
    return out


_FIX = "init reads it without running it; fix it, or write matrix.yaml from docs/your-extension.md"


def scan_setup_py(path: Path) -> SetupScan:
    """The extensions and setup() arguments of *path*, read without running it (within
    readers.CONFIG_CAP, UTF-8); a file Python cannot parse is one ConfigError naming it."""
    tree, fix = parse_setup_py(path), _FIX
    try:
        return _scan(tree)
    except RecursionError:
        raise ConfigError(f"{path}: its expressions are nested too deeply to read; {fix}") from None


def parse_setup_py(path: Path, *, fix: str = _FIX) -> ast.Module:
    """*path* parsed (within readers.CONFIG_CAP, UTF-8): a file Python cannot parse, and so
    cannot run either, is one ConfigError naming it and its line (*fix*: what to do)."""
    text = readers.read_text(path, cap=readers.CONFIG_CAP)
    try:
        return ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
        raise ConfigError(f"{where}: not valid Python ({_short(str(exc.msg))}); {fix}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes; nesting too deep
        raise ConfigError(
            f"{path}: cannot be parsed as Python ({_short(str(exc)) or type(exc).__name__}); {fix}"
        ) from None


def _scan(tree: ast.Module) -> SetupScan:
    scan = SetupScan()
    ev = _Evaluator(tree, scan.notes)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fname = (
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        )
        if fname in EXTENSION_CALLS:
            scan.extensions.append(_extension(node, fname, ev, scan.notes))
        elif fname == "setup":
            scan.setup_args = _setup_args(node, ev, scan.notes)
    scan.extensions.sort(key=lambda e: e.line)
    return scan
