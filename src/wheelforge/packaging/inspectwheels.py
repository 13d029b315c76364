"""``wheelforge inspect``: the fatbin entries of shared objects, object files, wheels and folders
(read by binaries/inspection.py), and a variant wheel's properties (PEP 825, experimental)
checked against its binaries; the verdict (they disagree: exit 4) comes after the results are
shown.

The quick path (asked first by cli/entry.py) runs this without click: it imports only the reader, and the variant checks only when a wheel is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing it would load the wheel-variant checks for every run
    from wheelforge.binaries.facts import BinaryContents
    from wheelforge.packaging.wheel_variants import VariantCheck


@dataclass(frozen=True)
class Inspection:
    """What ``inspect`` found: each binary's fatbin entries, and each variant wheel's check."""

    reports: tuple[BinaryContents, ...]
    checks: tuple[VariantCheck, ...] = ()


def run_inspect(paths: Sequence[Path]) -> Inspection:
    """The fatbin entries of *paths*; variant wheels also get their properties checked against
    their binaries."""
    from wheelforge.binaries.elf import split_member
    from wheelforge.binaries.inspection import inspect_paths

    reports = inspect_paths(list(paths))
    # Only wheels have variant properties: a run on shared objects never loads their checks.
    if any(p.suffix == ".whl" for p in paths) or any(split_member(r.path)[0] for r in reports):
        from wheelforge.packaging.wheel_variants import check_wheels

        return Inspection(tuple(reports), tuple(check_wheels(list(paths), reports)))
    return Inspection(tuple(reports))


def require_agree(inspection: Inspection) -> None:
    """Raise VerificationError when a variant wheel's properties disagree with its binaries."""
    if inspection.checks:
        from wheelforge.packaging.wheel_variants import require_agree as agree

        agree(inspection.checks)
