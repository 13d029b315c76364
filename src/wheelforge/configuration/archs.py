"""CUDA arch lists: the ``TORCH_CUDA_ARCH_LIST`` grammar, arch objects and nvcc ``-gencode`` flags.

Grammar (a superset of what ``torch.utils.cpp_extension`` accepts): entries separated by ``;``,
spaces or commas; an entry is ``MAJOR.MINOR`` with an optional ``a`` (arch-specific, e.g.
``9.0a``) or ``f`` (family-specific, e.g. ``10.0f``) suffix and an optional ``+PTX``,
or one of torch's names (``Ampere`` = ``8.0;8.6+PTX`` …). Entries are deduplicated (``+PTX`` on any
duplicate wins) and ordered by arch.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Literal, cast

from wheelforge.configuration import releases
from wheelforge.foundation.errors import ConfigError

# The a/f suffix of an arch: "" plain, "a" arch-specific (sm_90a), "f" family-specific (sm_100f).
ArchSuffix = Literal["", "a", "f"]

# torch.utils.cpp_extension._get_cuda_arch_flags's names, with the same expansions.
NAMED_ARCHES: dict[str, str] = {
    "Kepler+Tesla": "3.7",
    "Kepler": "3.5+PTX",
    "Maxwell+Tegra": "5.3",
    "Maxwell": "5.0;5.2+PTX",
    "Pascal": "6.0;6.1+PTX",
    "Volta+Tegra": "7.2",
    "Volta": "7.0+PTX",
    "Turing": "7.5+PTX",
    "Ampere+Tegra": "8.7",
    "Ampere": "8.0;8.6+PTX",
    "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX",
    "Blackwell+Tegra": "11.0",
    "Blackwell": "10.0;10.3;12.0;12.1+PTX",
}

# Compute capabilities only toolkits older than the release table's oldest entry built: CUDA
# 10's sm_30 and sm_32 (Kepler).
_OLDER_ARCHES: tuple[tuple[int, int], ...] = ((3, 0), (3, 2))


@cache
def known_arches() -> tuple[tuple[int, int], ...]:
    """Every compute capability a CUDA toolkit has shipped code for: the release table's archs
    (configuration/releases.py) and the older ones. Which of them a given toolkit can build is
    the toolkit's business (toolkit.py); this is the grammar's list, so a release that brings a
    new arch teaches it to the grammar too."""
    sms = {sm for r in releases.releases() for sm in r.sass | r.ptx}
    return tuple(sorted({*_OLDER_ARCHES, *(divmod(sm, 10) for sm in sms)}))


_SUFFIX_ORDER = {"": 0, "a": 1, "f": 2}
# ASCII digits only (torch's parser rejects '８.０'), never more than int() can take quickly.
_CODE_RE = re.compile(r"^(?:sm|compute)_(?P<sm>[0-9]{1,4})(?P<suffix>[af]?)$")
_ENTRY_RE = re.compile(r"^(?P<major>[0-9]{1,3})\.(?P<minor>[0-9])(?P<suffix>[af]?)(?P<ptx>\+PTX)?$")
_SEPARATORS = re.compile(r"[;,\s]+")
_ARCH_LIST_ID_RE = re.compile(r"^sm[0-9]")  # arch_list_id's spelling
# Spellings people reach for that are not in the grammar: sm_90a, compute_90, 90, 9.0+ptx.
_LOOSE_RE = re.compile(
    r"^(?:(?P<kind>sm|compute)_?)?(?P<major>\d{1,2}?)\.?(?P<minor>\d)(?P<suffix>[af]?)"
    r"(?P<ptx>\+ptx)?$",
    re.IGNORECASE | re.ASCII,
)
# Letters typed for the digits they look like (``8.o``, ``1O.0``, ``l2.0``), in the number only:
# the sm_/compute_ prefix, the a/f suffix and +PTX keep their letters.
_LOOKALIKE_RE = re.compile(
    r"^(?P<kind>(?:sm|compute)_?)?(?P<number>[0-9oOlI.]+)(?P<rest>[af]?(?:\+ptx)?)$",
    re.IGNORECASE | re.ASCII,
)
_DIGITS_FOR = str.maketrans("oOlI", "0011")


@dataclass(frozen=True, order=True)
class Arch:
    """One compute capability, e.g. 9.0a: ``major``, ``minor`` and the ``a``/``f`` suffix."""

    major: int
    minor: int
    suffix: ArchSuffix = ""

    def __post_init__(self) -> None:
        if self.suffix not in _SUFFIX_ORDER:
            raise ValueError(f"bad arch suffix {self.suffix!r}")

    @classmethod
    def from_sm(cls, sm: int, suffix: ArchSuffix = "") -> Arch:
        """The arch of an sm number (90, 100, 121), as nvcc and fatbin headers give it."""
        return cls(sm // 10, sm % 10, suffix)

    @classmethod
    def from_code(cls, code: str) -> Arch | None:
        """The arch nvcc's ``sm_90a`` or ``compute_90a`` names; None for anything else."""
        m = _CODE_RE.match(code)
        if m is None:
            return None
        suffix: ArchSuffix = "a" if m["suffix"] == "a" else "f" if m["suffix"] == "f" else ""
        return cls.from_sm(int(m["sm"]), suffix)

    @property
    def sm(self) -> int:
        """``90`` for 9.0a: the number nvcc lists (--list-gpu-code) and fatbin headers carry."""
        return self.major * 10 + self.minor

    @property
    def number(self) -> str:
        """``90a``: the form nvcc uses after ``sm_`` and ``compute_``."""
        return f"{self.major}{self.minor}{self.suffix}"

    @property
    def sass(self) -> str:
        return f"sm_{self.number}"

    @property
    def ptx(self) -> str:
        return f"compute_{self.number}"

    @property
    def base(self) -> Arch:
        """The arch without its suffix: 9.0 for 9.0a."""
        return Arch(self.major, self.minor)

    def sort_key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, _SUFFIX_ORDER[self.suffix])

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"


def code_sort_key(code: str) -> tuple[int, int, int, str]:
    """Orders nvcc's arch names (``sm_90``, ``sm_90a``, ``compute_100f``) by arch."""
    arch = Arch.from_code(code)
    return (*arch.sort_key(), code) if arch is not None else (0, 0, 0, code)


def sm_range(sms: Iterable[int]) -> str:
    """``sm_75 to sm_121``: the archs a toolkit builds, in one phrase."""
    numbers = sorted(sms)
    return f"sm_{numbers[0]} to sm_{numbers[-1]}" if numbers else "no archs"


@dataclass(frozen=True, order=True)
class ArchSpec:
    """One entry of an arch list: SASS for ``arch``, plus PTX when ``ptx``."""

    arch: Arch
    ptx: bool = False

    def __str__(self) -> str:
        return f"{self.arch}+PTX" if self.ptx else str(self.arch)


def gencode_flag(arch: str, code: str) -> str:
    """One ``-gencode`` flag: *code* (``sm_90`` or ``compute_90``) from the virtual *arch*
    (``compute_90``). The one place the spelling lives (ArchSet.gencode, nvcc's steps)."""
    return f"-gencode=arch={arch},code={code}"


@dataclass(frozen=True)
class ArchSet:
    """A named, ordered, deduplicated arch list; one wheel variant is built per arch set."""

    name: str
    specs: tuple[ArchSpec, ...]

    @property
    def archs(self) -> tuple[Arch, ...]:
        return tuple(s.arch for s in self.specs)

    @property
    def sass(self) -> tuple[str, ...]:
        return tuple(s.arch.sass for s in self.specs)

    @property
    def ptx(self) -> tuple[str, ...]:
        return tuple(s.arch.ptx for s in self.specs if s.ptx)

    def gencode(self) -> str:
        """The -gencode flags as one command-line string, as a plan, its compile steps and the
        ninja file carry them: the one place they are spelled. Per arch its SASS, and for a
        +PTX one its PTX too (nvcc's --generate-code)."""
        flags = []
        for spec in self.specs:
            flags.append(gencode_flag(spec.arch.ptx, spec.arch.sass))
            if spec.ptx:
                flags.append(gencode_flag(spec.arch.ptx, spec.arch.ptx))
        return shlex.join(flags)

    def limit(self, allowed: Iterable[ArchSpec]) -> ArchSet:
        """What a source limited to *allowed* is compiled for in this arch set.

        An allowed arch is kept when the set asks for it, or for its base (9.0a when the set has
        9.0: arch-specific code for a GPU the set targets, the rule vLLM applies to its Hopper
        kernels). PTX is kept where both the source and the set ask for it. An arch the set asks
        for that none of those runs on gets the source's highest plain arch below it that runs
        there: one of the same major (its SASS runs on later GPUs of that major) or one with PTX
        (the driver compiles it), kept with its PTX then. That is CMake's choice in vLLM
        (cuda_archs_loose_intersection): a Marlin kernel limited to 8.0+PTX is compiled for
        8.0+PTX in a 9.0a build, not left out of it."""
        specs = tuple(allowed)
        asked = {s.arch: s.ptx for s in self.specs}
        kept: dict[Arch, bool] = {}
        for spec in specs:
            arch = spec.arch
            key = (
                arch if arch in asked else arch.base if arch.suffix and arch.base in asked else None
            )
            if key is not None:
                kept[arch] = kept.get(arch, False) or (spec.ptx and asked[key])
        for target in self.specs:
            if any(_runs_on(a, kept[a], target.arch) for a in kept):
                continue
            below = [s for s in specs if not s.arch.suffix and _runs_on(s.arch, s.ptx, target.arch)]
            if below:
                best = max(below, key=lambda s: Arch.sort_key(s.arch))
                same_major = best.arch.major == target.arch.major
                kept[best.arch] = kept.get(best.arch, False) or (
                    best.ptx and (not same_major or target.ptx)
                )
        ordered = sorted(kept, key=Arch.sort_key)
        return ArchSet(self.name, tuple(ArchSpec(a, kept[a]) for a in ordered))

    def __str__(self) -> str:
        return " ".join(str(s) for s in self.specs)


def _runs_on(arch: Arch, ptx: bool, target: Arch) -> bool:
    """Whether code built for *arch* (with its PTX when *ptx*) runs on a *target* GPU: the same
    arch, an arch-specific one's base (9.0a code for a 9.0 target the set names), or a plain
    arch at or below it, of its major (SASS runs on later GPUs of one major) or with PTX."""
    if arch == target or (arch.suffix and arch.base == target):
        return True
    if arch.suffix or (arch.major, arch.minor) > (target.major, target.minor):
        return False
    return arch.major == target.major or ptx


# Which suffixes exist from which major on, and what each is called in messages.
_SUFFIX_FROM: dict[ArchSuffix, tuple[int, str]] = {
    "a": (9, "arch-specific"),
    "f": (10, "family-specific"),
}


@cache
def valid_entries() -> tuple[str, ...]:
    """Every arch the grammar accepts, suffixes included, in order: 3.0 ... 12.1a 12.1f."""
    entries = []
    for major, minor in known_arches():
        entries.append(f"{major}.{minor}")
        entries += [
            f"{major}.{minor}{s}" for s, (first, _) in _SUFFIX_FROM.items() if major >= first
        ]
    return tuple(entries)


@cache
def _valid_archs() -> frozenset[str]:
    return frozenset(valid_entries())


def _digits_for_lookalikes(token: str) -> str:
    """*token* with the letters o, O, l and I of its number read as the digits they look like."""
    match = _LOOKALIKE_RE.match(token)
    if match is None:
        return token
    return (match["kind"] or "") + match["number"].translate(_DIGITS_FOR) + match["rest"]


def _suggest(token: str) -> str | None:
    """The nearest valid entry for a bad token, or None: the token as the grammar's loose
    spellings read it (sm_90a, 90, 8.o), else its nearest in spelling."""
    loose = _LOOSE_RE.match(_digits_for_lookalikes(token))
    if loose:
        guess = f"{int(loose['major'])}.{loose['minor']}{loose['suffix'].lower()}"
        if guess in _valid_archs():
            ptx = loose["ptx"] is not None or (loose["kind"] or "").lower() == "compute"
            return guess + ("+PTX" if ptx else "")
    lowered = {name.lower(): name for name in NAMED_ARCHES}
    if token.lower() in lowered:
        return lowered[token.lower()]
    import difflib  # a bad token only: `inspect`, which parses no arch list, never loads it

    stem, plus, _ = token.partition("+")
    candidates = [*valid_entries(), *NAMED_ARCHES]
    close = difflib.get_close_matches(stem, candidates, n=1, cutoff=0.5)
    if close:
        return close[0] + ("+PTX" if plus and close[0] not in NAMED_ARCHES else "")
    return None


def _parse_entry(token: str, source: str) -> ArchSpec:
    spec = _valid_entry(token)
    if spec is not None:
        return spec
    # Only a bad token pays for a suggestion (difflib): a matrix may hold 300k arch sets.
    suggestion = _suggest(token)
    fix = (
        f"did you mean '{suggestion}'?"
        if suggestion
        else f"valid entries look like 8.0, 9.0a, 10.0f, 9.0+PTX or a name ({', '.join(NAMED_ARCHES)})"
    )
    match = _ENTRY_RE.match(token)
    if match is None:
        raise ConfigError(f"{source}: '{token}' is not a CUDA arch; {fix}")
    arch = Arch(int(match["major"]), int(match["minor"]), cast(ArchSuffix, match["suffix"]))
    base = f"{arch.major}.{arch.minor}"
    if (arch.major, arch.minor) not in known_arches():
        raise ConfigError(f"{source}: '{token}' is not a known CUDA arch; {fix}")
    first, kind = _SUFFIX_FROM[arch.suffix]
    raise ConfigError(
        f"{source}: '{token}': {kind} '{arch.suffix}' variants exist from {first}.0 on; use "
        f"'{base}'"
    )


@cache
def _valid_entry(token: str) -> ArchSpec | None:
    """The spec of a valid entry, else None; cached, since arch lists repeat a few tokens."""
    match = _ENTRY_RE.match(token)
    if match is None:
        return None
    arch = Arch(int(match["major"]), int(match["minor"]), cast(ArchSuffix, match["suffix"]))
    if str(arch) not in _valid_archs():  # 09.0 is 9.0
        return None
    return ArchSpec(arch, ptx=match["ptx"] is not None)


_NAMED_BY_LOWER = {name.lower(): value for name, value in NAMED_ARCHES.items()}


def _expand(tokens: Iterable[str]) -> Iterable[str]:
    """Replace torch's named arches by their entries; ``Name+PTX`` is accepted as ``Name``."""
    for token in tokens:
        key = token.lower()
        if key.endswith("+ptx") and key[:-4] in _NAMED_BY_LOWER and key not in _NAMED_BY_LOWER:
            key = key[:-4]
        if key in _NAMED_BY_LOWER:
            yield from _NAMED_BY_LOWER[key].split(";")
        else:
            yield token


def parse_arch_list(text: str, *, source: str) -> tuple[ArchSpec, ...]:
    """Parse an arch list; *source* names where it came from in error messages
    (``--archs``, ``TORCH_CUDA_ARCH_LIST``, ``matrix.yaml:12``)."""
    tokens = [t for t in _SEPARATORS.split(text.strip()) if t]
    if not tokens:
        raise ConfigError(
            f"{source}: the arch list is empty; name at least one arch, e.g. '8.0 9.0+PTX'"
        )
    if any(t.lower() == "native" for t in tokens):
        raise ConfigError(
            f"{source}: 'native' needs the GPUs of the build machine; name the archs to build, "
            "e.g. '8.0 9.0+PTX'"
        )
    merged: dict[Arch, bool] = {}
    for token in _expand(tokens):
        spec = _parse_entry(token, source)
        merged[spec.arch] = merged.get(spec.arch, False) or spec.ptx
    ordered = sorted(merged, key=Arch.sort_key)
    return tuple(ArchSpec(a, merged[a]) for a in ordered)


def arch_list_id(specs: Iterable[ArchSpec]) -> str:
    """A readable name for an arch list given on the command line, so two lists never share a
    variant id, a build folder or a local label: ``7.5 8.0 9.0+PTX`` → ``sm75-80-90ptx``."""
    return "sm" + "-".join(f"{s.arch.number}{'ptx' if s.ptx else ''}" for s in specs)


def is_arch_list_id(name: str) -> bool:
    """Whether *name* is spelled like an arch_list_id (``sm`` and a digit: ``sm75-80-90ptx``)."""
    return _ARCH_LIST_ID_RE.match(name) is not None
