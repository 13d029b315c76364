"""Turning matrix.yaml's node tree into the model of matrix.py: every key checked, every
problem collected with its line, all reported at once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.configuration import yamlio
from wheelforge.configuration.archs import ArchSet, ArchSpec, parse_arch_list
from wheelforge.configuration.matrix import (
    DEFAULT_TEST_COMMAND,
    ExtensionConfig,
    Matrix,
    PackageConfig,
    SourceSpec,
    TestsConfig,
)
from wheelforge.configuration.torchspec import OLDEST_STABLE_TARGET, TorchSpec, parse_torch_spec
from wheelforge.foundation.errors import ConfigError

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
_NAME_RE = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
_ARCH_SET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.]*$")
_PYTHON_ABI_RE = re.compile(r"^cp3(\d{1,2})$")

TOP_KEYS = (
    "package", "extension", "abi", "python-abi", "torch", "cuda", "arch-sets", "tests",
    "compile-cache",
)  # fmt: skip
COMPILE_CACHES = ("auto", "sccache", "ccache", "none")
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
)
EXTENSION_KEYS = ("name", "sources", "include-dirs", "cxx-flags", "nvcc-flags", "module-init")


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

    def package(self, node: yaml.Node) -> PackageConfig | None:
        items = yamlio.mapping(node, self.p, "package", PACKAGE_KEYS)
        if items is None:
            return None
        name = version = None
        if (n := self.required(items, "name", node, "package")) is not None:
            name = yamlio.scalar(n, self.p, "package.name")
            if name is not None and not _NAME_RE.match(name):
                self.p.add(
                    n,
                    f"package.name '{name}' is not a valid distribution name; use letters, digits, '-', '_' and '.'",
                )
                name = None
        if (n := self.required(items, "version", node, "package")) is not None:
            version = yamlio.scalar(n, self.p, "package.version")
            if version is not None:
                try:
                    version = str(Version(version))
                except InvalidVersion:
                    self.p.add(
                        n,
                        f"package.version '{version}' is not a PEP 440 version; write e.g. '1.2.0'",
                    )
                    version = None
        summary = ""
        if "summary" in items:
            summary = yamlio.scalar(items["summary"][1], self.p, "package.summary") or ""
        license_ = None
        if "license" in items:
            license_ = yamlio.scalar(items["license"][1], self.p, "package.license")
        requires_python = None
        if "requires-python" in items:
            n = items["requires-python"][1]
            requires_python = yamlio.scalar(n, self.p, "package.requires-python")
            if requires_python is not None:
                try:
                    SpecifierSet(requires_python)
                except InvalidSpecifier:
                    self.p.add(
                        n,
                        f"package.requires-python '{requires_python}' is not a version range; write e.g. '>=3.10'",
                    )
        dependencies = []
        if "dependencies" in items:
            for item, dep in yamlio.string_list(
                items["dependencies"][1], self.p, "package.dependencies"
            ):
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
        packages = []
        if (n := self.required(items, "packages", node, "package")) is not None:
            for item, value in yamlio.string_list(n, self.p, "package.packages"):
                folder = self.folder(item, value, "package.packages")
                if folder is not None and not (folder / "__init__.py").is_file():
                    self.p.add(
                        item,
                        f"package.packages: '{value}' has no __init__.py; name a Python package folder",
                    )
                elif folder is not None:
                    packages.append(folder)
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
        )

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
                    f"extension.name '{name}' must be a dotted module name inside a package, e.g. 'mypkg._C'",
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
        flags = {}
        for key in ("cxx-flags", "nvcc-flags"):
            values = []
            if key in items:
                values = [
                    v for _, v in yamlio.string_list(items[key][1], self.p, f"extension.{key}")
                ]
            flags[key] = tuple(values)
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
        sections = {
            key: self.required(items, key, node, "the top level")
            for key in ("package", "extension", "torch", "arch-sets")
        }
        package = self.package(sections["package"]) if sections["package"] is not None else None
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
            if value is not None and (match is None or int(match[1]) < 2):
                self.p.add(
                    n,
                    f"python-abi must name the oldest CPython of the abi3 wheel, like 'cp310', got '{value}'",
                )
            elif value is not None:
                python_abi = value
        if package is not None and extension is not None:
            top = extension.name.split(".", 1)[0]
            if top not in {p.name for p in package.packages}:
                node_ = items["extension"][1]
                self.p.add(
                    node_,
                    f"extension.name '{extension.name}' is not inside any of package.packages ({', '.join(p.name for p in package.packages) or 'none'}); put the module in one of them",
                )
        compile_cache = None
        if "compile-cache" in items:
            n = items["compile-cache"][1]
            value = yamlio.scalar(n, self.p, "compile-cache")
            if value is not None and value not in COMPILE_CACHES:
                self.p.add(
                    n, f"compile-cache must be one of {', '.join(COMPILE_CACHES)}, got '{value}'"
                )
            compile_cache = value
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
            compile_cache=compile_cache,
        )


def load_matrix(path: Path) -> Matrix:
    display = str(path)
    reader = _Reader(path.resolve(), display)
    return reader.read(yamlio.load(path, display))
