"""The one writer of ``wheelforge init``: a CapturedBuild (from any front door) as a commented
matrix.yaml, and what needs a hand.

It decides what the captured build leaves open, from the project's own words where they exist:
the ABI (the sources' headers), ``module-init`` (whether the sources define ``PyInit``), the
torch (``--torch``, else the project's stable-ABI target, else the build Python's torch), the
arch sets (``--archs``, else the project's arch flags, else ``TORCH_CUDA_ARCH_LIST``), sources
written as globs where a glob names exactly the same files. A source that matches no file is
refused with the list, before anything is written."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from wheelforge.configuration.abi import STABLE, UNSTABLE, Abi
from wheelforge.configuration.archs import ArchSpec
from wheelforge.configuration.importers.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
    GeneratedFile,
    Refusal,
)
from wheelforge.configuration.importers.flags import arch_text, merge_archs
from wheelforge.configuration.importers.packagesection import (
    FROM_PYPROJECT,
    OLDEST_PYTHON,
    package_section,
)
from wheelforge.configuration.importers.testsuite import tests_section
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES
from wheelforge.foundation.errors import ConfigError

_STABLE_RE = re.compile(r"torch/csrc/stable/|STABLE_TORCH_LIBRARY")
# A source that defines its module's init function itself: wheelforge must not generate one.
_OWN_INIT_RE = re.compile(
    r"\bPyInit_\w+|PYBIND11_MODULE\s*\(|REGISTER_EXTENSION\s*\(|PyModule_Create"
)
# The torch a stable matrix targets when nothing names one.
DEFAULT_STABLE_TORCH = ">=2.10"


@dataclass(frozen=True, kw_only=True)
class InitChoices:
    """What the user gave init, or what it found on this machine."""

    torch: tuple[str, ...] = ()  # --torch
    archs: str | None = None  # --archs
    env_archs: str | None = None  # TORCH_CUDA_ARCH_LIST
    build_torch: str | None = None  # the build Python's torch ("2.13.0"), if it has one


@dataclass(frozen=True, kw_only=True)
class InitResult:
    path: Path
    text: str
    front_door: str
    hand: tuple[str, ...]  # what needs a hand
    done: tuple[str, ...] = ()  # what was translated in a way worth saying
    refusals: tuple[Refusal, ...] = ()
    generated: tuple[GeneratedFile, ...] = ()  # written beside matrix.yaml
    summary: str = ""  # one line: what was written


class _OneLine(dict[str, str]):
    """A mapping written on one line: a source with its archs, ``{files: x.cu, archs: 9.0a}``."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    _OneLine,
    lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True),
)


def _dump(key: str, value: object) -> str:
    return yaml.dump(
        {key: value}, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100
    )


def _text(root: Path, sources: Iterable[CapturedSource]) -> Iterable[str]:
    for source in sources:
        path = root / source.path
        if path.is_file():
            yield path.read_text(encoding="utf-8", errors="replace")


def _patterns(members: list[str]) -> list[str]:
    """Globs that could name *members* (files of one folder): ``*.cu``, then ``*_sm90.cu`` from
    the names' common ending."""
    names = [Path(m).name for m in members]
    suffix = Path(names[0]).suffix
    ending = os.path.commonprefix([n[::-1] for n in names])[::-1]  # noqa: RUF071 - the names' common ending, characters
    cut = ending.find("_")
    out = [f"*{suffix}"]
    if cut >= 0 and ending[cut:] != suffix:
        out.append(f"*{ending[cut:]}")
    return out


def _globbed(root: Path, paths: list[str], *, single: bool) -> list[str]:
    """*paths* with a folder's files written as one glob (``folder/*.cu``, ``folder/*_sm90.cu``)
    when the glob names exactly those files; *single*: a glob for one file too."""
    by_folder: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in paths:
        p = Path(path)
        by_folder[(p.parent.as_posix(), p.suffix)].append(path)
    out: list[str] = []
    for (folder, _), members in by_folder.items():
        chosen = None
        if len(members) > 1 or single:
            for pattern in _patterns(members):
                on_disk = {
                    (Path(folder) / f.name).as_posix().removeprefix("./")
                    for f in (root / folder).glob(pattern)
                    if f.is_file()
                }
                if on_disk == set(members):
                    chosen = f"{folder}/{pattern}".removeprefix("./")
                    break
        out.extend([chosen] if chosen else members)
    return out


def _sources(root: Path, ext: CapturedExtension) -> list[object]:
    compiled = [s for s in ext.sources if Path(s.path).suffix in SOURCE_SUFFIXES]
    groups: dict[tuple[ArchSpec, ...] | None, list[str]] = defaultdict(list)
    for source in compiled:
        groups[source.archs].append(source.path)
    out: list[object] = []
    for archs, paths in groups.items():
        for entry in _globbed(root, paths, single=ext.kind == "guessed"):
            out.append(entry if archs is None else _OneLine(files=entry, archs=arch_text(archs)))
    return out


def abi_of(root: Path, ext: CapturedExtension) -> Abi:
    """The stable ABI when the build declares it or the sources use torch's stable headers (or
    the flags say so), else the unstable one."""
    if ext.stable is not None:
        return STABLE if ext.stable else UNSTABLE
    stable = "-DTORCH_STABLE_ONLY" in ext.defines or any(
        _STABLE_RE.search(t) for t in _text(root, ext.sources)
    )
    return STABLE if stable else UNSTABLE


class _Writer:
    def __init__(self, build: CapturedBuild, choices: InitChoices) -> None:
        self.build = build
        self.choices = choices
        self.hand = list(build.hand)
        self.done = list(build.done)

    def extension(self, ext: CapturedExtension, abi: Abi) -> dict[str, object]:
        root = self.build.root
        out: dict[str, object] = {"name": ext.name or "TODO.name", "sources": _sources(root, ext)}
        if not ext.name:
            self.hand.append(f"{ext.kind} ({ext.where}) has no module name; write extension.name")
        cuda = any(s.path.endswith(".cu") for s in ext.sources)
        for key, value in (
            ("include-dirs", ext.include_dirs),
            ("cxx-flags", [*ext.defines, *ext.cxx_flags]),
            ("nvcc-flags", [*ext.defines, *ext.nvcc_flags] if cuda else []),
            ("link-flags", ext.link_flags),
            ("libraries", ext.libraries),
            ("library-dirs", ext.library_dirs),
        ):
            if value:
                out[key] = list(value)
        own_init = any(_OWN_INIT_RE.search(t) for t in _text(root, ext.sources))
        out["module-init"] = not own_init
        if abi.per_torch and not own_init:  # a classic extension defines its module
            self.hand.append(
                f"{ext.name}: no source defines PyInit_{(ext.name or '').rsplit('.', 1)[-1]} "
                "(PYBIND11_MODULE); module-init: true makes wheelforge generate it"
            )
        return out

    def abi(self, ext: CapturedExtension) -> Abi:
        return abi_of(self.build.root, ext)

    def torch(self, abi: Abi, ext: CapturedExtension) -> object:
        given, build_torch = self.choices.torch, self.choices.build_torch
        asked = self.build.metadata.torch_requirement
        if abi.torch_target:
            if given:
                return given[0] if len(given) == 1 else list(given)
            if ext.torch_target:
                source = (
                    "build.toml's stable-abi"
                    if self.build.front_door == "build.toml"
                    else "the project's -DTORCH_TARGET_VERSION"
                )
                self.done.append(
                    f"torch: '>={ext.torch_target}' from {source} (the stable-ABI target)"
                )
                return f">={ext.torch_target}"
            return DEFAULT_STABLE_TORCH
        versions = list(given) or ([build_torch] if build_torch else [])
        if not versions:
            self.hand.append(
                "torch: the build Python has no torch; list the torch versions to build for (--torch 2.13.0)"
            )
            return ["2.13.0"]
        if not given:
            self.done.append(
                f"torch: {build_torch}, the build Python's torch (--torch to list others)"
            )
        if asked and asked != "torch":
            try:
                fits = all(SpecifierSet(str(s)).contains(v) for s in [asked.removeprefix("torch")] for v in versions)  # fmt: skip
            except InvalidSpecifier:
                fits = False
            if not fits:
                self.hand.append(
                    f"torch: the project asks for '{asked}'; wrote {', '.join(versions)}: an unstable-ABI wheel "
                    "is pinned to the torch it is built with, so list the torches you publish for"
                )
        return versions

    def arch_sets(self) -> str:
        if self.choices.archs:
            return "\n" + _dump("arch-sets", {"default": self.choices.archs})
        found = merge_archs(*(e.archs for e in self.build.extensions))
        if found:
            return "\n" + _dump("arch-sets", {"default": arch_text(found)})
        if self.choices.env_archs:
            self.done.append(f"arch-sets: from TORCH_CUDA_ARCH_LIST '{self.choices.env_archs}'")
            return "\n" + _dump("arch-sets", {"default": self.choices.env_archs})
        return (
            "\n# No arch-sets: give them here, or with --archs / TORCH_CUDA_ARCH_LIST.\n"
            '# arch-sets:\n#   default: "8.0 9.0+PTX"\n'
        )

    def package(self) -> str:
        section = package_section(self.build, self.hand, self.done)
        if section is None:
            return FROM_PYPROJECT
        return (FROM_PYPROJECT if section.pop("from_pyproject", False) else "") + _dump(
            "package", section
        )

    def tests(self) -> str:
        section = tests_section(self.build, self.hand, self.done)
        if section is None:
            return ""
        extras = [
            f"{k}: {', '.join(v)}"
            for k, v in self.build.metadata.extras
            if v and ("test" in k or k == "dev")
        ]
        comment = "".join(f"#   extras {e}\n" for e in extras[:4])
        head = "\n# What 'wheelforge test' runs against the installed wheel; add what the tests import.\n"
        return (
            head
            + (comment and "# The project's optional requirements:\n" + comment)
            + _dump("tests", section)
        )

    def python_abi(self, ext: CapturedExtension) -> str:
        if not ext.limited_api:
            return ""
        version = Version(ext.limited_api)
        if version < OLDEST_PYTHON:
            self.done.append(
                f"python-abi: cp310, not the project's Py_LIMITED_API {ext.limited_api}: torch runs on CPython 3.10+"
            )
            return ""
        return f"python-abi: cp3{version.minor}\n"


def _refuse_missing(build: CapturedBuild) -> None:
    if not build.missing:
        return
    listed = "\n".join(f"  {m}" for m in build.missing[:40])
    more = f"\n  ... and {len(build.missing) - 40} more" if len(build.missing) > 40 else ""
    raise ConfigError(
        f"{build.root}: {len(build.missing)} source(s) that {build.front_door} names match no file; "
        "nothing was written (an sdist that ships without its sources? take the project's repository checkout)",
        details=listed + more,
    )


def render(build: CapturedBuild, choices: InitChoices) -> InitResult:
    """The matrix text for a captured build, and what needs a hand."""
    _refuse_missing(build)
    if not build.extensions:
        raise ConfigError(
            f"{build.root}: {build.front_door} builds no extension; write matrix.yaml from docs/your-extension.md"
        )
    writer = _Writer(build, choices)
    ext, *others = build.extensions
    if others:
        names = ", ".join(str(e.name) for e in others)
        writer.hand.append(
            f"{build.front_door} builds {len(build.extensions)} extensions; only {ext.name} is written (also: {names})"
        )
    abi = writer.abi(ext)
    parts = [
        f"# Written by 'wheelforge init' from {build.front_door}; see docs/matrix.md and docs/your-extension.md.\n",
        writer.package(),
        "\n" + _dump("extension", writer.extension(ext, abi)),
    ]
    if abi.per_torch:
        parts.append(
            "\n# torch/extension.h: one build per torch version below (a CUDA build of torch).\n"
        )
        parts.append(f"abi: {abi.name}\n" + _dump("torch", writer.torch(abi, ext)))
    else:
        parts.append(f"\nabi: {abi.name}\n" + _dump("torch", writer.torch(abi, ext)))
    parts.append(writer.python_abi(ext))
    parts.append(writer.arch_sets())
    parts.append(writer.tests())
    text = "".join(parts)
    text = text if text.endswith("\n") else text + "\n"
    sources = len([s for s in ext.sources if Path(s.path).suffix in SOURCE_SUFFIXES])
    return InitResult(
        path=build.root / "matrix.yaml",
        text=text,
        front_door=build.front_door,
        hand=tuple(dict.fromkeys(writer.hand)),
        done=tuple(dict.fromkeys(writer.done)),
        refusals=build.refusals,
        generated=build.generated,
        summary=f"{ext.name}: {sources} source(s), abi {abi.name}",
    )
