"""The project's metadata from pyproject.toml's ``[project]`` table (PEP 621), read by the
``pyproject-metadata`` library, so matrix.yaml keeps the build matrix and need not repeat it."""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheelforge.configuration import coremetadata
from wheelforge.configuration.matrix import dynamic, yamlio
from wheelforge.foundation import fsutil, readers
from wheelforge.foundation.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# Headers the wheel writer sets itself: name and version may come from matrix.yaml, Requires-Dist
# on torch comes from the matrix's torch, Requires-Python may default from python-abi.
_OWN_HEADERS = {"metadata-version", "name", "version", "summary", "requires-python"}


@dataclass(frozen=True, kw_only=True)
class ProjectMetadata:
    path: Path  # the pyproject.toml
    name: str
    version: str | None  # None when [project] lists it as dynamic
    summary: str | None
    requires_python: str | None
    dependencies: tuple[str, ...]  # Requires-Dist without extras markers, torch left out
    # Its own Requires-Dist on torch (torch<3,>=2.4), left to the matrix's torch: what `init`
    # writes there for a wheel whose binaries use no torch
    torch_requirement: str | None = None
    headers: tuple[tuple[str, str], ...]  # the other core-metadata headers, in order
    description: str | None  # the readme's text
    metadata_version: str
    license_files: tuple[Path, ...] | None  # None: [project] has no license-files key
    # The dynamic fields filled from where the backend takes them, and where (dynamic.py).
    dynamic_sources: tuple[tuple[str, str], ...] = ()
    # The dynamic fields nothing static gives: setup.py's setup() does (matrix.yaml keeps them).
    unresolved: tuple[str, ...] = ()


def load_toml(path: Path) -> dict[str, object] | None:
    """pyproject.toml's tables (read within readers.CONFIG_CAP), None when there is none."""
    try:
        tables: dict[str, object] = tomllib.loads(readers.read_text(path, cap=readers.CONFIG_CAP))
    except FileNotFoundError:
        return None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} could not be read: {exc}") from None
    return tables


def _load(path: Path) -> dict[str, object] | None:
    data = load_toml(path)
    return data if data is not None and "project" in data else None


def read_project(path: Path) -> ProjectMetadata | None:
    """The ``[project]`` metadata of the pyproject.toml at *path*, or None if it has none."""
    root = path.parent
    data = _load(path)
    if data is None:
        data = dynamic.setup_cfg_project(root, load_toml(path) or {})
        if data is None:
            return None
        path = root / "setup.cfg"
    import pyproject_metadata  # ~0.03 s: only a project with a [project] table loads it

    _check_read_files(data, path)
    filled = dynamic.fill(data, path)
    project = filled.project
    if path.name == "setup.cfg":  # what setup.cfg leaves out, setup.py gives (matrix.yaml)
        kept = [d for d in filled.unresolved if d == "version"]
        project = (
            {**project, "dynamic": kept}
            if kept
            else {k: v for k, v in project.items() if k != "dynamic"}
        )
    if "version" in filled.unresolved:
        # Given by matrix.yaml (setup.py computes it); the library needs one to write METADATA.
        project = {**project, "version": "0", "dynamic": [*filled.unresolved]}
        project["dynamic"].remove("version")
    try:
        meta = pyproject_metadata.StandardMetadata.from_pyproject(
            {**data, "project": project}, project_dir=root, allow_extra_keys=True
        )
        message = meta.as_rfc822()
    except (pyproject_metadata.ConfigurationError, ValueError, OSError) as exc:
        raise ConfigError(f"{path}: [project]: {exc}") from None
    parsed = email.parser.Parser(policy=email.policy.compat32).parsestr(str(message))
    _check_headers(parsed.items(), path)
    headers: list[tuple[str, str]] = []
    dependencies: list[str] = []
    torch_requirement = None
    for key, value in parsed.items():
        if key.lower() in _OWN_HEADERS:
            continue
        if key.lower() == "requires-dist":
            req = Requirement(value)
            if canonicalize_name(req.name) == "torch":
                # the matrix's torch decides (a stable-ABI floor, one pinned torch, or this)
                torch_requirement = torch_requirement or value
                continue
            if req.marker is None:
                dependencies.append(value)
                continue
        headers.append((key, value))
    if path.name == "setup.cfg":
        headers += dynamic.setup_cfg_headers(root)
    body = parsed.get_payload()
    return ProjectMetadata(
        path=path,
        name=str(meta.name),
        version=None if "version" in filled.unresolved else str(meta.version),
        summary=meta.description,
        requires_python=str(meta.requires_python) if meta.requires_python else None,
        dependencies=tuple(dependencies),
        torch_requirement=torch_requirement,
        headers=tuple(headers),
        description=body if isinstance(body, str) and body.strip() else None,
        metadata_version=str(parsed["Metadata-Version"] or "2.1"),
        dynamic_sources=tuple(filled.sources.items()),
        unresolved=filled.unresolved,
        license_files=None
        if meta.license_files is None
        else _inside(path, "license-files", [root / p for p in meta.license_files]),
    )


# The [project] key each core-metadata header comes from, for the error that names it.
_PROJECT_KEYS = {
    "summary": "description",
    "classifier": "classifiers",
    "project-url": "urls",
    "author": "authors",
    "author-email": "authors",
    "maintainer": "maintainers",
    "maintainer-email": "maintainers",
    "keywords": "keywords",
    "requires-dist": "dependencies",
    "provides-extra": "optional-dependencies",
    "description-content-type": "readme",
}


def _check_headers(headers: list[tuple[str, str]], path: Path) -> None:
    """Refuse what PyPI would refuse in the headers [project] gives: a line break in a one-line
    field (pyproject-metadata folds it, so the wheel's METADATA would carry it), an unknown
    classifier, a Project-URL PyPI does not take; one line naming the key and the fix."""
    for name, value in headers:
        key = name.lower()
        if key in coremetadata.MULTI_LINE:
            continue
        text = value  # pyproject-metadata continued a value's further lines: a line break
        if key == "classifier":
            why = coremetadata.classifier_problem(text)
        elif key == "project-url":
            label, _, url = text.partition(",")
            why = coremetadata.url_problem(label.strip(), url.strip())
        elif key in ("author-email", "maintainer-email"):
            why = coremetadata.one_line(text) or coremetadata.email_problem(text)
        else:
            why = coremetadata.one_line(text)
        if why:
            where = _PROJECT_KEYS.get(key, key)
            shown = " ".join(text.split())
            raise ConfigError(
                f"{path}: [project] {where}: {shown!r} (METADATA's {name}) {why}; fix it there"
            )


# What setuptools (and hatchling, and wheel before them) ship from the project's folder when
# no license-files are given (setuptools' Distribution._finalize_license_files).
DEFAULT_LICENSE_GLOBS = ("LICEN[CS]E*", "COPYING*", "NOTICE*", "AUTHORS*")


def default_license_files(root: Path) -> tuple[Path, ...]:
    """The files of *root* (its own, not its subfolders') that DEFAULT_LICENSE_GLOBS match, in
    setuptools' order: by pattern, then by name; editor backups (``~``) left out."""
    found: list[Path] = []
    for pattern in DEFAULT_LICENSE_GLOBS:
        found += sorted(p for p in root.glob(pattern) if p.is_file() and not p.name.endswith("~"))
    for file in dict.fromkeys(found):
        target = fsutil.escapes(file, root)
        if target is not None:
            what = (
                f"license file {file.name} (the default globs {', '.join(DEFAULT_LICENSE_GLOBS)})"
            )
            raise ConfigError(fsutil.escape_message(what, file, target, root))
    return tuple(dict.fromkeys(found))


def _inside(path: Path, key: str, files: list[Path]) -> tuple[Path, ...]:
    """*files* (of [project] *key*), each refused when it leads out of the project: a readme
    linked to ``~/.ssh/id_rsa`` would become METADATA's body, a license file a wheel member."""
    for file in files:
        target = fsutil.escapes(file, path.parent)
        if target is not None:
            what = f"{path}: [project] {key}"
            raise ConfigError(fsutil.escape_message(what, file, target, path.parent))
    return tuple(files)


def _check_read_files(data: dict[str, object], path: Path) -> None:
    """The files [project] names that pyproject-metadata reads whole (the readme, a license
    file) are first read through the bounded reader: a FIFO, a device or a 3 GB readme is one
    line naming it (the library waited, or ran out of memory); one that is missing is the
    library's to name."""
    project = data.get("project")
    if not isinstance(project, dict):
        return
    readme, license_ = project.get("readme"), project.get("license")
    named = [
        ("readme", readme if isinstance(readme, str) else None),
        ("readme", readme.get("file") if isinstance(readme, dict) else None),
        ("license", license_.get("file") if isinstance(license_, dict) else None),
    ]
    for key, name in named:
        if isinstance(name, str):
            with contextlib.suppress(FileNotFoundError):
                readers.read_text(path.parent / name, cap=readers.CONFIG_CAP)
            _inside(path, key, [path.parent / name])


def project_for(
    node: yaml.Node | None, root: Path, problems: yamlio.Problems
) -> ProjectMetadata | None:
    """pyproject.toml's [project], from ``package.pyproject`` (a path, or false for none),
    by default the one beside matrix.yaml if there is one."""
    value: str | None = "pyproject.toml"
    value_node = yamlio.key_node(node, "pyproject")
    if value_node is not None and value_node.tag == "tag:yaml.org,2002:bool":
        if not yamlio.boolean(value_node, problems, "package.pyproject"):
            return None
    elif value_node is not None:
        value = yamlio.scalar(value_node, problems, "package.pyproject")
        if value is not None and not (root / value).is_file():
            problems.add(value_node, f"package.pyproject: '{value}' is not a file")
            return None
    if value is None:
        return None
    try:
        return read_project(root / value)
    except ConfigError as exc:
        problems.add(node, exc.message)
        return None
