"""Wheels: writing, repair, metadata, SBOM, variant properties. The library entry is
:func:`run_inspect` (packaging/inspectwheels.py): the fatbin entries of files, wheels and
folders, as an Inspection; packaging/testwheels.py runs the payload's tests on built wheels."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.packaging.inspectwheels import Inspection, run_inspect

__all__ = ["Inspection", "run_inspect"]
__getattr__ = lazy.exports(
    __name__,
    {
        "run_inspect": "wheelforge.packaging.inspectwheels",
        "Inspection": "wheelforge.packaging.inspectwheels",
    },
)
