"""matrix.yaml's package section from a captured build's metadata: name, version and the rest
where no pyproject.toml [project] gives them, the packages, their data and top-level modules."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from wheelforge.adoption.record.captured import CapturedBuild
from wheelforge.configuration import coremetadata
from wheelforge.configuration.matrix.pyproject import read_project

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
        if meta.summary and not project:
            package["summary"] = _one_line(meta.summary, done)
        if meta.license and not project and "\n" not in meta.license:
            package["license"] = meta.license
        python = _requires_python(build, hand, done)
        if python and not project:
            package["requires-python"] = python
        if meta.dependencies and not project:
            package["dependencies"] = list(meta.dependencies)
        if not project:
            _metadata_keys(build, package, done)
    if build.packages:
        package["packages"] = list(build.packages)
    if build.package_data:
        package["package-data"] = list(build.package_data)
    if build.modules:
        package["modules"] = list(build.modules)
    if static and len(package) == 0:
        return None
    if static:
        package["from_pyproject"] = True
    return package


def _one_line(summary: str, done: list[str]) -> str:
    """setup(description=...) as METADATA's one-line Summary: its line breaks made spaces."""
    if coremetadata.one_line(summary) is None:
        return summary
    done.append("summary: its line breaks made spaces (METADATA's Summary is one line)")
    return " ".join(summary.split())


def _metadata_keys(build: CapturedBuild, package: dict[str, object], done: list[str]) -> None:
    """setup()'s authors, URLs, classifiers and keywords; a value PyPI would refuse (a trove
    classifier it does not list, a URL that is no http(s) one, ...) is left out and said, so
    the matrix init writes is one the matrix reader takes."""
    meta = build.metadata
    authors = [
        f"{meta.author} <{meta.author_email}>"
        if meta.author and meta.author_email
        else meta.author or meta.author_email or ""
    ]
    if authors[0]:
        kept = _kept("authors", authors, _author_problem, done)
        if kept:
            package["authors"] = kept
    urls = dict(meta.project_urls)
    if meta.url:
        urls = {"Homepage": meta.url, **urls}
    for label, url in list(urls.items()):
        if why := coremetadata.url_problem(label, url):
            done.append(f"urls: left {label!r} out: {why}")
            del urls[label]
    if urls:
        package["urls"] = urls
    classifiers = _kept("classifiers", meta.classifiers, coremetadata.classifier_problem, done)
    if classifiers:
        package["classifiers"] = classifiers
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
    if floors and max(floors) < OLDEST_PYTHON:
        done.append(
            f"requires-python: left '{asked}' out: the wheels are for CPython 3.10 or newer "
            "(cp310-abi3 and up for the stable ABI, the build Python's for the unstable), as their tags say"
        )
        return None
    return asked
