"""Turning matrix.yaml's node tree into the model of model.py: every key checked, every
problem collected with its line, all reported at once.

The keys, which are required and their defaults come from the model's fields
(configuration/matrix/model.py); this module adds what the model cannot say: how each key's value is
checked and converted (folders exist, globs match, arch lists parse, versions are PEP 440)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

from wheelforge.configuration.abi import ABIS, STABLE
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix import yamlio
from wheelforge.configuration.matrix.discovery import discover_packages
from wheelforge.configuration.matrix.extensions import ExtensionsReader
from wheelforge.configuration.matrix.keys import (
    ARCH_SET_NAME_RE,
    CUDA_RE,
    PYTHON_ABI_RE,
)
from wheelforge.configuration.matrix.model import (
    ExtensionConfig,
    GenerateStep,
    HeaderLibraryConfig,
    Matrix,
    TestsConfig,
)
from wheelforge.configuration.matrix.modelreader import KeyReader, Section
from wheelforge.configuration.matrix.packagereader import PackageReader
from wheelforge.configuration.matrix.pyproject import project_for
from wheelforge.configuration.matrix.steps import StepsReader
from wheelforge.configuration.matrix.torchspec import (
    OLDEST_STABLE_TARGET,
    TorchSpec,
    parse_torch_spec,
)
from wheelforge.foundation import fsutil, log, numbers
from wheelforge.foundation.errors import ConfigError

# torch needs CPython 3.10 or newer (torch 2.9+): an abi3 floor below cp310 is valid, but warned of.
OLDEST_PYTHON_MINOR = 10
# The limited API (abi3) began with CPython 3.2 (PEP 384): the oldest floor a wheel can name.
OLDEST_LIMITED_API_MINOR = 2


class MatrixReader(ExtensionsReader, StepsReader, PackageReader):
    """Turns the node tree into the model, collecting problems."""

    def __init__(self, path: Path, display: str) -> None:
        super().__init__(yamlio.Problems(path, display), path.parent)
        self.path = path
        self.torch_read: tuple[yaml.Node, TorchSpec | None] | None = None
        self.generated_refs = []

    def readers(self, model: type) -> Mapping[str, KeyReader]:
        """The keys whose conversion is special; the rest (summary, license, module-init, a
        source's files, wheel-variants and its keys, ...) are read by their type."""
        if model is Matrix:
            return {
                "package": self.package,
                "torch": self.torch,
                "arch_sets": self.arch_sets,
                "abi": self.abi,
                "python_abi": self.python_abi,
                "tests": self.tests,
                "cuda": self.cuda,
                "size_budget": self.size,
                "memory_limit": self.size,
                "compile_cache": self.scalar,  # its values: settings.py, with the environment's
                "extensions": self.section_list(ExtensionConfig),
                "header_libraries": self.section_list(HeaderLibraryConfig),
                "generate": self.section_list(GenerateStep),
            }
        if model is TestsConfig:
            return {
                "path": self.test_path,
                "requires": self.checked_list(self.requirement("pytest>=8")),
                "torch": self.checked_list(self.test_torch),
                "command": self.test_command,
            }
        return super().readers(model)

    # -- the top level ------------------------------------------------------------------------

    def cuda(self, node: yaml.Node, where: str) -> tuple[str, ...]:
        entries = self.strings(node, where)
        for value in entries:
            if value != "auto" and not CUDA_RE.match(value):
                self.problems.add(
                    node, f"{where}: '{value}' is neither 'auto' nor a CUDA release like '13.0'"
                )
        if len(set(entries)) != len(entries):
            self.problems.add(node, f"{where}: a release appears twice")
        return entries or ("auto",)

    def torch(self, node: yaml.Node, where: str) -> TorchSpec | None:
        spec = self._torch(node, where)
        self.torch_read = (node, spec)
        return spec

    def _torch(self, node: yaml.Node, where: str) -> TorchSpec | None:
        value: str | list[str]
        if isinstance(node, yaml.SequenceNode):
            value = list(self.strings(node, where))
        else:
            scalar = self.scalar(node, where)
            if scalar is None:
                return None
            value = scalar
        try:
            spec = parse_torch_spec(value)
        except ValueError as exc:
            self.problems.add(node, f"{where}: {exc}")
            return None
        return spec

    def check_torch_floor(self, read: Section, extensions: tuple[ExtensionConfig, ...]) -> None:
        """torch's stable ABI starts at 2.9: a matrix whose binaries use torch names none below
        it. One whose binaries use none (every extension `kind: plain`, bitsandbytes') or that
        has none (a pure-Python wheel: kernel-builder's torch-noarch) is not tied to a torch ABI:
        its torch is the project's own range (Matrix.uses_torch)."""
        torch = read.values.get("torch")
        if not isinstance(torch, TorchSpec) or torch.lowest >= OLDEST_STABLE_TARGET:
            return
        # no shared object (a kernel-builder torch-noarch kernel), or none that uses torch
        if not any(e.links_torch for e in extensions):
            return
        self.problems.add(
            read.items["torch"][1],
            f"torch: the stable ABI needs torch >= {OLDEST_STABLE_TARGET}, but the lowest version "
            f"here is {torch.lowest}; raise it (only a matrix whose extensions are all kind: "
            "plain, using no torch, may name an older one)",
        )

    def arch_sets(self, node: yaml.Node, where: str) -> tuple[ArchSet, ...]:
        named: list[tuple[str, yaml.Node, str]]  # name, value node, where in messages
        if isinstance(node, yaml.ScalarNode):
            named = [("default", node, where)]
        elif isinstance(node, yaml.MappingNode):
            names = [k.value for k, _ in node.value]
            items = yamlio.mapping(node, self.problems, where, names)
            named = []
            for name, key_node, value_node in yamlio.iter_items(items or {}):
                if ARCH_SET_NAME_RE.match(name):
                    named.append((name, value_node, f"{where}.{name}"))
                else:
                    self.problems.add(
                        key_node,
                        f"{where}: name '{name}' must be lower-case letters, digits, '_' and '.'",
                    )
        else:
            self.problems.add(
                node, f"{where} must be an arch list or a mapping of names to arch lists"
            )
            return ()
        sets = []
        for name, value_node, value_where in named:
            text = self.arch_set_text(value_node, value_where)
            if text is None:
                continue
            try:
                sets.append(ArchSet(name, parse_arch_list(text, source=f"{where}.{name}")))
            except ConfigError as exc:
                self.problems.add(value_node, exc.message)
        if not sets and not self.problems.items:
            self.problems.add(
                node, f"{where} is empty; name at least one arch set, e.g. default: '8.0 9.0+PTX'"
            )
        return tuple(sets)

    def arch_set_text(self, node: yaml.Node, where: str) -> str | None:
        if isinstance(node, yaml.SequenceNode):
            return " ".join(self.strings(node, where))
        return self.scalar(node, where)

    def abi(self, node: yaml.Node, where: str) -> str | None:
        value = self.choice(tuple(ABIS))(node, where)
        if value is not None and ABIS[value].per_torch and self.torch_read is not None:
            torch_node, torch = self.torch_read
            if torch is not None and not torch.versions and not torch.installed:
                self.problems.add(
                    torch_node,
                    "torch: an unstable-ABI matrix builds once per torch version, so list them, e.g. "
                    "['2.13.0', '2.14.1'], or write 'installed' for the build Python's torch",
                )
        return value

    def python_abi(self, node: yaml.Node, where: str) -> str | None:
        value = self.scalar(node, where)
        match = PYTHON_ABI_RE.match(value or "")
        if value is not None and match is None:
            self.problems.add(
                node,
                (
                    f"{where} must name the oldest CPython of the abi3 wheel, like 'cp310', got "
                    f"'{value}'"
                ),
            )
            return None
        if value is None or match is None:
            return value
        minor = int(match[1])
        if minor < OLDEST_LIMITED_API_MINOR:
            self.problems.add(
                node,
                f"{where} '{value}' is older than the limited API (CPython 3.{OLDEST_LIMITED_API_MINOR}, PEP 384); "
                f"write 'cp3{OLDEST_LIMITED_API_MINOR}' or newer, e.g. 'cp3{OLDEST_PYTHON_MINOR}'",
            )
            return None
        if minor < OLDEST_PYTHON_MINOR:
            # Valid (pytorch/extension-cpp writes Py_LIMITED_API=0x03090000) and harmless: the
            # wheel's tag admits Pythons torch itself does not install on.
            line = node.start_mark.line + 1
            log.warning(
                f"{self.problems.display}:{line}: {where} '{value}' is older than any Python torch runs on "
                f"(3.{OLDEST_PYTHON_MINOR}+): the wheel is tagged {value}-abi3, but only 3.{OLDEST_PYTHON_MINOR}+ can install torch"
            )
        return value

    def tests(self, node: yaml.Node, where: str) -> TestsConfig | None:
        read = self.section(node, TestsConfig, where)
        torch = self.torch_read[1] if self.torch_read is not None else None
        if read is not None and "torch" not in read.values:
            # the default: the matrix's torch list, or the lowest version of its range
            # (none for `torch: installed`: the test runs borrow a torch, --torch-from)
            default = [str(v) for v in torch.versions] or [str(torch.lowest)] if torch else []
            default = [] if torch and torch.installed else default
            read.values["torch"] = tuple(default)
        return self.build(TestsConfig, read)

    def test_path(self, node: yaml.Node, where: str) -> Path | None:
        value = self.scalar(node, where)
        return self.folder(node, value, where) if value is not None else None

    def test_torch(self, node: yaml.Node, value: str, where: str) -> str | None:
        try:
            return str(numbers.version(value))
        except InvalidVersion:
            self.problems.add(node, f"{where}: '{value}' is not a version; write e.g. '2.13.0'")
            return None

    def test_command(self, node: yaml.Node, where: str) -> tuple[str, ...] | None:
        words = self.strings(node, where)
        if words and "{path}" not in " ".join(words):
            self.problems.add(node, f"{where} must contain {{path}}, where the test folder goes")
        return words or None

    def installed_needs_unstable(self, read: Section) -> None:
        """`torch: installed` names no version to target: the unstable ABI's only."""
        torch = read.values.get("torch")
        flavour = ABIS.get(str(read.values.get("abi") or STABLE.name))
        if flavour is None or flavour.per_torch or not isinstance(torch, TorchSpec):
            return
        if torch.installed:
            self.problems.add(
                read.items["torch"][1],
                "torch: 'installed' is for the unstable ABI (abi: unstable); a stable-ABI wheel "
                "targets a version: write the lowest torch it loads on, e.g. '>=2.10'",
            )

    def check_limited_apis(self, read: Section, extensions: tuple[ExtensionConfig, ...]) -> None:
        """An abi3 wheel's extension's ``limited-api`` is no newer than python-abi (the tag
        promises every CPython from python-abi up)."""
        key = "extension" if "extension" in read.items else "extensions"
        if key not in read.items:
            return
        node = read.items[key][1]
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        abi = str(read.values.get("python_abi") or "cp310")
        flavour = ABIS.get(str(read.values.get("abi") or STABLE.name))
        for i, (item, extension) in enumerate(zip(items, extensions, strict=False)):
            value, at = extension.limited_api, yamlio.key_node(item, "limited-api")
            if value is None or at is None:
                continue
            where = key if key == "extension" else f"extensions[{i}]"
            minor = int(value.partition(".")[2] or OLDEST_LIMITED_API_MINOR)
            if (
                flavour is not None
                and flavour.abi3
                and PYTHON_ABI_RE.match(abi)
                and minor > int(abi[3:])
            ):
                self.problems.add(
                    at,
                    f"{where}.limited-api '{value}' is newer than python-abi '{abi}': the abi3 "
                    f"wheel would promise CPythons it does not load on; write python-abi: "
                    f"cp3{minor}, or remove limited-api",
                )

    def check_torch_targets(self, read: Section, extensions: tuple[ExtensionConfig, ...]) -> None:
        """Each ``torch-target`` lies within the matrix's torch versions (a stable-ABI matrix's
        only); the highest becomes the wheel's floor (TorchSpec.floor), and the tests' default
        torch follows it."""
        key = "extension" if "extension" in read.items else "extensions"
        if key not in read.items:
            return
        node = read.items[key][1]
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        torch = read.values.get("torch")
        flavour = ABIS.get(str(read.values.get("abi") or STABLE.name))
        targets = []
        for i, (item, extension) in enumerate(zip(items, extensions, strict=False)):
            target, at = extension.torch_target, yamlio.key_node(item, "torch-target")
            if target is None or at is None or not isinstance(torch, TorchSpec):
                continue
            where = key if key == "extension" else f"extensions[{i}]"
            shown = f"{target[0]}.{target[1]}"
            if flavour is not None and not flavour.torch_target:
                self.problems.add(
                    at,
                    f"{where}.torch-target: an unstable-ABI wheel is built against each torch "
                    "it lists and has no target version; remove torch-target, or use abi: stable",
                )
                continue
            problem = _outside(target, torch)
            if problem is not None:
                self.problems.add(
                    at, f"{where}.torch-target '{shown}' is {problem}; name a torch within it"
                )
                continue
            targets.append(target)
        if not targets or not isinstance(torch, TorchSpec):
            return
        floored = dataclasses.replace(torch, highest_target=max(targets))
        read.values["torch"] = floored
        tests = read.values.get("tests")
        tests_node = read.items.get("tests")
        # The tests' default torch (no tests.torch): the matrix's torch from the floor up.
        defaulted = tests_node is not None and yamlio.key_node(tests_node[1], "torch") is None
        if isinstance(tests, TestsConfig) and defaulted:
            kept = [v for v in floored.versions if (v.major, v.minor) >= floored.floor]
            floor = f"{floored.floor[0]}.{floored.floor[1]}"
            torches = tuple(str(v) for v in kept) or (floor,)
            read.values["tests"] = dataclasses.replace(tests, torch=torches)
        elif isinstance(tests, TestsConfig) and tests_node is not None:
            major, minor = floored.floor
            below = [t for t in tests.torch if numbers.version(t).release[:2] < floored.floor]
            if below:
                self.problems.add(
                    yamlio.key_node(tests_node[1], "torch") or tests_node[1],
                    f"tests.torch: the wheel requires torch>={major}.{minor} (the highest "
                    f"torch-target), so it does not install on {', '.join(below)}; test on "
                    f"{major}.{minor} or newer",
                )

    def read(self, node: yaml.Node | None) -> Matrix:
        if node is None:
            raise ConfigError(f"{self.problems.display} is empty; see docs/matrix.md for its keys")
        package_node = yamlio.key_node(node, "package")
        self.project = project_for(package_node, self.root, self.problems)
        read = self.section(node, Matrix, "the top level", prefix="")
        if read is None:
            self.problems.raise_if_any()
            raise AssertionError  # unreachable: mapping() recorded a problem
        self.installed_needs_unstable(read)
        flavour = ABIS.get(str(read.values.get("abi")))
        if flavour is not None and not flavour.abi3 and "python-abi" in read.items:
            self.problems.add(
                read.items["python-abi"][1],
                "python-abi sets the floor of stable-ABI (abi3) wheels; an unstable-ABI wheel is "
                "tagged for the CPython that builds it, so remove python-abi or use abi: stable",
            )
        if package_node is None and self.project is not None:
            read.values["package"] = self.package(None, "package")
        elif package_node is None:
            self.problems.add(
                node, "the top level needs 'package' (or a pyproject.toml with [project])"
            )
        extensions = self.extension_list(read)
        package = read.values.get("package")
        if package is not None and extensions and not package.packages:
            names = [e.name for e in extensions]
            package = dataclasses.replace(package, packages=discover_packages(self.root, *names))
            read.values["package"] = package
        key = "extension" if "extension" in read.items else "extensions"
        for i, extension in enumerate(extensions):
            # No package listed or found: the module lands in a namespace package (PEP 420), a
            # folder without __init__.py, as setuptools builds ext_modules without packages=.
            if package is None or "." not in extension.name or not package.packages:
                continue
            top = extension.name.split(".", 1)[0]
            if top not in {p.name for p in package.packages}:
                where = "extension" if key == "extension" else f"extensions[{i}]"
                self.problems.add(
                    read.items[key][1],
                    (
                        f"{where}.name '{extension.name}' is not inside any of package.packages "
                        f"({', '.join(p.name for p in package.packages) or 'none'}); put the module"
                        " in one of them"
                    ),
                )
        self.check_torch_targets(read, extensions)
        self.check_torch_floor(read, extensions)
        self.check_limited_apis(read, extensions)
        self.check_steps(read, extensions)
        self.check_header_libraries(read)
        variants = read.values.get("wheel_variants")
        problem = variants.null_problem(read.values.get("arch_sets") or ()) if variants else None
        if problem is not None:
            self.problems.add(read.items["wheel-variants"][1], problem)
        self.problems.raise_if_any()
        matrix = self.build(Matrix, read, path=self.path, root=self.root)
        assert matrix is not None  # every required key was read, or a problem was raised
        return matrix


def _outside(target: tuple[int, int], torch: TorchSpec) -> str | None:
    """Why *target* lies outside the matrix's torch versions, or None when within them."""
    lowest = f"{torch.target[0]}.{torch.target[1]}"
    if target < torch.target:
        return f"below the lowest torch of the matrix ({lowest}): torch: '{torch.text}'"
    if torch.versions:
        highest = max(torch.versions)
        if target > (highest.major, highest.minor):
            return f"above the newest torch of the matrix ({highest}): torch: '{torch.text}'"
    elif not torch.specifier.contains(Version(f"{target[0]}.{target[1]}"), prereleases=True):
        return f"outside the matrix's torch range '{torch.text}'"
    return None


def load_matrix(path: Path, *, display: str | None = None) -> Matrix:
    """The matrix in *path* (its folder is the project's); *display* names it in errors (init
    checks what it writes under a staged name, shown as the matrix.yaml it becomes)."""
    display = str(path) if display is None else display
    reader = MatrixReader(fsutil.resolved(path), display)
    with fsutil.gc_paused():
        return reader.read(yamlio.load(path, display))
