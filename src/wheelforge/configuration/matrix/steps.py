"""Reading what a build needs besides its sources: the header libraries (``header-libraries``)
and the programs that write sources before compiling (``generate``), and the checks across
keys they take part in: every ``{step}`` a source, an include folder, an input or a command
names is a step, every glob of a step's outputs matches one, and a header library comes from
one place. The rest of matrix.yaml is read by configuration/matrix/load.py, which builds on this."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import yaml
from packaging.requirements import InvalidRequirement, Requirement

from wheelforge.configuration.matrix.keys import (
    GENERATED_RE,
    HEADER_LIBRARY_RE,
    SOURCE_SUFFIXES,
    STEP_NAME_RE,
)
from wheelforge.configuration.matrix.model import (
    ExtensionConfig,
    GenerateStep,
    HeaderLibraryConfig,
)
from wheelforge.configuration.matrix.modelreader import KeyReader, ModelReader, Section

# The placeholders a step's command has besides the steps' names.
STEP_PLACEHOLDERS = ("python", "project", "out")
_GLOB_CHARS = frozenset("*?[")


class StepsReader(ModelReader):
    """The header-libraries and generate sections, and their checks across keys."""

    # Globs of generate steps' outputs ({step}/GLOB) the sources name: (node, glob, where),
    # collected while the extensions are read, checked once the steps are.
    generated_refs: list[tuple[yaml.Node, str, str]]

    def readers(self, model: type) -> Mapping[str, KeyReader]:
        if model is HeaderLibraryConfig:
            return {
                "name": self.checked_scalar(
                    lambda v: bool(HEADER_LIBRARY_RE.match(v)),
                    "must be lower-case letters, digits, '.', '_' and '-' (e.g. 'cutlass')",
                ),
                "path": self.library_folder,
                "pypi": self.pinned_requirement,
            }
        if model is GenerateStep:
            return {
                "name": self.step_name,
                "run": self.command,
                "inputs": self.flag_list,
                "outputs": self.checked_list(self.output),
                "timeout": self.seconds,
            }
        return super().readers(model)

    # -- header-libraries ---------------------------------------------------------------------

    def library_folder(self, node: yaml.Node, where: str) -> Path | None:
        value = self.scalar(node, where)
        return self.folder(node, value, where) if value is not None else None

    def pinned_requirement(self, node: yaml.Node, where: str) -> str | None:
        value = self.scalar(node, where)
        if value is None:
            return None
        try:
            requirement = Requirement(value)
        except InvalidRequirement:
            requirement = None
        specs = list(requirement.specifier) if requirement else []
        if requirement is None or len(specs) != 1 or specs[0].operator not in ("==", "==="):
            self.problems.add(
                node,
                f"{where} '{value}' must name one version with '==', e.g. 'nvidia-cutlass==4.2.0.0' "
                "(the headers compiled must be the ones recorded)",
            )
            return None
        return value

    def check_header_libraries(self, read: Section) -> None:
        """Each library from one place (``path`` or ``pypi``), names unique, and the include
        folders of a ``path`` present."""
        libraries: Sequence[HeaderLibraryConfig] = read.values.get("header_libraries") or ()
        node = read.items["header-libraries"][1] if "header-libraries" in read.items else None
        seen: set[str] = set()
        for i, lib in enumerate(libraries):
            where = f"header-libraries[{i}]"
            if lib.name in seen:
                self.problems.add(node, f"{where}: '{lib.name}' is listed twice")
            seen.add(lib.name)
            if (lib.path is None) == (lib.pypi is None):
                self.problems.add(
                    node,
                    f"{where} ('{lib.name}') needs one of 'path' (a folder of the project) and "
                    "'pypi' (a package that ships the headers)",
                )
                continue
            if lib.path is None:
                continue
            for folder in lib.include:
                if not (lib.path / folder).is_dir():
                    self.problems.add(
                        node,
                        f"{where}.include: '{folder}' is not a folder in {lib.path} (is the "
                        "submodule checked out? git submodule update --init)",
                    )

    # -- generate -----------------------------------------------------------------------------

    def step_name(self, node: yaml.Node, where: str) -> str | None:
        value = self.scalar(node, where)
        if value is not None and (not STEP_NAME_RE.match(value) or value in STEP_PLACEHOLDERS):
            self.problems.add(
                node,
                f"{where} '{value}' must be lower-case letters, digits and '_', starting with a "
                f"letter, and none of {', '.join(STEP_PLACEHOLDERS)}",
            )
            return None
        return value

    def command(self, node: yaml.Node, where: str) -> tuple[str, ...] | None:
        words = self.flag_list(node, where)
        if not words and isinstance(node, yaml.SequenceNode):
            self.problems.add(
                node, f"{where} is empty; give the command, e.g. ['{{python}}', 'gen.py']"
            )
        return words or None

    def output(self, node: yaml.Node, value: str, where: str) -> str | None:
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or _GLOB_CHARS & set(value) or not value:
            self.problems.add(
                node,
                f"{where}: '{value}' must be a file name relative to the step's output folder, "
                "without '..' or glob characters (ninja must know every output before it runs)",
            )
            return None
        return path.as_posix()

    def seconds(self, node: yaml.Node, where: str) -> int | None:
        value = self.scalar(node, where)
        if value is None:
            return None
        if not value.isascii() or not value.isdigit() or len(value) > 7 or int(value) < 1:
            self.problems.add(
                node, f"{where} must be a whole number of seconds (1 or more), got '{value}'"
            )
            return None
        return int(value)

    def check_steps(self, read: Section, extensions: Sequence[ExtensionConfig]) -> None:
        """Every ``{step}`` names a step, and a glob of its outputs matches sources among them;
        step names are unique; each input glob matches a file."""
        steps: Sequence[GenerateStep] = read.values.get("generate") or ()
        node = read.items["generate"][1] if "generate" in read.items else None
        names: dict[str, GenerateStep] = {}
        for i, step in enumerate(steps):
            if step.name in names:
                self.problems.add(node, f"generate[{i}]: the name '{step.name}' is used twice")
            names[step.name] = step
        for i, step in enumerate(steps):
            where = f"generate[{i}]"
            for word in step.run:
                for ref in _placeholders(word):
                    if ref not in names and ref not in STEP_PLACEHOLDERS:
                        self.problems.add(node, _unknown(f"{where}.run", ref, names))
            for pattern in step.inputs:
                if (match := GENERATED_RE.match(pattern)) is not None:
                    if match[1] not in names or match[1] == step.name:
                        self.problems.add(node, _unknown(f"{where}.inputs", match[1], names))
                elif Path(pattern).is_absolute() or not any(self.root.glob(pattern)):
                    self.problems.add(
                        node,
                        f"{where}.inputs: '{pattern}' matches no file (globs are relative to "
                        f"{self.problems.display})",
                    )
        for item, pattern, where in self.generated_refs:
            match = GENERATED_RE.match(pattern)
            assert match is not None  # collected because it matched
            named = names.get(match[1])
            if named is None:
                self.problems.add(item, _unknown(where, match[1], names))
                continue
            found = fnmatch.filter(named.outputs, match[2] or "*")
            if not found:
                self.problems.add(
                    item,
                    f"{where}: '{pattern}' matches none of generate step '{named.name}''s outputs "
                    f"({', '.join(named.outputs)})",
                )
            elif bad := [f for f in found if PurePosixPath(f).suffix not in SOURCE_SUFFIXES]:
                self.problems.add(
                    item,
                    f"{where}: '{pattern}' matches {bad[0]}, which is not a source "
                    f"({', '.join(SOURCE_SUFFIXES)}); narrow the glob",
                )
        for i, ext in enumerate(extensions):
            for folder in ext.include_dirs:
                match = GENERATED_RE.match(folder.as_posix()) if not folder.is_absolute() else None
                if match is not None and match[1] not in names:
                    self.problems.add(
                        read.items.get("extensions", read.items.get("extension", (None, None)))[1],
                        _unknown(f"extensions[{i}].include-dirs", match[1], names),
                    )


def _placeholders(word: str) -> list[str]:
    """The ``{name}`` placeholders in a command word."""
    out = []
    rest = word
    while "{" in rest and "}" in rest.split("{", 1)[1]:
        inside, rest = rest.split("{", 1)[1].split("}", 1)
        out.append(inside)
    return out


def _unknown(where: str, name: str, steps: Mapping[str, GenerateStep]) -> str:
    known = ", ".join(steps) or "none"
    return (
        f"{where}: '{{{name}}}' names no generate step (steps: {known}; placeholders: "
        f"{', '.join('{' + p + '}' for p in STEP_PLACEHOLDERS)})"
    )
