"""The one writer of ``wheelforge init``: a CapturedBuild (from any front door) as a commented
matrix.yaml, and what needs a hand.

It decides what the captured build leaves open, from the project's own words where they exist:
the ABI (the sources' headers), ``module-init`` (whether the sources define ``PyInit``), the
torch (``--torch``, else the project's stable-ABI target, else the build Python's torch), the
arch sets (``--archs``, else the project's arch flags, else ``TORCH_CUDA_ARCH_LIST``), sources
written as globs where a glob names exactly the same files. A source that matches no file is
refused with the list, before anything is written."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from wheelforge.adoption.doors.flags import arch_text, merge_archs
from wheelforge.adoption.doors.testsuite import tests_section
from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
    GeneratedFile,
    Refusal,
)
from wheelforge.adoption.writer import buildparts
from wheelforge.adoption.writer.packagesection import (
    FROM_PYPROJECT,
    OLDEST_PYTHON,
    package_section,
)
from wheelforge.adoption.writer.sourceglobs import sources_entries
from wheelforge.configuration.abi import STABLE, UNSTABLE, Abi
from wheelforge.configuration.archs import parse_arch_list
from wheelforge.configuration.matrix.keys import SOURCE_SUFFIXES
from wheelforge.configuration.matrix.pyproject import read_project
from wheelforge.configuration.matrix.torchspec import parse_torch_spec
from wheelforge.foundation import readers
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


# A preprocessor block only Windows compiles (torch_scatter's PyInit stubs live in one).
_WINDOWS_IF_RE = re.compile(
    r"^\s*#\s*if(?:def\s+(?:_WIN32|_MSC_VER|_WIN64)\b|\s+defined\s*\(?\s*(?:_WIN32|_MSC_VER)\b)"
)
_IF_RE = re.compile(r"^\s*#\s*if")
_ELSE_RE = re.compile(r"^\s*#\s*(?:else|elif)\b")
_ENDIF_RE = re.compile(r"^\s*#\s*endif\b")


def linux_text(text: str) -> str:
    """*text* without the blocks only Windows compiles (``#ifdef _WIN32`` up to its ``#else``
    or ``#endif``), which a Linux build never sees."""
    kept: list[str] = []
    stack: list[bool] = []  # per open #if: does it hide its lines (a Windows branch)?
    for line in text.splitlines():
        if _IF_RE.match(line):
            stack.append(bool(_WINDOWS_IF_RE.match(line)))
            continue
        if stack and _ELSE_RE.match(line):
            stack[-1] = False
            continue
        if stack and _ENDIF_RE.match(line):
            stack.pop()
            continue
        if not any(stack):
            kept.append(line)
    return "\n".join(kept)


def _text(root: Path, sources: Iterable[CapturedSource]) -> Iterable[str]:
    for source in sources:
        path = root / source.path
        if path.is_file():
            yield linux_text(readers.read_text(path, cap=readers.CONFIG_CAP, errors="replace"))


def abi_of(root: Path, ext: CapturedExtension) -> Abi:
    """The stable ABI when the build declares it or the sources use torch's stable headers (or
    the flags say so), else the unstable one."""
    if ext.stable is not None:
        return STABLE if ext.stable else UNSTABLE
    if ext.plain:  # nothing of it calls torch: one build serves every torch
        return STABLE
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

    def extension(self, ext: CapturedExtension, abi: Abi, where: str) -> dict[str, object]:
        root = self.build.root
        outputs = {s.name: s.outputs for s in self.build.steps}
        out: dict[str, object] = {"name": ext.name or "TODO.name"}
        if not ext.name:
            self.hand.append(f"{ext.kind} ({ext.where}) has no module name; write {where}.name")
        own_init = any(_OWN_INIT_RE.search(t) for t in _text(root, ext.sources))
        library = ext.loaded_at is not None and not own_init
        if ext.plain:
            out["kind"] = "plain"
        elif library:
            out["kind"] = "library"
            self.done.append(
                f"{ext.name}: kind: library (<leaf>.so, no PyInit): {ext.loaded_at} loads it with "
                "torch.ops.load_library, and no source defines a module init"
            )
        out["sources"] = sources_entries(root, ext, outputs)
        cuda = any(s.path.endswith(".cu") for s in ext.sources)
        if cuda and ext.archs and self.own_archs():
            out["archs"] = arch_text(ext.archs)
        if ext.torch_target and self.own_targets(abi):
            out["torch-target"] = ext.torch_target
        if ext.limited_api and (Version(ext.limited_api) < OLDEST_PYTHON or not abi.abi3):
            # the project's limited API (CMake's USE_SABI 3), older than python-abi's, or
            # under the unstable ABI; the tag stays python-abi's (the CPython's, unstable)
            out["limited-api"] = ext.limited_api
            self.done.append(
                f"{ext.name}: limited-api: {ext.limited_api} (the project's Py_LIMITED_API); "
                "the wheel's tag stays python-abi's (abi: stable), the build CPython's (unstable)"
            )
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
        if library or ext.plain:
            return out
        out["module-init"] = not own_init
        if abi.per_torch and not own_init:  # a classic extension defines its module
            self.hand.append(
                f"{ext.name}: no source defines PyInit_{(ext.name or '').rsplit('.', 1)[-1]} "
                "(PYBIND11_MODULE); module-init: true makes wheelforge generate it"
            )
        return out

    def own_archs(self) -> bool:
        """Whether each extension keeps its own archs (``extensions[].archs``): the project's
        flags name different archs for different shared objects, and --archs does not replace
        them all."""
        named = {e.archs for e in self.build.extensions if e.archs and _cuda(e)}
        return len(named) > 1 and not self.choices.archs

    def own_targets(self, abi: Abi) -> bool:
        """Whether each extension keeps its own stable-ABI target (``extensions[].torch-target``):
        the project's flags name different -DTORCH_TARGET_VERSION, and --torch does not replace
        them all."""
        named = {e.torch_target for e in self.build.extensions if e.torch_target}
        return abi.torch_target and len(named) > 1 and not self.choices.torch

    def abi(self, ext: CapturedExtension) -> Abi:
        return abi_of(self.build.root, ext)

    def torch_free(self) -> bool:
        """No binary uses torch: every extension is a plain library (ctypes/cffi), which compiles
        and links none of torch (ExtensionConfig.links_torch)."""
        return bool(self.build.extensions) and all(e.plain for e in self.build.extensions)

    def own_torch(self) -> object:
        """The torch of a wheel whose binaries use none: the project's own range, as setup()'s
        install_requires or pyproject.toml's [project] dependencies name it (the wheel requires
        it as written: configuration/abi.torch_free_requirement)."""
        project = read_project(self.build.root / "pyproject.toml")
        found = [
            (text, source)
            for text, source in (
                (self.build.metadata.torch_requirement, "setup()'s install_requires"),
                (
                    project.torch_requirement if project else None,
                    "pyproject.toml [project] dependencies",
                ),
            )
            if text
        ]
        why = "no binary uses torch (every extension is kind: plain)"
        if not found:
            self.hand.append(
                f"torch: {why} and the project requires no torch; wrote '{DEFAULT_STABLE_TORCH}', "
                "which the wheel requires as written: write the range its Python needs"
            )
            return DEFAULT_STABLE_TORCH
        text, source = found[0]
        try:
            requirement = Requirement(text)
            spec = str(requirement.specifier)
            parse_torch_spec(spec)
        except (InvalidRequirement, ValueError):
            requirement, spec = None, ""
        if requirement is None or not spec or requirement.marker or requirement.extras:
            self.hand.append(
                f"torch: {why}; the project asks for '{text}' ({source}), which is not a range "
                f"with a lower bound; wrote '{DEFAULT_STABLE_TORCH}', which the wheel requires as "
                "written: write the project's range"
            )
            return DEFAULT_STABLE_TORCH
        self.done.append(
            f"torch: '{spec}', the project's own ({source}): {why}, so the wheel requires it as "
            "written (Requires-Dist: torch" + spec + "), with no stable-ABI floor"
        )
        return spec

    def torch(self, abi: Abi, ext: CapturedExtension) -> object:
        given, build_torch = self.choices.torch, self.choices.build_torch
        asked = self.build.metadata.torch_requirement
        if self.torch_free() and not given:
            return self.own_torch()
        if abi.torch_target:
            if given:
                lowest = min((v for v in map(_lowest, given) if v), default=None)
                if ext.torch_target and lowest and lowest > Version(ext.torch_target):
                    self.hand.append(
                        f"torch: --torch {' '.join(given)} raises the project's stable-ABI floor "
                        f"({ext.torch_target}): the wheel will require torch>={lowest.major}."
                        f"{lowest.minor}; write torch: '>={ext.torch_target}' to keep it"
                    )
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
                "torch: the build Python has no torch; list the torch versions to build for "
                "(--torch 2.13.0)"
            )
            return ["2.13.0"]
        if not given:
            self.done.append(
                f"torch: {build_torch}, the build Python's torch (--torch to list others)"
            )
        if asked and asked != "torch":
            try:
                fits = all(
                    SpecifierSet(str(s)).contains(v)
                    for s in [asked.removeprefix("torch")]
                    for v in versions
                )
            except InvalidSpecifier:
                fits = False
            if not fits:
                self.hand.append(
                    f"torch: the project asks for '{asked}'; wrote {', '.join(versions)}: an unstable-ABI wheel "
                    "is pinned to the torch it is built with, so list the torches you publish for"
                )
        return versions

    def arch_sets(self) -> str:
        if (kept := self.configured_archs()) is not None:
            return "\n" + buildparts.dump("arch-sets", {"default": kept})
        if self.choices.archs:
            # --archs replaces the arch set the project gave: its front door's account goes
            self.done[:] = [d for d in self.done if not d.startswith("arch-sets:")]
            return "\n" + buildparts.dump("arch-sets", {"default": self.choices.archs})
        found = merge_archs(*(e.archs for e in self.build.extensions))
        if found and self.own_archs():
            self.done.append(
                "archs: the extensions' flags name different archs ("
                + "; ".join(
                    f"{e.name}: {arch_text(e.archs)}"
                    for e in self.build.extensions
                    if e.archs and _cuda(e)
                )
                + f"): each keeps its own (extensions[].archs), the arch set is all of them ({arch_text(found)})"
            )
        if found:
            return "\n" + buildparts.dump("arch-sets", {"default": arch_text(found)})
        if self.choices.env_archs:
            self.done.append(f"arch-sets: from TORCH_CUDA_ARCH_LIST '{self.choices.env_archs}'")
            return "\n" + buildparts.dump("arch-sets", {"default": self.choices.env_archs})
        return (
            "\n# No arch-sets: give them here, or with --archs / TORCH_CUDA_ARCH_LIST.\n"
            '# arch-sets:\n#   default: "8.0 9.0+PTX"\n'
        )

    def configured_archs(self) -> str | None:
        """CMake was configured for --archs (TORCH_CUDA_ARCH_LIST): where the project compiles
        exactly those archs, its own PTX choices per source are kept (vLLM's marlin kernels
        add PTX to an arch list without it), else None."""
        if not self.choices.archs or "CMake" not in self.build.front_door:
            return None
        found = merge_archs(*(e.archs for e in self.build.extensions))
        try:
            asked = parse_arch_list(self.choices.archs, source="--archs")
        except ConfigError:
            return None
        if not found or {s.arch for s in found} != {s.arch for s in asked}:
            return None
        self.done[:] = [d for d in self.done if not d.startswith("arch-sets:")]
        if found != asked:
            self.done.append(
                f"arch-sets: {arch_text(found)}: --archs '{self.choices.archs}' as CMake compiles it "
                "(PTX where the project asks for it)"
            )
        return arch_text(found)

    def package(self) -> str:
        section = package_section(self.build, self.hand, self.done)
        if section is None:
            return FROM_PYPROJECT
        return (FROM_PYPROJECT if section.pop("from_pyproject", False) else "") + buildparts.dump(
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
            + buildparts.dump("tests", section)
        )

    def python_abi(self, ext: CapturedExtension) -> str:
        if not ext.limited_api:
            return ""
        version = Version(ext.limited_api)
        if version < OLDEST_PYTHON:  # written per extension (limited-api)
            return ""
        return f"python-abi: cp3{version.minor}\n"


def _cuda(ext: CapturedExtension) -> bool:
    return any(s.path.endswith(".cu") for s in ext.sources)


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


def _abi(writer: _Writer, extensions: Sequence[CapturedExtension]) -> Abi:
    """One ABI for the matrix: the extensions', or the unstable one when they differ (code
    written for the stable ABI builds under it too)."""
    abis = {ext.name: writer.abi(ext) for ext in extensions}
    if len({a.name for a in abis.values()}) == 1:
        return next(iter(abis.values()))
    stable = ", ".join(str(n) for n, a in abis.items() if not a.per_torch)
    writer.done.append(
        f"abi: unstable: {stable} use(s) the stable ABI, the others torch/extension.h; a matrix has one ABI, "
        "and the stable ABI's code builds under the unstable one"
    )
    return UNSTABLE


def _targeted(
    writer: _Writer, extensions: Sequence[CapturedExtension], abi: Abi
) -> CapturedExtension:
    """The extension whose stable-ABI target is the matrix's lowest torch. When the extensions
    name different targets, each keeps its own (``torch-target``, which the matrix's torch range
    must hold): the oldest is the range's floor, and the wheel requires the newest."""
    named = {str(e.name): e.torch_target for e in extensions if e.torch_target}
    if writer.own_targets(abi):
        oldest = min(named.values(), key=Version)
        newest = max(named.values(), key=Version)
        writer.done.append(
            "torch-target: the extensions name different -DTORCH_TARGET_VERSION ("
            + ", ".join(f"{n}: {v}" for n, v in named.items())
            + f"): each keeps its own (extensions[].torch-target), torch: '>={oldest}' holds them "
            f"all, and the wheel requires torch>={newest}"
        )
        return next(e for e in extensions if e.torch_target == oldest)
    chosen = max(
        extensions, key=lambda e: Version(e.torch_target) if e.torch_target else Version("0")
    )
    _said_per_extension(writer, extensions, "torch_target", "-DTORCH_TARGET_VERSION", "torch")
    return chosen


def _limited(writer: _Writer, extensions: Sequence[CapturedExtension]) -> CapturedExtension:
    """The extension whose Py_LIMITED_API is the newest: the abi3 floor of the wheel."""
    chosen = max(
        extensions, key=lambda e: Version(e.limited_api) if e.limited_api else Version("0")
    )
    _said_per_extension(writer, extensions, "limited_api", "Py_LIMITED_API", "python-abi")
    return chosen


def _said_per_extension(
    writer: _Writer, extensions: Sequence[CapturedExtension], attr: str, flag: str, key: str
) -> None:
    named = {str(e.name): getattr(e, attr) for e in extensions if getattr(e, attr)}
    if len(set(named.values())) > 1:
        newest = max(named.values(), key=Version)
        writer.done.append(
            f"{key}: the extensions name different {flag} ("
            + ", ".join(f"{n}: {v}" for n, v in named.items())
            + f"); one wheel loads only where all of them do, so the newest, {newest}, is the "
            "floor of all (the older one's code builds under it)"
        )


def _summary(build: CapturedBuild, abi: Abi) -> str:
    counts = [
        (e.name, sum(1 for s in e.sources if Path(s.path).suffix in SOURCE_SUFFIXES))
        for e in build.extensions
    ]
    parts = [f"{name}: {n} source{'' if n == 1 else 's'}" for name, n in counts]
    extra = (
        [
            f"{len(build.header_libraries)} header librar{'y' if len(build.header_libraries) == 1 else 'ies'}"
        ]
        if build.header_libraries
        else []
    )
    extra += [f"{len(build.steps)} generate step(s)"] if build.steps else []
    return "; ".join(parts) + f", abi {abi.name}" + "".join(f", {e}" for e in extra)


def render(build: CapturedBuild, choices: InitChoices) -> InitResult:
    """The matrix text for a captured build, and what needs a hand."""
    _refuse_missing(build)
    if build.pure:
        return _render_pure(build, choices)
    if not build.extensions:
        raise ConfigError(
            f"{build.root}: {build.front_door} builds no extension; write matrix.yaml from "
            "docs/your-extension.md"
        )
    build, notes = buildparts.prepare(build)
    writer = _Writer(build, choices)
    writer.done += notes
    extensions = build.extensions
    abi = _abi(writer, extensions)
    if len(extensions) == 1:
        section = buildparts.dump("extension", writer.extension(extensions[0], abi, "extension"))
    else:
        section = buildparts.dump(
            "extensions",
            [writer.extension(e, abi, f"extensions[{i}]") for i, e in enumerate(extensions)],
        )
    parts = [
        (
            f"# Written by 'wheelforge init' from {build.front_door}; see docs/matrix.md and "
            "docs/your-extension.md.\n"
        ),
        writer.package(),
        buildparts.header_libraries_text(build.header_libraries),
        buildparts.generate_text(build.steps),
        "\n" + section,
    ]
    torch = writer.torch(abi, _targeted(writer, extensions, abi))
    if writer.torch_free():
        parts.append(
            "\n# No binary uses torch (every extension is kind: plain): the wheel requires the "
            "torch below as written, the project's own range, with no stable-ABI floor.\n"
        )
        parts.append(f"abi: {abi.name}\n" + buildparts.dump("torch", torch))
    elif abi.per_torch:
        parts.append(
            "\n# torch/extension.h: one build per torch version below (a CUDA build of torch).\n"
        )
        parts.append(f"abi: {abi.name}\n" + buildparts.dump("torch", torch))
    else:
        parts.append(f"\nabi: {abi.name}\n" + buildparts.dump("torch", torch))
    if abi.abi3:
        parts.append(writer.python_abi(_limited(writer, extensions)))
    parts.append(writer.arch_sets())
    parts.append(writer.tests())
    text = "".join(parts)
    text = text if text.endswith("\n") else text + "\n"
    return InitResult(
        path=build.root / "matrix.yaml",
        text=text,
        front_door=build.front_door,
        hand=tuple(dict.fromkeys(writer.hand)),
        done=tuple(dict.fromkeys(writer.done)),
        refusals=build.refusals,
        generated=build.generated,
        summary=_summary(build, abi),
    )


def _render_pure(build: CapturedBuild, choices: InitChoices) -> InitResult:
    """A build with nothing to compile: the package section, the torch it needs, the tests."""
    writer = _Writer(build, choices)
    torch = build.metadata.torch_requirement or "torch"
    given = list(choices.torch)
    text = "".join(
        [
            (f"# Written by 'wheelforge init' from {build.front_door}; see docs/matrix.md.\n"),
            writer.package(),
            "\n# No extension: nothing to compile; 'wheelforge build' packs one py3-none-any "
            "wheel\n# that requires the torch below.\n",
            buildparts.dump("torch", given[0] if len(given) == 1 else given or torch[5:]),
            writer.tests(),
        ]
    )
    return InitResult(
        path=build.root / "matrix.yaml",
        text=text if text.endswith("\n") else text + "\n",
        front_door=build.front_door,
        hand=tuple(dict.fromkeys(writer.hand)),
        done=tuple(dict.fromkeys(writer.done)),
        refusals=build.refusals,
        generated=build.generated,
        summary="no extension: a pure-Python wheel",
    )


def _lowest(text: str) -> Version | None:
    """The lowest torch a --torch value names ('2.13.0', '>=2.10'), if it names one."""
    try:
        return Version(re.sub(r"^[>=~\s]+", "", text))
    except ValueError:
        return None
