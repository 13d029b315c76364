"""matrix.yaml's package section from a captured build's metadata: name, version and the rest
where no pyproject.toml [project] gives them, the packages, their data and top-level modules."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.adoption.record.captured import CapturedBuild
from wheelforge.configuration import coremetadata
from wheelforge.configuration.matrix.dynamic import setup_cfg_metadata
from wheelforge.configuration.matrix.pyproject import ProjectMetadata, read_project
from wheelforge.foundation import readers
from wheelforge.foundation.errors import ConfigError

OLDEST_PYTHON = Version("3.10")  # the oldest CPython of a wheelforge wheel (cp310)
FROM_PYPROJECT = (
    "# Name, version and the rest of the metadata come from pyproject.toml [project].\n"
)


def _version(text: str | None) -> str | None:
    try:
        return str(Version(text)) if text else None
    except InvalidVersion:
        return None


def package_section(
    build: CapturedBuild, hand: list[str], done: list[str]
) -> dict[str, object] | None:
    """The package section, or None when pyproject.toml [project] gives it all (a static version)."""
    root, meta = build.root, build.metadata
    project = read_project(root / "pyproject.toml")
    static = project is not None and project.version is not None

    def given(field: str) -> bool:
        """setup() gives the [project] *field*: there is no [project], or it lists the field as
        dynamic and nothing static fills it (setuptools ignores setup()'s other fields)."""
        return project is None or field in project.unresolved

    package: dict[str, object] = {}
    if not static:
        name = project.name if project else meta.name
        if not name:
            hand.append("package.name: not found; write the distribution name")
        package["name"] = name or root.name
        version = _version(meta.version)
        if version is None:
            hand.append(
                f"package.version: {'not a PEP 440 version: ' + repr(meta.version) if meta.version else 'not found'}; write it here"
            )
        package["version"] = version or "0.0.0"
    if meta.summary and given("description"):
        package["summary"] = _one_line(meta.summary, done)
    if meta.license and given("license") and "\n" not in meta.license:
        package["license"] = meta.license
    python = _requires_python(build, hand, done) if given("requires-python") else None
    if python:
        package["requires-python"] = python
    if meta.dependencies and given("dependencies"):
        package["dependencies"] = list(meta.dependencies)
    _metadata_keys(build, project, package, done)
    if project is None:
        # setup.cfg's [metadata]/[options], under setup()'s own arguments, as setuptools
        # merges them (pytorch_sparse: its classifiers and readme are there).
        _from_setup_cfg(setup_cfg_metadata(root), package, hand)
    if meta.extras and given("optional-dependencies"):  # vLLM's, with [project]
        package["optional-dependencies"] = _extras(meta.extras, hand)
    readme = _readme(build) if meta.readme_sha256 and given("readme") else None
    if readme:
        package["readme"] = readme
    elif meta.readme_sha256 and given("readme"):
        hand.append(
            "long_description: not the text of a file of the project; give its file as "
            "package.readme"
        )
    if build.packages:
        package["packages"] = list(build.packages)
    if build.package_data:
        package["package-data"] = list(build.package_data)
    if build.exclude:
        package["exclude"] = list(build.exclude)
    if build.modules:
        package["modules"] = list(build.modules)
    if static and len(package) == 0:
        return None
    if static:
        package["from_pyproject"] = True
    return package


def _from_setup_cfg(cfg: dict[str, object], package: dict[str, object], hand: list[str]) -> None:
    """setup.cfg's keys where setup() gave none; torch left to the matrix, a Python floor below
    the wheels' own left out (as for setup()'s)."""
    for key, given in cfg.items():
        if key in package or (key == "license" and "\n" in str(given)):
            continue
        if key == "requires-python":
            continue  # setup()'s rule: the wheels' tags say which CPython (see _requires_python)
        value = given
        if key == "dependencies" and isinstance(given, list):
            value = [r for r in given if not _is_torch(r)]
        if key == "optional-dependencies" and isinstance(given, dict):
            value = _extras(tuple((k, tuple(v)) for k, v in given.items()), hand)
        if value:
            package[key] = value


def _is_torch(requirement: str) -> bool:
    try:
        return canonicalize_name(Requirement(requirement).name) == "torch"
    except InvalidRequirement:
        return False


def _extras(
    extras: tuple[tuple[str, tuple[str, ...]], ...], hand: list[str]
) -> dict[str, list[str]]:
    """extras_require as matrix.yaml's optional-dependencies: torch left to the matrix."""
    out: dict[str, list[str]] = {}
    for extra, requirements in extras:
        kept = []
        for requirement in requirements:
            try:
                name = canonicalize_name(Requirement(requirement).name)
            except InvalidRequirement:
                hand.append(f"extras_require[{extra}]: '{requirement}' is not a requirement")
                continue
            if name == "torch":
                continue  # the matrix's torch decides, for the wheel and every extra
            kept.append(requirement)
        out[extra] = kept
    return out


def _readme(build: CapturedBuild) -> str | None:
    """The project's file whose text is setup()'s long_description (the child's digest of it):
    a README at the top, or any text file at the top or in docs/."""
    want = build.metadata.readme_sha256
    folders = [build.root, build.root / "docs"]
    for folder in folders:
        if not folder.is_dir():
            continue
        for file in sorted(
            folder.iterdir(), key=lambda p: (not p.name.upper().startswith("README"), p.name)
        ):
            if not file.is_file() or file.suffix.lower() not in {".md", ".rst", ".txt", ""}:
                continue
            try:
                text = readers.read_text(file, cap=readers.CONFIG_CAP)
            except (OSError, ConfigError):
                continue
            if hashlib.sha256(text.strip().encode("utf-8", "replace")).hexdigest() == want:
                return file.relative_to(build.root).as_posix()
    return None


def _one_line(summary: str, done: list[str]) -> str:
    """setup(description=...) as METADATA's one-line Summary: its line breaks made spaces."""
    if coremetadata.one_line(summary) is None:
        return summary
    done.append("summary: its line breaks made spaces (METADATA's Summary is one line)")
    return " ".join(summary.split())


def _metadata_keys(
    build: CapturedBuild,
    project: ProjectMetadata | None,
    package: dict[str, object],
    done: list[str],
) -> None:
    """setup()'s authors, maintainers, URLs, classifiers and keywords, where [project] leaves them to it, and
    its url and download_url (Home-page, Download-URL: setuptools keeps them beside [project]),
    as setuptools writes them: Author and Author-email apart. A value PyPI would refuse (a trove
    classifier it does not list, a URL that is no http(s) one, ...) is left out and said, so
    the matrix init writes is one the matrix reader takes."""
    meta = build.metadata

    def given(field: str) -> bool:
        return project is None or field in project.unresolved

    beside = {k for k, _ in project.headers} if project else set()
    # setuptools resets [project]'s authors to none when setup() gives them undeclared, which
    # leaves setup()'s author as it was (setuptools/config/_apply_pyprojecttoml.py's _people).
    if given("authors") or not beside & {"Author", "Author-email"}:
        authors = [a for a in (meta.author, meta.author_email) if a]
        kept = _kept("authors", authors, _author_problem, done)
        if kept:
            package["authors"] = kept
    if given("maintainers") or not beside & {"Maintainer", "Maintainer-email"}:
        maintainers = [m for m in (meta.maintainer, meta.maintainer_email) if m]
        kept = _kept("maintainers", maintainers, _author_problem, done)
        if kept:
            package["maintainers"] = kept
    for key, header, url in (
        ("home-page", "Home-page", meta.url),
        ("download-url", "Download-URL", meta.download_url),
    ):
        if url and header not in beside:
            if why := coremetadata.url_problem(header, url):
                done.append(f"{key}: left {url!r} out: {why}")
            else:
                package[key] = url
    urls = dict(meta.project_urls) if given("urls") else {}
    for label, url in list(urls.items()):
        if why := coremetadata.url_problem(label, url):
            done.append(f"urls: left {label!r} out: {why}")
            del urls[label]
    if urls:
        package["urls"] = urls
    if given("classifiers"):
        classifiers = _kept("classifiers", meta.classifiers, coremetadata.classifier_problem, done)
        if classifiers:
            package["classifiers"] = classifiers
    if given("keywords"):
        keywords = _kept("keywords", meta.keywords, coremetadata.one_line, done)
        if keywords:
            package["keywords"] = keywords


def _author_problem(author: str) -> str | None:
    return coremetadata.one_line(author) or (
        coremetadata.email_problem(author) if "@" in author else None
    )


def _kept(
    key: str, values: Sequence[str], problem: Callable[[str], str | None], done: list[str]
) -> list[str]:
    kept = []
    for value in values:
        if why := problem(value):
            done.append(f"{key}: left {value!r} out: it {why}")
        else:
            kept.append(value)
    return kept


def _requires_python(build: CapturedBuild, hand: list[str], done: list[str]) -> str | None:
    asked = build.metadata.requires_python
    if not asked:
        return None
    try:
        spec = SpecifierSet(asked)
    except InvalidSpecifier:
        hand.append(f"python_requires '{asked}' is not a version range; left out")
        return None
    floors = [Version(s.version) for s in spec if s.operator in (">=", ">", "~=", "==")]
    if floors and max(floors) < OLDEST_PYTHON and not build.pure:  # py3-none-any keeps it
        done.append(
            f"requires-python: left '{asked}' out: the wheels are for CPython 3.10 or newer "
            "(cp310-abi3 and up for the stable ABI, the build Python's for the unstable), as their tags say"
        )
        return None
    return asked
