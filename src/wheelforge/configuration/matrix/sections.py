"""The optional sections of matrix.yaml that stand on their own: tests (what `wheelforge test`
runs) and wheel-variants (PEP 825). Part of the model in configuration/matrix/model.py, described by
the same field metadata (configuration/matrix/keys.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wheelforge.configuration.archs import ArchSet, is_arch_list_id
from wheelforge.configuration.matrix.keys import Scalars, Strings, key

DEFAULT_TEST_COMMAND: tuple[str, ...] = (
    "{python}",
    "-m",
    "pytest",
    "-q",
    "-rs",
    "-p",
    "no:cacheprovider",
    "--junitxml={junitxml}",
    "{path}",
)


@dataclass(frozen=True, kw_only=True)
class TestsConfig:
    """The payload's test suite, which ``wheelforge test`` runs against each torch."""

    path: Path = field(
        metadata=key("the test suite, run against the installed wheel", shape=str, words="folder")
    )
    # installed beside the wheel (pytest, numpy, ...)
    requires: tuple[str, ...] = field(
        default=("pytest",),
        metadata=key("installed beside the wheel", shape=Strings, words="list of requirements"),
    )
    # torch versions to install and test
    torch: tuple[str, ...] = field(
        metadata=key(
            "the torches to test under",
            shape=Scalars,
            words="list of versions",
            required=False,
            default_words="the `torch` list, or the lowest version of a range",
        )
    )
    # with {python}, {path} and {junitxml} filled in
    command: tuple[str, ...] = field(
        default=DEFAULT_TEST_COMMAND,
        metadata=key(
            "`{path}` is required; without `{junitxml}` only the exit code counts", shape=Strings
        ),
    )


@dataclass(frozen=True, kw_only=True)
class WheelVariantsConfig:
    """PEP 825 variant wheels (experimental: PEP 825 is a draft). Each variant's wheel carries a
    variant label in its name and ``*.dist-info/variant.json``; ``null`` names the arch set (or
    variant id) also published as the null variant, the fallback with no properties."""

    enabled: bool = field(
        default=True,
        metadata=key("write variant wheels (the same as `wheelforge build --wheel-variants`)"),
    )
    null: str | None = field(
        default=None,
        metadata=key(
            "an arch set (with one variant; `--archs 7.5 9.0+PTX` builds one named `sm75-90ptx`) or a variant id whose build is also published as the null variant (label `null`, no properties)",
            shape=str,
        ),
    )

    def null_problem(self, arch_sets: tuple[ArchSet, ...]) -> str | None:
        """What is wrong with ``null`` for these arch sets: it must name one or a variant of
        one, or an arch set of --archs / TORCH_CUDA_ARCH_LIST (named like ``sm75-80-90ptx``)."""
        names = [a.name for a in arch_sets]
        if self.null is None or is_arch_list_id(self.null):
            return None
        if any(self.null == n or self.null.startswith(f"{n}-") for n in names):
            return None
        return (
            f"wheel-variants.null: '{self.null}' is neither an arch set ({', '.join(names)}) nor "
            "a variant of one; name the build to publish as the null variant"
        )
