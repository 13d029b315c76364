"""The compile steps of a variant: every extension's sources (a generate step's outputs among
them) with their arch limits, one step per source and flag set with the arch set it compiles for, and
where each object lies. A source two extensions compile with the same flags is compiled once;
otherwise each extension's objects lie in a folder of its own, so they never collide."""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Callable
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, ArchSpec
from wheelforge.configuration.matrix.keys import GENERATED_RE
from wheelforge.configuration.matrix.model import ExtensionConfig, Matrix, SourceSpec
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning import reproducible
from wheelforge.planning.plan import CompileStep, FlagSet, Rule
from wheelforge.planning.variants import Variant

_RULES: dict[str, Rule] = {".cu": "nvcc", ".cpp": "cxx", ".cc": "cxx", ".cxx": "cxx", ".c": "cc"}


def sources(
    matrix: Matrix, ext: ExtensionConfig, generated: Callable[[str], Path]
) -> dict[Path, tuple[ArchSpec, ...] | None]:
    """Every source of *ext* and its arch limits; an entry with ``archs`` wins over a plain
    glob. A glob of a generate step's outputs (``{step}/GLOB``) matches its declared outputs
    in *generated*'s folder for it: they do not exist before the step runs."""
    found: dict[Path, tuple[ArchSpec, ...] | None] = {}
    limited_by: dict[Path, str] = {}
    for spec in ext.sources:
        for m in _matches(matrix, spec, generated):
            if spec.archs is None:
                found.setdefault(m, ext.archs)  # the extension's own archs, if it has them
                continue
            if m in limited_by and limited_by[m] != spec.pattern:
                raise ConfigError(
                    f"{matrix.path}: extension.sources: {m.name} is limited by both '{limited_by[m]}' and "
                    f"'{spec.pattern}'; give each source one arch limit"
                )
            limited_by[m] = spec.pattern
            found[m] = spec.archs
    return found


def _matches(matrix: Matrix, spec: SourceSpec, generated: Callable[[str], Path]) -> list[Path]:
    if (ref := GENERATED_RE.match(spec.pattern)) is not None:
        step = matrix.step(ref[1])
        outputs = fnmatch.filter(step.outputs, ref[2] or "*") if step else []
        matches = [generated(ref[1]) / name for name in sorted(outputs)]
    else:
        matches = sorted(p.resolve() for p in matrix.root.glob(spec.pattern) if p.is_file())
    if not matches:
        raise ConfigError(f"{matrix.path}: extension.sources: '{spec.pattern}' matches no file")
    return matches


def own_flags(
    matrix: Matrix, ext: ExtensionConfig, generated: Callable[[str], Path]
) -> dict[Path, tuple[str, ...]]:
    """The flags of *ext*'s sources that have their own (``{files: GLOB, flags: [...]}``), in
    the order the entries give them."""
    found: dict[Path, tuple[str, ...]] = {}
    for spec in ext.sources:
        if spec.flags:
            for m in _matches(matrix, spec, generated):
                found[m] = (*found.get(m, ()), *spec.flags)
    return found


# source, rule, its flags, its arch limit, its own flags
_StepKey = tuple[Path, str, str, ArchSet | None, tuple[str, ...]]


class Steps:
    """The compile steps of every extension: a source two extensions compile with the same
    flags and -gencode is compiled once (the first one's object), otherwise each extension's
    objects lie in a folder of its own (objects of different extensions never collide)."""

    def __init__(self, variant: Variant, matrix: Matrix, build_dir: Path, gen: Path) -> None:
        self.variant, self.matrix, self.build_dir, self.gen = variant, matrix, build_dir, gen
        self.steps: list[CompileStep] = []
        self.left_out: list[Path] = []
        self.by_key: dict[_StepKey, CompileStep] = {}

    def add(
        self,
        index: int,
        sources: dict[Path, tuple[ArchSpec, ...] | None],
        flags: FlagSet,
        objects: Path,
        own: dict[Path, tuple[str, ...]] | None = None,
    ) -> list[Path]:
        """The steps of extension *index* (its objects under *objects*), and its objects, one
        per source, each with the arch set it compiles for when limited (the one place that is
        decided; its -gencode flags are that arch set's, ArchSet.gencode); a limited source with
        no arch in common with the arch set is left out. *own*: the flags of a source of its
        own (``$source_flags``, after the extension's)."""
        linked = []
        variant = self.variant
        for source, limits in sources.items():
            rule = _RULES[source.suffix]
            limited = (
                variant.arch_set.limit(limits) if limits is not None and rule == "nvcc" else None
            )
            if limited is not None and not limited.specs:
                if source not in self.left_out:
                    self.left_out.append(source)
                continue
            extra = (own or {}).get(source, ())
            key = (source, rule, getattr(flags, rule), limited, extra)
            if (known := self.by_key.get(key)) is not None:
                linked.append(known.object)
                continue
            name = reproducible.source_name(source, self._root_of(source))
            seeds = (
                reproducible.nvcc_source_flags(name, variant.toolkit.version)
                if rule == "nvcc"
                else reproducible.host_source_flags(name)
            )
            step = CompileStep(
                source=source,
                object=objects / (name + ".o"),
                rule=rule,
                arch_set=limited,
                flags=shlex.join((*seeds, *extra)),
                flag_set=index,
            )
            self.by_key[key] = step
            self.steps.append(step)
            linked.append(step.object)
        return linked

    def _root_of(self, source: Path) -> Path:
        """What an object is named relative to: the generated files' folder, the build folder
        (a generate step's output), else the project."""
        if source.is_relative_to(self.gen):
            return self.gen
        if source.is_relative_to(self.build_dir):
            return self.build_dir
        return self.matrix.root
