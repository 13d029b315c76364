"""The torch versions of a matrix: a list or a range; the lowest sets the stable-ABI target."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from wheelforge.foundation import numbers

# The oldest torch whose headers support TORCH_TARGET_VERSION (torch/csrc/stable/version.h).
OLDEST_STABLE_TARGET = Version("2.9")
# `torch: installed`: an unstable-ABI build compiles against the build Python's own torch (no pip,
# no network), as a release box or a Docker image with torch baked in has it.
INSTALLED = "installed"


@dataclass(frozen=True, kw_only=True)
class TorchSpec:
    """``versions`` is the explicit list, or empty for a range given by ``specifier``."""

    text: str
    specifier: SpecifierSet
    versions: tuple[Version, ...]
    lowest: Version
    installed: bool = False  # `torch: installed`: the build Python's torch, whichever it is
    # The highest of the extensions' own targets (``extensions[].torch-target``), when one is
    # above the lowest torch: the wheel loads only from there (the matrix reader sets it).
    highest_target: tuple[int, int] | None = None

    @property
    def target(self) -> tuple[int, int]:
        """The target of an extension that names none: the lowest torch."""
        return (self.lowest.major, self.lowest.minor)

    @property
    def floor(self) -> tuple[int, int]:
        """The lowest torch the whole wheel loads on: the highest of its extensions' targets."""
        return max(self.target, self.highest_target or self.target)

    @property
    def requirement(self) -> str:
        """The wheel's Requires-Dist on torch: every torch from its floor up (the highest
        extension target), within the range's upper bounds when one was given."""
        major, minor = self.floor
        upper = [str(s) for s in self.specifier if s.operator in ("<", "<=", "!=")]
        return "torch" + ",".join([f">={major}.{minor}", *upper])

    @property
    def as_written(self) -> str:
        """The wheel's Requires-Dist on torch when none of its binaries uses torch: the range as
        written, in packaging's spelling (``'>=2.4,<3'`` -> ``torch<3,>=2.4``, as setuptools
        writes a [project] dependency), with no floor of its own; ``torch`` for `installed`."""
        return f"torch{self.specifier}"


def target_macro(target: tuple[int, int]) -> str:
    """``TORCH_TARGET_VERSION`` of *target*: ``major << 56 | minor << 48``, as
    torch/csrc/stable/version.h defines its version constants."""
    major, minor = target
    return f"0x{(major << 56) | (minor << 48):016x}"


def parse_torch_spec(value: str | list[str]) -> TorchSpec:
    """Parse ``">=2.10"`` / ``">=2.10,<2.15"`` / ``"2.10"``, a list of versions, or
    ``installed`` (the build Python's torch, for the unstable ABI).
    Raises ValueError with a message that says what to write instead."""
    if isinstance(value, list):
        if not value:
            raise ValueError(
                "the list of torch versions is empty; name at least one, e.g. ['2.10']"
            )
        versions = []
        for item in value:
            try:
                versions.append(numbers.version(item))
            except InvalidVersion:
                raise ValueError(
                    f"'{item}' is not a version; write e.g. '2.10' or '2.11.0'"
                ) from None
        ordered = tuple(sorted(set(versions)))
        spec = SpecifierSet(f">={ordered[0]}")
        return TorchSpec(text=", ".join(value), specifier=spec, versions=ordered, lowest=ordered[0])
    text = value.strip()
    if text == INSTALLED:
        # No version to target: the reader refuses it for the stable ABI.
        return TorchSpec(
            text=text,
            specifier=SpecifierSet(),
            versions=(),
            lowest=OLDEST_STABLE_TARGET,
            installed=True,
        )
    try:
        single = numbers.version(text)
    except InvalidVersion:
        single = None
    if single is not None:
        return TorchSpec(
            text=text, specifier=SpecifierSet(f">={single}"), versions=(single,), lowest=single
        )
    try:
        spec = numbers.specifier(text)
    except InvalidSpecifier:
        raise ValueError(
            f"'{text}' is neither a version nor a range; write e.g. '>=2.10' or '>=2.10,<2.15'"
        ) from None
    lows = [
        Version(s.version.removesuffix(".*"))
        for s in spec
        if s.operator in (">=", ">", "==", "~=", "===")
    ]
    if not lows:
        raise ValueError(
            f"the range '{text}' has no lower bound, so there is no target version; "
            "add one, e.g. '>=2.10'"
        )
    return TorchSpec(text=text, specifier=spec, versions=(), lowest=max(lows))
