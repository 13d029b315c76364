"""The build as a library: :func:`run_build` turns BuildSettings into built wheels and a
:class:`BuildReport` (build/orchestration.py); the rest of the package is its steps (prepare,
compile, pack, verify, publish), which the CLI never calls one by one."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.build.orchestration import run_build
    from wheelforge.build.results import BuildReport

__all__ = ["BuildReport", "run_build"]
__getattr__ = lazy.exports(
    __name__,
    {
        "run_build": "wheelforge.build.orchestration",
        "BuildReport": "wheelforge.build.results",
    },
)
