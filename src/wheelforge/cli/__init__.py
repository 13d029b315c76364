"""The command line: one module per command (``build.py``: options, click command, exit codes)
and its screen (``build_screen.py``), the group (cli/app.py) and what knows
argv, stdout and the process (entry.py, quicknoop.py, filetrace.py, signals.py). Kept free of
imports here: the quick no-op path imports this package before anything else."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.cli.entry import main

__all__ = ["main"]
__getattr__ = lazy.exports(
    __name__,
    {
        "main": "wheelforge.cli.entry",
    },
)
