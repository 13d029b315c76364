"""SIGINT and SIGTERM become exceptions, so an interrupted wheelforge unwinds like a failed one:
proc.py stops the running tool's whole session, every ``finally`` removes its staging folder or
temporary file, locks are released, and the CLI prints one line and exits 130 or 143.

Python's defaults fall short: SIGTERM ends the interpreter at once (no cleanup, no message, and
the tools it started run on), and SIGINT's KeyboardInterrupt reaches only wheelforge when the
signal is sent to its PID alone, as CI runners and release scripts do.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from wheelforge.foundation.errors import Interrupted, Terminated

_ERRORS: dict[int, type[Interrupted]] = {
    signal.SIGINT: Interrupted,
    signal.SIGTERM: Terminated,
}


def _raise(signum: int, _frame: FrameType | None) -> None:
    # One interruption is enough: a second Ctrl-C must not cut the cleanup of the first short.
    for other in _ERRORS:
        signal.signal(other, signal.SIG_IGN)
    raise _ERRORS[signum]()


@contextmanager
def signals_as_errors() -> Iterator[None]:
    """Within this block SIGINT raises Interrupted and SIGTERM raises Terminated."""
    if threading.current_thread() is not threading.main_thread():
        yield  # Python delivers signals to the main thread only
        return
    previous = {signum: signal.signal(signum, _raise) for signum in _ERRORS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
