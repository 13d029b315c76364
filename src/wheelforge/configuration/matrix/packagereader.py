"""Reading matrix.yaml's ``package`` section, with what pyproject.toml's ``[project]`` gives
(read by matrix/pyproject.py): a key in both places that differs is an error naming both. The
reader of the other sections (configuration/matrix/load.py) builds on this one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.configuration import coremetadata
from wheelforge.configuration.matrix import yamlio
from wheelforge.configuration.matrix.discovery import is_package
from wheelforge.configuration.matrix.keys import LINE_BREAK_RE, NAME_RE
from wheelforge.configuration.matrix.model import PackageConfig
from wheelforge.configuration.matrix.modelreader import KeyReader, ModelReader, Section
from wheelforge.configuration.matrix.pyproject import ProjectMetadata, default_license_files
from wheelforge.foundation import fsutil, numbers, readers
from wheelforge.foundation.errors import ConfigError

# package keys pyproject.toml's [project] may give instead: attribute → how two values compare.
_FROM_PROJECT: dict[str, Callable[[str, str], bool]] = {
    "name": lambda a, b: canonicalize_name(a) == canonicalize_name(b),
    "version": lambda a, b: Version(a) == Version(b),
    "summary": str.__eq__,
    "requires_python": lambda a, b: SpecifierSet(a) == SpecifierSet(b),
}


# The core-metadata headers each of those keys becomes (setup.cfg gives some of them).
_HEADERS_OF = {
    "authors": ("Author", "Author-email", "Author-Email"),
    "maintainers": ("Maintainer", "Maintainer-email", "Maintainer-Email"),
    "urls": ("Home-page", "Project-URL"),
    "classifiers": ("Classifier",),
    "keywords": ("Keywords",),
    "optional-dependencies": ("Provides-Extra",),
}

# A readme's Description-Content-Type by its suffix, as pyproject-metadata (PEP 621) chooses it.
README_TYPES = {".md": "text/markdown", ".rst": "text/x-rst", ".txt": "text/plain"}

# Metadata matrix.yaml takes for a project without [project] (what setup() gave): with a
# pyproject.toml [project], it belongs there, unless [project] lists it as dynamic and setup()
# gives it (vLLM's optional-dependencies).
_ONLY_ONE_PLACE = (
    "authors",
    "maintainers",
    "urls",
    "classifiers",
    "keywords",
    "optional-dependencies",
)
# setup()'s url and download_url: no [project] field, so setuptools keeps them beside [project]
# (NATTEN's Home-page); only setup.cfg [metadata] may give them too. setup()'s author too, where
# [project] has no authors (maintainers): setuptools warns that it ignores it, and writes it all
# the same.
_BESIDE_PROJECT = {"home-page": "Home-page", "download-url": "Download-URL"}


class PackageReader(ModelReader):
    """The package section's keys."""

    def __init__(self, problems: yamlio.Problems, root: Path) -> None:
        super().__init__(problems, root)
        self.project: ProjectMetadata | None = None

    def readers(self, model: type) -> Mapping[str, KeyReader]:
        if model is not PackageConfig:
            return super().readers(model)
        return {
            "name": self.checked_scalar(
                lambda v: bool(NAME_RE.match(v)),
                "is not a valid distribution name; use letters, digits, '-', '_' and '.'",
            ),
            "version": self.version,
            "summary": self.one_line,
            "requires_python": self.requires_python,
            "dependencies": self.checked_list(self.dependency),
            "authors": self.checked_list(self.author),
            "maintainers": self.checked_list(self.maintainer),
            "urls": self.urls,
            "home_page": self.url_of("Home-page"),
            "download_url": self.url_of("Download-URL"),
            "classifiers": self.checked_list(self.classifier),
            "keywords": self.checked_list(self.keyword),
            "optional_dependencies": self.optional_dependencies,
            "readme": self.readme,
            "packages": self.checked_list(self.package_folder),
            "modules": self.checked_list(self.module_file),
            "package_data": self.flag_list,
            "exclude": self.flag_list,
            "pyproject": lambda _n, _w: None,  # read before everything else: project_for()
        }

    # -- package ------------------------------------------------------------------------------

    def package(self, node: yaml.Node | None, where: str) -> PackageConfig | None:
        if node is None:  # all from pyproject.toml's [project]
            self.field_readers(PackageConfig)  # every key has a reader, written or not
            read: Section | None = Section({}, {})
        else:
            read = self.section(node, PackageConfig, where)
        if read is None:
            return None
        project = self.project
        if project is not None:
            self.merge_project(read, project)
        for key in ("name", "version"):
            if read.values.get(key) is None and key not in read.items:
                how = (
                    f" ({project.path.name} lists it as dynamic, and setup.py's setup() gives "
                    "it: it passes one, which setuptools takes before setup.cfg's and "
                    "setuptools-scm's, or nothing static does ([tool.setuptools.dynamic], "
                    f"setuptools-scm, a scikit-build-core or hatch provider): write '{key}: ...' "
                    "under package here; wheelforge init writes what setup.py gives)"
                    if project
                    else ""
                )
                self.problems.add(node, f"{where} needs '{key}'{how}")
        if read.values.get("name") is None or read.values.get("version") is None:
            return None  # the problem is recorded
        readme = self.readme_metadata(read, project)
        if project is not None and project.license_files is not None:
            return self.build(
                PackageConfig,
                read,
                extra_metadata=project.headers + readme[0],
                description=project.description or readme[1],
                metadata_version=project.metadata_version,
                license_files=project.license_files,
            )
        # No license-files given: setuptools' default globs, with their License-File headers
        # (core metadata 2.4), as a setuptools wheel of the project carries them.
        root = project.path.parent if project is not None else self.root
        try:
            licenses = default_license_files(root)
        except ConfigError as exc:
            self.problems.add(node, exc.message)
            return None
        headers = tuple(("License-File", p.relative_to(root).as_posix()) for p in licenses)
        version = project.metadata_version if project is not None else "2.1"
        return self.build(
            PackageConfig,
            read,
            extra_metadata=(project.headers if project is not None else ()) + readme[0] + headers,
            description=(project.description if project is not None else None) or readme[1],
            metadata_version="2.4" if licenses else version,
            license_files=licenses,
        )

    def readme_metadata(
        self, read: Section, project: ProjectMetadata | None
    ) -> tuple[tuple[tuple[str, str], ...], str | None]:
        """matrix.yaml's ``readme``: its Description-Content-Type header and its text (none
        where pyproject.toml [project] gives a readme: one place)."""
        value = read.values.get("readme")
        if value is None:
            return (), None
        if project is not None and project.description:
            self.problems.add(
                read.items["readme"][1],
                f"package.readme: {project.path} gives the readme; keep it there and remove it here",
            )
            return (), None
        path = self.root / str(value)
        try:
            text = readers.read_text(path, cap=readers.CONFIG_CAP)
        except OSError as exc:
            self.problems.add(read.items["readme"][1], f"package.readme: {path}: {exc}")
            return (), None
        kind = README_TYPES.get(path.suffix.lower(), "text/plain")
        return (("Description-Content-Type", kind),), text

    def merge_project(self, read: Section, project: ProjectMetadata) -> None:
        """Fill what matrix.yaml leaves out from pyproject.toml's [project]; a value in both
        places that differs is an error naming both."""
        for attr, same in _FROM_PROJECT.items():
            theirs = getattr(project, attr)
            ours = read.values.get(attr)
            key = attr.replace("_", "-")
            if ours is None and key not in read.items:
                read.values[attr] = theirs
                continue
            try:
                equal = ours is None or theirs is None or same(ours, theirs)
            except (InvalidVersion, InvalidSpecifier):
                equal = False
            if not equal:
                self.problems.add(
                    read.items[key][1],
                    f"package.{key} '{ours}' conflicts with {key} '{theirs}' in {project.path} "
                    "[project]; keep it in one place (pyproject.toml) and remove it here",
                )
        license_ = read.values.get("license")
        theirs = next((v for k, v in project.headers if k.startswith("License")), None)
        if license_ is not None and theirs is not None and license_ != theirs:
            self.problems.add(
                read.items["license"][1],
                (
                    f"package.license '{license_}' conflicts with the license in {project.path} "
                    "[project]; keep it in one place"
                ),
            )
        from_cfg = project.path.name == "setup.cfg"  # it gives some keys, setup.py the rest
        for key, header in _BESIDE_PROJECT.items():
            if key in read.items and any(k == header for k, _ in project.headers):
                self.problems.add(
                    read.items[key][1],
                    f"package.{key}: {project.path} gives {header}; keep it there and remove it here",
                )
        for key in _ONLY_ONE_PLACE:
            given = {k for k, _ in project.headers} & set(_HEADERS_OF[key])
            from_setup = (
                key in project.unresolved or key in ("authors", "maintainers")
            ) and not given
            if key in read.items and (given or not (from_cfg or from_setup)):
                source = "setup.cfg [metadata]" if from_cfg else "pyproject.toml [project]"
                self.problems.add(
                    read.items[key][1],
                    (
                        f"package.{key}: {source} gives the metadata "
                        f"({project.path}); keep {key} there and remove it here"
                    ),
                )
        if "dependencies" not in read.items:
            read.values["dependencies"] = project.dependencies
        elif project.dependencies and set(project.dependencies) != set(
            read.values["dependencies"] or ()
        ):
            self.problems.add(
                read.items["dependencies"][1],
                (
                    f"package.dependencies conflicts with dependencies in {project.path} [project];"
                    " keep them in one place (pyproject.toml)"
                ),
            )

    def urls(self, node: yaml.Node, where: str) -> tuple[tuple[str, str], ...]:
        """``urls``: labels to URLs, in order."""
        if not isinstance(node, yaml.MappingNode):
            self.problems.add(
                node, f"{where} must be a mapping of labels to URLs (Homepage: https://...)"
            )
            return ()
        out = []
        for key_node, value_node in node.value:
            label = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            value = self.scalar(value_node, f"{where}.{label}")
            if isinstance(label, str) and value is not None:
                if why := coremetadata.url_problem(label, value):
                    self.problems.add(
                        value_node, f"{where}.{label}: METADATA's Project-URL {label}: {why}"
                    )
                    continue
                out.append((label, value))
        return tuple(out)

    def optional_dependencies(
        self, node: yaml.Node, where: str
    ) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """``optional-dependencies``: extras to their requirements, in order."""
        if not isinstance(node, yaml.MappingNode):
            self.problems.add(
                node, f"{where} must be a mapping of extras to lists (test: [pytest>=8])"
            )
            return ()
        out = []
        for key_node, value_node in node.value:
            extra = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(extra, str) or not NAME_RE.match(extra):
                self.problems.add(key_node, f"{where}: '{extra}' is not an extra's name")
                continue
            reqs = self.checked_list(self.dependency)(value_node, f"{where}.{extra}")
            out.append((extra, tuple(reqs or ())))
        return tuple(out)

    def readme(self, node: yaml.Node, where: str) -> str | None:
        """``readme``: a file of the project, read whole (bounded) as the long description."""
        value = self.scalar(node, where)
        if value is None:
            return None
        path = self.root / value
        if self.escapes(node, path, where):
            return None
        if not path.is_file():
            self.problems.add(node, f"{where}: '{value}' is not a file of the project")
            return None
        return value

    # Each of these becomes a METADATA header, which PyPI (and twine check) refuse unless it is
    # one line; a classifier also must be one of PyPI's trove classifiers.
    def author(self, node: yaml.Node, value: str, where: str) -> str | None:
        why = coremetadata.one_line(value)
        if why is None and "@" in value:
            why = coremetadata.email_problem(value)
        return self._metadata_value(node, value, where, "Author-email", why)

    def maintainer(self, node: yaml.Node, value: str, where: str) -> str | None:
        why = coremetadata.one_line(value)
        if why is None and "@" in value:
            why = coremetadata.email_problem(value)
        return self._metadata_value(node, value, where, "Maintainer-email", why)

    def classifier(self, node: yaml.Node, value: str, where: str) -> str | None:
        why = coremetadata.classifier_problem(value)
        return self._metadata_value(node, value, where, "Classifier", why)

    def keyword(self, node: yaml.Node, value: str, where: str) -> str | None:
        why = coremetadata.one_line(value)
        return self._metadata_value(node, value, where, "Keywords", why)

    def _metadata_value(
        self, node: yaml.Node, value: str, where: str, header: str, why: str | None
    ) -> str | None:
        if why is None:
            return value
        self.problems.add(node, f"{where}: {value!r} (METADATA's {header}) {why}")
        return None

    def url_of(self, header: str) -> KeyReader:
        """A reader of one http(s) URL, METADATA's *header* (home-page, download-url)."""

        def read(node: yaml.Node, where: str) -> str | None:
            value = self.scalar(node, where)
            if value is None:
                return None
            return self._metadata_value(
                node, value, where, header, coremetadata.url_problem(header, value)
            )

        return read

    def one_line(self, node: yaml.Node, where: str) -> str | None:
        """A value that becomes one METADATA header line (Summary): a line break in it would end
        the header and start garbage that every parser reads as the body, losing Requires-Dist."""
        value = self.scalar(node, where)
        if value is not None and LINE_BREAK_RE.search(value):
            self.problems.add(
                node,
                f"{where} must be one line (it is METADATA's Summary header); put longer text "
                "in the readme ([project] readme in pyproject.toml)",
            )
            return None
        if value is not None and len(value) > coremetadata.SUMMARY_LIMIT:
            self.problems.add(
                node,
                f"{where} is {len(value)} characters, and PyPI takes a Summary of at most "
                f"{coremetadata.SUMMARY_LIMIT}; put longer text in the readme",
            )
            return None
        return value

    def version(self, node: yaml.Node, where: str) -> str | None:
        value = self.scalar(node, where)
        if value is None:
            return None
        try:
            return str(numbers.version(value))
        except InvalidVersion:
            self.problems.add(
                node, f"{where} '{value}' is not a PEP 440 version; write e.g. '1.2.0'"
            )
            return None

    def requires_python(self, node: yaml.Node, where: str) -> str | None:
        value = self.scalar(node, where)
        if value is not None:
            try:
                numbers.specifier(value)
            except InvalidSpecifier:
                self.problems.add(
                    node, f"{where} '{value}' is not a version range; write e.g. '>=3.10'"
                )
        return value

    def dependency(self, node: yaml.Node, value: str, where: str) -> str | None:
        dep = self.requirement("numpy>=1.26")(node, value, where)
        if dep is not None and canonicalize_name(Requirement(dep).name) == "torch":
            self.problems.add(node, f"{where}: leave torch out; wheelforge derives it from 'torch'")
            return None
        return dep

    def package_folder(self, node: yaml.Node, value: str, where: str) -> Path | None:
        folder = self.folder(node, value, where)
        if folder is not None and self.escapes(node, self.root / value, where):
            return None
        if folder is not None and not is_package(folder):
            self.problems.add(
                node,
                f"{where}: '{value}' has no __init__.py (nor a namespace package's subpackages); "
                "name a Python package folder",
            )
            return None
        return folder

    def module_file(self, node: yaml.Node, value: str, where: str) -> Path | None:
        """A top-level module's file, named where it is found (a link by its own name: the
        wheel carries the link's own name, not the name of the file it leads to)."""
        link = self.root / value
        path = fsutil.resolved(link.parent) / link.name
        if path.suffix != ".py" or not path.is_file():
            self.problems.add(
                node,
                (
                    f"{where}: '{value}' is not a .py file (paths are relative to "
                    f"{self.problems.display}); name a top-level module's file"
                ),
            )
            return None
        return None if self.escapes(node, link, where) else path
