"""wheelforge: build matrices of stable-ABI abi3 wheels for CUDA PyTorch extensions.

The library face: :func:`run_build` (settings to a BuildReport), :func:`check` (wheels against
the torch ABI) and :func:`inspect` (the fatbin entries of files and wheels), imported on first
use so that ``import wheelforge`` stays cheap."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

__version__ = "0.1.0"
# The distribution on PyPI (``pip install wheelforge-cuda``; the name ``wheelforge`` there is
# another project's). The command and the import package stay ``wheelforge``.
DISTRIBUTION = "wheelforge-cuda"

if TYPE_CHECKING:
    from wheelforge.binaries.checkwheels import run_check as check
    from wheelforge.build.orchestration import run_build
    from wheelforge.packaging.inspectwheels import run_inspect as inspect

__all__ = ["DISTRIBUTION", "__version__", "check", "inspect", "run_build"]
__getattr__ = lazy.exports(
    __name__,
    {
        "run_build": "wheelforge.build.orchestration",
        "check": "wheelforge.binaries.checkwheels:run_check",
        "inspect": "wheelforge.packaging.inspectwheels:run_inspect",
    },
)
