"""Turning matrix.yaml's node tree into the model of matrix.py: every key checked, every
problem collected with its line, all reported at once."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.configuration import yamlio
from wheelforge.configuration.archs import ArchSet, ArchSpec, parse_arch_list
from wheelforge.configuration.discovery import discover_packages, is_package
from wheelforge.configuration.matrix import (
    DEFAULT_TEST_COMMAND,
    ExtensionConfig,
    Matrix,
    PackageConfig,
    SourceSpec,
    TestsConfig,
)
from wheelforge.configuration.pyproject import ProjectMetadata, project_for
from wheelforge.configuration.torchspec import OLDEST_STABLE_TARGET, TorchSpec, parse_torch_spec
from wheelforge.foundation.errors import ConfigError

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# torch needs CPython 3.10 or newer (torch 2.9+), so no abi3 floor below cp310 makes sense.
OLDEST_PYTHON_MINOR = 10
_ARCH_SET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.]*$")
_PYTHON_ABI_RE = re.compile(r"^cp3(\d{1,2})$")

TOP_KEYS = ("package", "extension", "abi", "python-abi", "torch", "cuda", "arch-sets", "tests")
SOURCE_KEYS = ("files", "archs")
_CUDA_RE = re.compile(r"^\d+\.\d+$")
TESTS_KEYS = ("path", "requires", "torch", "command")
PACKAGE_KEYS = (
    "name",
    "version",
    "summary",
    "license",
    "requires-python",
    "dependencies",
    "packages",
    "package-data",
    "exclude",
    "pyproject",
)
EXTENSION_KEYS = (
    "name",
    "sources",
    "include-dirs",
    "cxx-flags",
    "nvcc-flags",
    "module-init",
    "link-flags",
    "libraries",
    "library-dirs",
)


class _Reader:
    """Turns the node tree into the model, collecting problems."""

    def __init__(self, path: Path, display: str) -> None:
        self.path = path
        self.root = path.parent
        self.p = yamlio.Problems(path, display)

    def where(self, node: yaml.Node) -> str:
        return self.p.where(node)

    def required(
        self, items: yamlio.MappingItems, key: str, parent: yaml.Node, where: str
    ) -> yaml.Node | None:
        if key not in items:
            self.p.add(parent, f"{where} needs '{key}'")
            return None
        return items[key][1]

    def folder(self, node: yaml.Node, value: str, where: str) -> Path | None:
        folder = (self.root / value).resolve()
        if not folder.is_dir():
            self.p.add(
                node, f"{where}: '{value}' is not a folder (paths are relative to {self.p.display})"
            )
            return None
        return folder

    def both(
        self,
        items: yamlio.MappingItems,
        key: str,
        project: ProjectMetadata | None,
        theirs: str | None,
        same: Callable[[str, str], bool] = str.__eq__,
    ) -> str | None:
        """``package.<key>`` from matrix.yaml, else pyproject's; both and different is an error
        naming both places."""
        if key not in items:
            return theirs
        node = items[key][1]
        ours = yamlio.scalar(node, self.p, f"package.{key}")
        if ours is not None and project is not None and theirs is not None:
            try:
                equal = same(ours, theirs)
            except (InvalidVersion, InvalidSpecifier):
                equal = False
            if not equal:
                self.p.add(
                    node,
                    f"package.{key} '{ours}' conflicts with {key} '{theirs}' in {project.path} "
                    "[project]; keep it in one place (pyproject.toml) and remove it here",
                )
        return ours

    def package(
        self, node: yaml.Node | None, project: ProjectMetadata | None
    ) -> PackageConfig | None:
        items = yamlio.mapping(node, self.p, "package", PACKAGE_KEYS) if node is not None else {}
        if items is None:
            return None
        need = "" if project is None else " (or pyproject.toml [project] to give it)"
        name = self.both(items, "name", project, project.name if project else None,
                         lambda a, b: canonicalize_name(a) == canonicalize_name(b))  # fmt: skip
        if name is not None and not _NAME_RE.match(name):
            self.p.add(
                items["name"][1],
                f"package.name '{name}' is not a valid distribution name; use letters, digits, '-', '_' and '.'",
            )
            name = None
        elif name is None and "name" not in items:
            self.p.add(node, f"package needs 'name'{need}")
        version = self.both(items, "version", project, project.version if project else None,
                            lambda a, b: Version(a) == Version(b))  # fmt: skip
        if version is not None:
            try:
                version = str(Version(version))
            except InvalidVersion:
                self.p.add(
                    items["version"][1],
                    f"package.version '{version}' is not a PEP 440 version; write e.g. '1.2.0'",
                )
                version = None
        elif "version" not in items:
            dynamic = " ([project] lists it as dynamic: give it here)" if project else ""
            self.p.add(node, f"package needs 'version'{dynamic}")
        summary = self.both(items, "summary", project, project.summary if project else None) or ""
        license_ = self.both(items, "license", project, None)
        if license_ is not None and project is not None:
            theirs = next((v for k, v in project.headers if k.startswith("License")), None)
            if theirs is not None and theirs != license_:
                self.p.add(
                    items["license"][1],
                    f"package.license '{license_}' conflicts with the license in {project.path} [project]; keep it in one place",
                )
        requires_python = self.both(
            items, "requires-python", project, project.requires_python if project else None,
            lambda a, b: SpecifierSet(a) == SpecifierSet(b),
        )  # fmt: skip
        if requires_python is not None and "requires-python" in items:
            try:
                SpecifierSet(requires_python)
            except InvalidSpecifier:
                self.p.add(
                    items["requires-python"][1],
                    f"package.requires-python '{requires_python}' is not a version range; write e.g. '>=3.10'",
                )
        dependencies = self.dependencies(items, project)
        packages = []
        if "packages" in items:
            for item, value in yamlio.string_list(items["packages"][1], self.p, "package.packages"):
                folder = self.folder(item, value, "package.packages")
                if folder is not None and not is_package(folder):
                    self.p.add(
                        item,
                        f"package.packages: '{value}' has no __init__.py (nor a namespace package's "
                        "subpackages); name a Python package folder",
                    )
                elif folder is not None:
                    packages.append(folder)
        globs = {
            key: tuple(v for _, v in self.flag_list(items, key, "package")) if key in items else ()
            for key in ("package-data", "exclude")
        }
        if name is None or version is None:
            return None
        return PackageConfig(
            name=name,
            version=version,
            summary=summary,
            license=license_,
            requires_python=requires_python,
            dependencies=tuple(dependencies),
            packages=tuple(packages),
            package_data=globs["package-data"],
            exclude=globs["exclude"],
            extra_metadata=project.headers if project else (),
            description=project.description if project else None,
            metadata_version=project.metadata_version if project else "2.1",
            license_files=project.license_files if project else (),
            source=str(project.path) if project else self.p.display,
        )

    def dependencies(
        self, items: yamlio.MappingItems, project: ProjectMetadata | None
    ) -> list[str]:
        if "dependencies" not in items:
            return list(project.dependencies) if project else []
        node = items["dependencies"][1]
        dependencies = []
        for item, dep in yamlio.string_list(node, self.p, "package.dependencies"):
            try:
                req = Requirement(dep)
            except InvalidRequirement:
                self.p.add(
                    item,
                    f"package.dependencies: '{dep}' is not a requirement; write e.g. 'numpy>=1.26'",
                )
                continue
            if canonicalize_name(req.name) == "torch":
                self.p.add(
                    item,
                    "package.dependencies: leave torch out; wheelforge derives it from 'torch'",
                )
                continue
            dependencies.append(dep)
        if (
            project is not None
            and project.dependencies
            and set(project.dependencies) != set(dependencies)
        ):
            self.p.add(
                node,
                f"package.dependencies conflicts with dependencies in {project.path} [project]; keep them in one place (pyproject.toml)",
            )
        return dependencies

    def flag_list(
        self, items: yamlio.MappingItems, key: str, where: str
    ) -> list[tuple[yaml.Node, str]]:
        """A list of strings, and only a list: ``cxx-flags: -O3 -g`` would reach the compiler as
        one argument, so a bare string is an error that says how to write it."""
        node = items[key][1]
        if isinstance(node, yaml.ScalarNode) and node.tag != "tag:yaml.org,2002:null":
            example = ", ".join(str(node.value).split()) or "..."
            self.p.add(
                node,
                f"{where}.{key} must be a list of strings, got the string '{node.value}'; write [{example}]",
            )
            return []
        return yamlio.string_list(node, self.p, f"{where}.{key}")

    def extension(self, node: yaml.Node) -> ExtensionConfig | None:
        items = yamlio.mapping(node, self.p, "extension", EXTENSION_KEYS)
        if items is None:
            return None
        name = None
        if (n := self.required(items, "name", node, "extension")) is not None:
            name = yamlio.scalar(n, self.p, "extension.name")
            if name is not None and not _MODULE_RE.match(name):
                self.p.add(
                    n,
                    f"extension.name '{name}' must be a module name, e.g. 'mypkg._C' (or 'mypkg_cuda' at the top level)",
                )
                name = None
        sources = []
        if (n := self.required(items, "sources", node, "extension")) is not None:
            for item, pattern, archs in self.source_entries(n):
                if Path(pattern).is_absolute():
                    self.p.add(
                        item, f"extension.sources: '{pattern}' must be relative to {self.p.display}"
                    )
                elif not any(True for _ in self.root.glob(pattern)):
                    self.p.add(item, f"extension.sources: '{pattern}' matches no file")
                else:
                    bad = [
                        m
                        for m in self.root.glob(pattern)
                        if m.is_file() and m.suffix not in SOURCE_SUFFIXES
                    ]
                    if bad:
                        self.p.add(
                            item,
                            f"extension.sources: '{pattern}' matches {bad[0].name}, which is not a source ({', '.join(SOURCE_SUFFIXES)})",
                        )
                    else:
                        sources.append(SourceSpec(pattern=pattern, archs=archs))
        include_dirs = []
        if "include-dirs" in items:
            for item, value in yamlio.string_list(
                items["include-dirs"][1], self.p, "extension.include-dirs"
            ):
                folder = self.folder(item, value, "extension.include-dirs")
                if folder is not None:
                    include_dirs.append(folder)
        flags = {
            key: tuple(v for _, v in self.flag_list(items, key, "extension"))
            if key in items
            else ()
            for key in ("cxx-flags", "nvcc-flags", "link-flags", "libraries")
        }
        library_dirs = []
        if "library-dirs" in items:
            for item, value in yamlio.string_list(
                items["library-dirs"][1], self.p, "extension.library-dirs"
            ):
                folder = self.folder(item, value, "extension.library-dirs")
                if folder is not None:
                    library_dirs.append(folder)
        module_init = True
        if "module-init" in items:
            module_init = bool(
                yamlio.boolean(items["module-init"][1], self.p, "extension.module-init")
            )
        if name is None or not sources:
            return None
        return ExtensionConfig(
            name=name,
            sources=tuple(sources),
            include_dirs=tuple(include_dirs),
            cxx_flags=flags["cxx-flags"],
            nvcc_flags=flags["nvcc-flags"],
            module_init=module_init,
            link_flags=flags["link-flags"],
            libraries=flags["libraries"],
            library_dirs=tuple(library_dirs),
        )

    def source_entries(
        self, node: yaml.Node
    ) -> list[tuple[yaml.Node, str, tuple[ArchSpec, ...] | None]]:
        """``sources``: globs, or mappings ``{files: GLOB, archs: LIST}`` limiting their archs."""
        if not isinstance(node, yaml.SequenceNode):
            return [(n, v, None) for n, v in yamlio.string_list(node, self.p, "extension.sources")]
        out: list[tuple[yaml.Node, str, tuple[ArchSpec, ...] | None]] = []
        for i, item in enumerate(node.value):
            where = f"extension.sources[{i}]"
            if not isinstance(item, yaml.MappingNode):
                value = yamlio.scalar(item, self.p, where)
                if value is not None:
                    out.append((item, value, None))
                continue
            entry = yamlio.mapping(item, self.p, where, SOURCE_KEYS) or {}
            files = self.required(entry, "files", item, where)
            archs_node = self.required(entry, "archs", item, where)
            pattern = yamlio.scalar(files, self.p, f"{where}.files") if files is not None else None
            text = (
                yamlio.scalar(archs_node, self.p, f"{where}.archs")
                if archs_node is not None
                else None
            )
            if pattern is None or text is None or archs_node is None or files is None:
                continue
            try:
                out.append((files, pattern, parse_arch_list(text, source=f"{where}.archs")))
            except ConfigError as exc:
                self.p.add(archs_node, exc.message)
        return out

    def cuda(self, node: yaml.Node) -> tuple[str, ...]:
        entries = [v for _, v in yamlio.string_list(node, self.p, "cuda")]
        for value in entries:
            if value != "auto" and not _CUDA_RE.match(value):
                self.p.add(
                    node, f"cuda: '{value}' is neither 'auto' nor a CUDA release like '13.0'"
                )
        if len(set(entries)) != len(entries):
            self.p.add(node, "cuda: a release appears twice")
        return tuple(entries) or ("auto",)

    def torch(self, node: yaml.Node) -> TorchSpec | None:
        value: str | list[str]
        if isinstance(node, yaml.SequenceNode):
            value = [v for _, v in yamlio.string_list(node, self.p, "torch")]
        else:
            scalar = yamlio.scalar(node, self.p, "torch")
            if scalar is None:
                return None
            value = scalar
        try:
            spec = parse_torch_spec(value)
        except ValueError as exc:
            self.p.add(node, f"torch: {exc}")
            return None
        if spec.lowest < OLDEST_STABLE_TARGET:
            self.p.add(
                node,
                f"torch: the stable ABI needs torch >= {OLDEST_STABLE_TARGET}, but the lowest version here is {spec.lowest}; raise it",
            )
            return None
        return spec

    def arch_sets(self, node: yaml.Node) -> tuple[ArchSet, ...]:
        named: list[tuple[str, yaml.Node, str]]
        if isinstance(node, yaml.ScalarNode):
            text = yamlio.scalar(node, self.p, "arch-sets")
            named = [("default", node, text)] if text is not None else []
        elif isinstance(node, yaml.MappingNode):
            items = yamlio.mapping(node, self.p, "arch-sets", [k.value for k, _ in node.value])
            named = []
            for key, key_node, value_node in yamlio.iter_items(items or {}):
                if not _ARCH_SET_NAME_RE.match(key):
                    self.p.add(
                        key_node,
                        f"arch-sets: name '{key}' must be lower-case letters, digits, '_' and '.'",
                    )
                    continue
                if isinstance(value_node, yaml.SequenceNode):
                    text = " ".join(
                        v for _, v in yamlio.string_list(value_node, self.p, f"arch-sets.{key}")
                    )
                else:
                    text = yamlio.scalar(value_node, self.p, f"arch-sets.{key}")
                if text is not None:
                    named.append((key, value_node, text))
        else:
            self.p.add(node, "arch-sets must be an arch list or a mapping of names to arch lists")
            return ()
        sets = []
        for name, value_node, text in named:
            try:
                sets.append(ArchSet(name, parse_arch_list(text, source=f"arch-sets.{name}")))
            except ConfigError as exc:
                self.p.add(value_node, exc.message)
        if not sets and not self.p.items:
            self.p.add(
                node, "arch-sets is empty; name at least one arch set, e.g. default: '8.0 9.0+PTX'"
            )
        return tuple(sets)

    def tests(self, node: yaml.Node, torch: TorchSpec | None) -> TestsConfig | None:
        items = yamlio.mapping(node, self.p, "tests", TESTS_KEYS)
        if items is None:
            return None
        path = None
        if (n := self.required(items, "path", node, "tests")) is not None:
            value = yamlio.scalar(n, self.p, "tests.path")
            path = self.folder(n, value, "tests.path") if value is not None else None
        requires = ["pytest"]
        if "requires" in items:
            requires = []
            for item, dep in yamlio.string_list(items["requires"][1], self.p, "tests.requires"):
                try:
                    Requirement(dep)
                except InvalidRequirement:
                    self.p.add(
                        item,
                        f"tests.requires: '{dep}' is not a requirement; write e.g. 'pytest>=8'",
                    )
                    continue
                requires.append(dep)
        versions: list[str] = []
        if "torch" in items:
            for item, value in yamlio.string_list(items["torch"][1], self.p, "tests.torch"):
                try:
                    versions.append(str(Version(value)))
                except InvalidVersion:
                    self.p.add(
                        item, f"tests.torch: '{value}' is not a version; write e.g. '2.13.0'"
                    )
        elif torch is not None:
            versions = [str(v) for v in torch.versions] or [str(torch.lowest)]
        command = DEFAULT_TEST_COMMAND
        if "command" in items:
            words = tuple(
                v for _, v in yamlio.string_list(items["command"][1], self.p, "tests.command")
            )
            if words and "{path}" not in " ".join(words):
                self.p.add(
                    items["command"][1],
                    "tests.command must contain {path}, where the test folder goes",
                )
            command = words or command
        if path is None:
            return None
        return TestsConfig(
            path=path, requires=tuple(requires), torch=tuple(versions), command=command
        )

    def read(self, node: yaml.Node | None) -> Matrix:
        if node is None:
            raise ConfigError(f"{self.p.display} is empty; see docs/matrix.md for its keys")
        items = yamlio.mapping(node, self.p, "the top level", TOP_KEYS)
        if items is None:
            self.p.raise_if_any()
            raise AssertionError  # unreachable: mapping() recorded a problem
        project = project_for(
            items["package"][1] if "package" in items else None, self.root, self.p
        )
        # package: optional beside a pyproject.toml [project]; arch-sets: optional, since
        # --archs or TORCH_CUDA_ARCH_LIST may give them (settings.resolve insists on one).
        required = ("extension", "torch") + (("package",) if project is None else ())
        sections = {key: self.required(items, key, node, "the top level") for key in required}
        sections["package"] = items["package"][1] if "package" in items else None
        sections["arch-sets"] = items["arch-sets"][1] if "arch-sets" in items else None
        package = (
            self.package(sections["package"], project)
            if sections["package"] is not None or project is not None
            else None
        )
        extension = (
            self.extension(sections["extension"]) if sections["extension"] is not None else None
        )
        torch = self.torch(sections["torch"]) if sections["torch"] is not None else None
        arch_sets = (
            self.arch_sets(sections["arch-sets"]) if sections["arch-sets"] is not None else ()
        )
        abi: Literal["stable", "unstable"] = "stable"
        if "abi" in items:
            n = items["abi"][1]
            value = yamlio.scalar(n, self.p, "abi")
            if value == "unstable":
                abi = "unstable"
                if torch is not None and not torch.versions:
                    self.p.add(
                        sections["torch"],
                        "torch: an unstable-ABI matrix builds once per torch version, so list them, e.g. ['2.13.0', '2.14.1']",
                    )
            elif value is not None and value != "stable":
                self.p.add(n, f"abi must be 'stable' or 'unstable', got '{value}'")
        python_abi = "cp310"
        if "python-abi" in items:
            n = items["python-abi"][1]
            value = yamlio.scalar(n, self.p, "python-abi")
            match = _PYTHON_ABI_RE.match(value or "")
            if value is not None and match is None:
                self.p.add(
                    n,
                    f"python-abi must name the oldest CPython of the abi3 wheel, like 'cp310', got '{value}'",
                )
            elif value is not None and match is not None and int(match[1]) < OLDEST_PYTHON_MINOR:
                self.p.add(
                    n,
                    f"python-abi '{value}' is older than any Python torch runs on (3.{OLDEST_PYTHON_MINOR}+); use 'cp3{OLDEST_PYTHON_MINOR}'",
                )
            elif value is not None:
                python_abi = value
        if package is not None and extension is not None and not package.packages:
            package = dataclasses.replace(
                package, packages=discover_packages(self.root, extension.name)
            )
        if package is not None and extension is not None and "." in extension.name:
            top = extension.name.split(".", 1)[0]
            if top not in {p.name for p in package.packages}:
                node_ = items["extension"][1]
                self.p.add(
                    node_,
                    f"extension.name '{extension.name}' is not inside any of package.packages ({', '.join(p.name for p in package.packages) or 'none'}); put the module in one of them",
                )
        tests = self.tests(items["tests"][1], torch) if "tests" in items else None
        cuda = self.cuda(items["cuda"][1]) if "cuda" in items else ("auto",)
        self.p.raise_if_any()
        assert package is not None and extension is not None and torch is not None
        return Matrix(
            path=self.path,
            root=self.root,
            package=package,
            extension=extension,
            abi=abi,
            python_abi=python_abi,
            torch=torch,
            cuda=cuda,
            arch_sets=arch_sets,
            tests=tests,
        )


def load_matrix(path: Path) -> Matrix:
    display = str(path)
    reader = _Reader(path.resolve(), display)
    return reader.read(yamlio.load(path, display))
