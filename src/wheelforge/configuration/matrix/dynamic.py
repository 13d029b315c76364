"""The ``[project]`` fields pyproject.toml lists as ``dynamic``, taken from where the project's
own build backend takes them, so a wheel built by wheelforge carries what the project's own
wheel carries:

- ``[tool.setuptools.dynamic]``: ``attr:`` read statically (as setuptools first tries, without
  importing the package), ``file:``;
- setuptools-scm (``[tool.setuptools_scm]``, or setuptools-scm in ``build-system.requires``;
  hatch-vcs's ``source = "vcs"``; scikit-build-core's ``setuptools_scm`` provider): git tags, or
  its ``fallback_version``, by setuptools-scm itself;
- scikit-build-core's ``regex`` provider and hatch's ``path``: a version assignment in a file;
- setup.cfg's ``[metadata]`` and ``[options]`` (setuptools reads them for a dynamic field).

Under setuptools, setup()'s ``version=`` comes before setup.cfg's and setuptools-scm's (which
sets one only where none is set): a version setup.py gives, and a field none of these gives,
stays dynamic: matrix.yaml's package section gives it (``wheelforge init`` writes what setup.py
gave; vLLM's carries a ``+cu130`` suffix setuptools-scm's lacks).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wheelforge.foundation import readers
from wheelforge.foundation.errors import ConfigError

if TYPE_CHECKING:  # configparser and inspect load only for a project that needs them: a no-op
    import configparser  # build imports neither (tests/integration/test_build.py)

# scikit-build-core's default for its regex provider (scikit_build_core/metadata/regex.py) and
# hatch's for its regex version source (hatchling/version/source/regex.py): __version__ or
# VERSION assigned a string.
VERSION_ASSIGNMENT = r"""(?i)^(__version__|VERSION)(?: ?\: ?str)? *= *(['"])v?(?P<value>.+?)\2"""
HATCH_ASSIGNMENT = r"""(?i)^(__version__|VERSION) *= *(['"])v?(?P<version>.+?)\2"""

_SCM_REQUIREMENT = re.compile(r"^\s*setuptools[-_]scm\b", re.IGNORECASE)


@dataclass(frozen=True)
class Filled:
    """The ``[project]`` table with what the backend gives filled in, and where each came from."""

    project: dict[str, Any]
    sources: Mapping[str, str] = field(default_factory=dict)  # field → where it was read
    unresolved: tuple[str, ...] = ()  # dynamic fields nothing static gives (setup.py does)


def fill(data: Mapping[str, Any], path: Path) -> Filled:
    """*data* (pyproject.toml's tables)'s ``[project]`` with its dynamic fields filled."""
    project = dict(data.get("project") or {})
    dynamic = [str(d) for d in project.get("dynamic") or ()]
    if not dynamic:
        return Filled(project)
    tool = data.get("tool") or {}
    system = data.get("build-system") or {}
    requires = [str(r) for r in system.get("requires") or ()]
    root = path.parent
    cfg = _setup_cfg(root)
    # setup.py runs under setuptools' backend (pip's default where build-system names none)
    backend = str(system.get("build-backend") or "setuptools.build_meta")
    setuptools = backend.startswith("setuptools.build_meta")
    sources: dict[str, str] = {}
    for name in dynamic:
        if name == "version" and setuptools and _setup_py_version_first(tool, root):
            continue  # setup.py's setup() gives it (matrix.yaml keeps it)
        found = _field(name, tool, requires, root, path, cfg, setuptools=setuptools)
        if found is not None:
            value, where = found
            project[name] = value
            sources[name] = where
    left = [d for d in dynamic if d not in sources]
    if left:
        project["dynamic"] = left
    else:
        project.pop("dynamic", None)
    return Filled(project, sources, tuple(left))


def _field(  # noqa: PLR0917 - the one caller passes what it read
    name: str,
    tool: Mapping[str, Any],
    requires: list[str],
    root: Path,
    path: Path,
    cfg: configparser.ConfigParser | None,
    *,
    setuptools: bool = False,
) -> tuple[Any, str] | None:
    setuptools_dynamic = (tool.get("setuptools") or {}).get("dynamic") or {}
    if name in setuptools_dynamic:
        return _setuptools_dynamic(name, setuptools_dynamic[name], tool, root, path)
    # setup.cfg's literal (or file:) version comes before setuptools-scm's, which reads it and
    # sets none; an ``attr`` one counts as none (setuptools_scm/_integration/setup_cfg.py)
    if (
        name == "version"
        and setuptools
        and cfg is not None
        and "attr" not in cfg.get("metadata", "version", fallback="attr")
    ):
        return _from_setup_cfg(name, cfg, tool, root)
    if name == "version":
        found = _version_provider(tool, requires, root, path)
        if found is not None:
            return found
    if cfg is not None:
        return _from_setup_cfg(name, cfg, tool, root)
    return None


# -- the version under setuptools ----------------------------------------------------------------


def _setup_py_version_first(tool: Mapping[str, Any], root: Path) -> bool:
    """setuptools takes setup()'s ``version=``: [tool.setuptools.dynamic] gives none (it is
    applied after setup()'s keywords, over them), and setup.py passes one. setuptools-scm sets
    the version only where none is set (its infer_version hook reads setup()'s and setup.cfg's
    first: setuptools_scm/_integration/setuptools.py), and setuptools keeps setup()'s over
    setup.cfg's."""
    if "version" in ((tool.get("setuptools") or {}).get("dynamic") or {}):
        return False
    return _setup_py_gives_version(root / "setup.py")


def _setup_py_gives_version(path: Path) -> bool:
    """setup.py calls setup() with a ``version=`` (other than None), by its source: the keyword,
    or a ``**`` mapping of a dict display or dict() call that has it, or is given it by
    subscript (``kwargs["version"] = ...``)."""
    try:
        tree = ast.parse(readers.read_text(path, cap=readers.CONFIG_CAP))
    except (OSError, SyntaxError, ValueError):
        return False
    given: set[str] = set()  # names bound to mappings with a version
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and _has_version(node.value):
                    given.add(target.id)
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value == "version"
                ):
                    given.add(target.value.id)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_setup(node.func):
            continue
        for keyword in node.keywords:
            if keyword.arg == "version":
                if not (isinstance(keyword.value, ast.Constant) and keyword.value.value is None):
                    return True
            elif keyword.arg is None and (
                _has_version(keyword.value)
                or (isinstance(keyword.value, ast.Name) and keyword.value.id in given)
            ):
                return True
    return False


def _is_setup(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "setup") or (
        isinstance(func, ast.Attribute) and func.attr == "setup"
    )


def _has_version(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "version" for k in value.keys)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        return any(k.arg == "version" for k in value.keywords)
    return False


# -- [tool.setuptools.dynamic] ---------------------------------------------------------------


def _setuptools_dynamic(
    name: str, spec: Any, tool: Mapping[str, Any], root: Path, path: Path
) -> tuple[Any, str]:
    where = f"{path} [tool.setuptools.dynamic] {name}"
    if name == "optional-dependencies":
        if not isinstance(spec, dict):
            raise ConfigError(f"{where} must be a table of extras, each {{file = ...}}")
        return {
            extra: _requirements(_file_text(s, where, root)) for extra, s in spec.items()
        }, where
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} must be {{attr = ...}} or {{file = ...}}")
    if "attr" in spec:
        value = _static_attr(str(spec["attr"]), tool, root, where)
        return value, f"{where} (attr {spec['attr']})"
    text = _file_text(spec, where, root)
    if name == "readme":
        return {"text": text, "content-type": spec.get("content-type", "text/x-rst")}, where
    if name in ("dependencies", "classifiers", "keywords"):
        return _requirements(text) if name == "dependencies" else _lines(text), where
    return text.strip(), where


def _file_text(spec: Any, where: str, root: Path) -> str:
    files = spec.get("file") if isinstance(spec, dict) else None
    if files is None:
        raise ConfigError(f"{where} needs file = [...] (the files setuptools reads)")
    names = [files] if isinstance(files, str) else list(files)
    parts = []
    for name in names:
        file = root / str(name)
        try:
            parts.append(readers.read_text(file, cap=readers.CONFIG_CAP))
        except OSError as exc:
            raise ConfigError(f"{where}: {file} could not be read: {exc.strerror or exc}") from None
    return "\n".join(p.rstrip("\n") for p in parts)


def _requirements(text: str) -> list[str]:
    """A requirements file as setuptools reads it: a requirement a line, comments dropped."""
    out = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            out.append(line)
    return out


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _package_dirs(tool: Mapping[str, Any], root: Path) -> list[Path]:
    """Where setuptools looks for a top-level package: package-dir's "" entry, the find
    section's where folders, the project folder, and src/."""
    setuptools = tool.get("setuptools") or {}
    found: list[Path] = []
    package_dir = setuptools.get("package-dir") or {}
    if isinstance(package_dir, dict) and "" in package_dir:
        found.append(root / str(package_dir[""]))
    packages = setuptools.get("packages")
    if isinstance(packages, dict):
        find = packages.get("find") or {}
        found += [root / str(w) for w in find.get("where") or ()]
    return [*found, root, root / "src"]


def _static_attr(dotted: str, tool: Mapping[str, Any], root: Path, where: str) -> str:
    """``pkg.module.NAME`` read from the module's source without importing it, as setuptools'
    StaticModule does first: an assignment of a literal."""
    module, _, attr = dotted.rpartition(".")
    parts = module.split(".") if module else ["__init__"]
    for base in _package_dirs(tool, root):
        for candidate in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__init__.py"),
        ):
            if candidate.is_file():
                value = _assigned(readers.read_text(candidate, cap=readers.CONFIG_CAP), attr)
                if value is None:
                    raise ConfigError(
                        f"{where}: {candidate} does not assign {attr} a literal string; "
                        f'write {attr} = "1.2.3" there, or give version in [project]'
                    )
                return value
    raise ConfigError(f"{where}: module {module or dotted} not found under {root}")


def _assigned(source: str, name: str) -> str | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                return None
            if isinstance(literal, tuple):  # __version__ = (1, 2, 3), as setuptools joins it
                literal = ".".join(str(p) for p in literal)
            return str(literal)
    return None


# -- version providers -------------------------------------------------------------------------


def _version_provider(
    tool: Mapping[str, Any], requires: list[str], root: Path, path: Path
) -> tuple[str, str] | None:
    skbuild = ((tool.get("scikit-build") or {}).get("metadata") or {}).get("version")
    if isinstance(skbuild, dict):
        where = f"{path} [tool.scikit-build.metadata.version]"
        provider = str(skbuild.get("provider", ""))
        if provider.endswith(".regex"):
            regex = str(skbuild.get("regex", VERSION_ASSIGNMENT))
            value = _regex_version(skbuild.get("input"), regex, "value", root, where)
            result = str(skbuild.get("result", "{value}"))
            return result.format(value=value), where
        if provider.endswith(".setuptools_scm"):
            return _scm_version(tool, root, path), where
    hatch = (tool.get("hatch") or {}).get("version")
    if isinstance(hatch, dict):
        where = f"{path} [tool.hatch.version]"
        if hatch.get("source") == "vcs":
            return _scm_version(tool, root, path, extra=hatch.get("raw-options")), where
        if "path" in hatch:
            pattern = str(hatch.get("pattern") or HATCH_ASSIGNMENT)
            if "(?P<version>" not in pattern:
                pattern = HATCH_ASSIGNMENT
            return _regex_version(hatch["path"], pattern, "version", root, where), where
    if "setuptools_scm" in tool or any(_SCM_REQUIREMENT.match(r) for r in requires):
        return _scm_version(tool, root, path), f"setuptools-scm ({path} [tool.setuptools_scm])"
    return None


def _regex_version(input_: Any, regex: str, group: str, root: Path, where: str) -> str:
    if not isinstance(input_, str):
        raise ConfigError(f"{where} needs input (the file the version is read from)")
    file = root / input_
    try:
        text = readers.read_text(file, cap=readers.CONFIG_CAP)
    except OSError as exc:
        raise ConfigError(f"{where}: {file} could not be read: {exc.strerror or exc}") from None
    match = re.search(regex, text, re.MULTILINE)
    if match is None:
        raise ConfigError(f"{where}: no version in {file} matches {regex}")
    return match.group(group)


def _scm_version(
    tool: Mapping[str, Any], root: Path, path: Path, extra: Mapping[str, Any] | None = None
) -> str:
    """The version setuptools-scm gives the project: its git tags, else its fallback_version;
    SETUPTOOLS_SCM_PRETEND_VERSION honoured, as setuptools-scm does."""
    import inspect

    try:
        import setuptools_scm
    except ImportError:  # pragma: no cover - a dependency of wheelforge
        raise ConfigError(
            f"{path}: the version comes from setuptools-scm, which is not installed here; "
            "pip install setuptools-scm"
        ) from None
    options = dict(tool.get("setuptools_scm") or {})
    options.update(extra or {})
    accepted = inspect.signature(setuptools_scm.get_version).parameters
    # Nothing written: version_file and write_to are the project's own build's to write.
    kwargs = {
        k.replace("-", "_"): v
        for k, v in options.items()
        if k.replace("-", "_") in accepted
        and k not in ("write_to", "version_file", "root", "relative_to")
    }
    kwargs["root"] = str(root / str(options.get("root", ".")))
    kwargs.setdefault("dist_name", None)
    try:
        return str(setuptools_scm.get_version(**kwargs))
    except (LookupError, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"{path}: setuptools-scm found no version ({first}); tag a release in git, or set "
            "fallback_version in [tool.setuptools_scm]"
        ) from None


# -- setup.cfg -----------------------------------------------------------------------------------


def setup_cfg_project(root: Path, pyproject: Mapping[str, Any]) -> dict[str, Any] | None:
    """A project without pyproject.toml [project] whose setup.cfg ``[metadata]`` names it: the
    tables fill() reads, every field setup.cfg may give listed as dynamic (None: no such
    setup.cfg)."""
    cfg = _setup_cfg(root)
    if cfg is None or not cfg.get("metadata", "name", fallback="").strip():
        return None
    fields = [*_SETUP_CFG, "optional-dependencies"]
    project = {"name": cfg.get("metadata", "name").strip(), "dynamic": fields}
    return {**pyproject, "project": project}


# setup.cfg [metadata] options setuptools writes as headers of their own (not [project]'s
# authors and urls: setuptools keeps Author and Author-email apart, and url as Home-page).
_CFG_HEADERS = (
    ("url", "Home-page"),
    ("download_url", "Download-URL"),
    ("author", "Author"),
    ("author_email", "Author-email"),
    ("maintainer", "Maintainer"),
    ("maintainer_email", "Maintainer-email"),
)


def setup_cfg_headers(root: Path) -> list[tuple[str, str]]:
    """The core-metadata headers of setup.cfg's [metadata] people and links, as setuptools
    writes them."""
    cfg = _setup_cfg(root)
    if cfg is None:
        return []
    out = [
        (h, cfg.get("metadata", o).strip())
        for o, h in _CFG_HEADERS
        if cfg.get("metadata", o, fallback="").strip()
    ]
    out += [
        ("Project-URL", f"{k}, {v}")
        for k, v in _pairs(cfg.get("metadata", "project_urls", fallback=""))
    ]
    return out


def setup_cfg_metadata(root: Path) -> dict[str, Any]:
    """What setup.cfg's [metadata] and [options] give a setup.py project (setuptools merges them
    under setup()'s own arguments), as matrix.yaml's package keys: summary, license, classifiers,
    keywords, requires-python, dependencies, optional-dependencies, and the readme's file."""
    cfg = _setup_cfg(root)
    if cfg is None:
        return {}
    out: dict[str, Any] = {}
    keys = {"description": "summary", "license": "license", "requires-python": "requires-python"}
    for field_, key in keys.items():
        found = _from_setup_cfg(field_, cfg, {}, root)
        if found is not None:
            value = found[0]
            out[key] = value["text"] if isinstance(value, dict) else value
    for field_ in ("classifiers", "keywords", "dependencies", "optional-dependencies"):
        found = _from_setup_cfg(field_, cfg, {}, root)
        if found is not None and found[0]:
            out[field_] = found[0]
    raw = cfg.get("metadata", "long_description", fallback="").strip()
    files = [f.strip() for f in raw[5:].split(",") if f.strip()] if raw.startswith("file:") else []
    if len(files) == 1:  # matrix.yaml's readme is one file
        out["readme"] = files[0]
    return out


def _setup_cfg(root: Path) -> configparser.ConfigParser | None:
    file = root / "setup.cfg"
    if not file.is_file():
        return None
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(readers.read_text(file, cap=readers.CONFIG_CAP), source=str(file))
    except configparser.Error as exc:
        raise ConfigError(f"{file} could not be read: {exc}") from None
    return parser


# [project] field → setup.cfg (section, option)
_SETUP_CFG: dict[str, tuple[str, str]] = {
    "version": ("metadata", "version"),
    "description": ("metadata", "description"),
    "readme": ("metadata", "long_description"),
    "classifiers": ("metadata", "classifiers"),
    "keywords": ("metadata", "keywords"),
    "license": ("metadata", "license"),
    "requires-python": ("options", "python_requires"),
    "dependencies": ("options", "install_requires"),
}


def _from_setup_cfg(
    name: str, cfg: configparser.ConfigParser, tool: Mapping[str, Any], root: Path
) -> tuple[Any, str] | None:
    where = f"{root / 'setup.cfg'} [{{}}] {{}}"
    if name == "optional-dependencies":
        if not cfg.has_section("options.extras_require"):
            return None
        extras = {
            extra: _list_value(value, root) for extra, value in cfg.items("options.extras_require")
        }
        return extras, where.format("options.extras_require", "")
    if name not in _SETUP_CFG:
        return None
    section, option = _SETUP_CFG[name]
    if not cfg.has_option(section, option):
        return None
    raw = cfg.get(section, option).strip()
    at = where.format(section, option)
    if name == "version":
        return _cfg_directive(raw, tool, root, at), at
    if name == "readme":
        text = _cfg_directive(raw, tool, root, at)
        content = cfg.get("metadata", "long_description_content_type", fallback="text/x-rst")
        return {"text": text, "content-type": content}, at
    if name in ("classifiers", "keywords"):
        return _list_value(raw, root, ","), at
    if name == "dependencies":
        return _list_value(raw, root), at
    if name == "license":
        return {"text": raw}, at
    return raw, at


def _cfg_directive(raw: str, tool: Mapping[str, Any], root: Path, where: str) -> str:
    """setup.cfg's ``attr:`` and ``file:`` directives, or the literal value."""
    if raw.startswith("attr:"):
        return _static_attr(raw[5:].strip(), tool, root, where)
    if raw.startswith("file:"):
        files = [f.strip() for f in raw[5:].split(",") if f.strip()]
        return _file_text({"file": files}, where, root)
    return raw


def _list_value(raw: str, root: Path, separator: str = ";") -> list[str]:
    """A setup.cfg list as setuptools parses it: one entry a line when it spans lines, else
    split at *separator*; ``file:`` a file of them."""
    raw = raw.strip()
    if raw.startswith("file:"):
        return _requirements(_cfg_directive(raw, {}, root, f"{root / 'setup.cfg'}"))
    parts = raw.splitlines() if "\n" in raw else raw.split(separator)
    return [v.strip() for v in parts if v.strip() and not v.strip().startswith("#")]


def _pairs(raw: str) -> list[tuple[str, str]]:
    out = []
    for line in raw.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            out.append((key.strip(), value.strip()))
    return out
