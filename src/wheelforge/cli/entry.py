"""The console script and ``python -m wheelforge``: a ``build`` that the last identical run
showed has nothing to do is answered by cli/quicknoop.py before the CLI (click, rich,
the layers) is imported, and a plain ``inspect PATH...`` by cli/inspect.py
without click; every other command, and a build it cannot vouch for, is cli.main's,
traced so that a no-op is recorded for the next time."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["inspect"]:  # before quicknoop, whose tracing an inspect never needs
        from wheelforge.cli.inspect import quick

        code = quick(given[1:])
        if code is not None:
            return code
    from wheelforge.cli import quicknoop

    try:
        if quicknoop.replay(given):
            return 0
    except KeyboardInterrupt:  # as cli.main says it, without loading rich to say it
        from wheelforge.foundation.errors import Interrupted

        sys.stderr.write("error: interrupted\n")
        return Interrupted.exit_code
    with quicknoop.recording(given) as run:
        from wheelforge.cli.app import main as full

        code = full(given)
        run.done(code)
    return code
