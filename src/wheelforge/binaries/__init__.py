"""Reading built binaries: one ELF/wheel-member reader, the fatbin, the ABI rules. The
library entry is :func:`run_check` (binaries/checkwheels.py): wheels and .so files judged
against the torch ABI, as a CheckResult."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.binaries.checkwheels import CheckResult, run_check

__all__ = ["CheckResult", "run_check"]
__getattr__ = lazy.exports(
    __name__,
    {
        "run_check": "wheelforge.binaries.checkwheels",
        "CheckResult": "wheelforge.binaries.checkwheels",
    },
)
