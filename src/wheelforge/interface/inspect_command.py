"""``wheelforge inspect``: read, then print the tables or the JSON document. The click command
(cli.py) and the quick path (:func:`quick`, asked first by entry.py) both run
:func:`inspect_command`, so they print the same thing.

The quick path exists because inspect's own work is small next to its start-up: the reader
lists the 5737 entries of libcublasLt in a few hundredths of a second, while importing click,
the CLI's commands and their layers took several times that (issue 33: ``inspect`` was 0.7x
cuobjdump on libcufft, whose scan is quick). So ``inspect PATH...`` and ``inspect --json
PATH...`` skip click, and import only the reader and what prints its result; anything else
(``-v``, ``--help``, ``--``, an option it does not know, no path at all) is cli.main's, whose
parser says what is wrong.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path


def inspect_command(paths: Sequence[Path], *, as_json: bool) -> None:
    """List the fatbin entries of *paths* (running/inspect.py); variant wheels also get their
    properties checked against their binaries (VerificationError when they disagree)."""
    from wheelforge.running.inspect import require_agree, run_inspect

    found = run_inspect(paths)
    if as_json:
        from wheelforge.interface.documents import kinds
        from wheelforge.interface.documents.inspection import inspect_document

        kinds.echo(inspect_document(found.reports, found.checks))
    else:
        from wheelforge.interface.render_inspect import print_inspect

        print_inspect(found.reports)
        if found.checks:
            from wheelforge.interface.console import print_whole
            from wheelforge.interface.render_variants import variant_checks_table

            print_whole(variant_checks_table(found.checks))
    require_agree(found)


def quick(args: Sequence[str]) -> int | None:
    """The exit code of ``inspect`` run on *args* (what follows ``inspect``) without the CLI's
    parser, or None when *args* are not plain paths and ``--json``: then cli.main runs it."""
    paths = [arg for arg in args if arg != "--json"]
    if not paths or any(arg.startswith("-") for arg in paths):
        return None
    from wheelforge.foundation.errors import WheelforgeError

    try:
        inspect_command([Path(arg) for arg in paths], as_json=len(paths) < len(args))
    except WheelforgeError as exc:  # as cli.main says it
        from wheelforge.foundation import log

        log.set_ci(log.detect_ci(os.environ))
        log.failed(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        from wheelforge.foundation.errors import Interrupted

        sys.stderr.write("error: interrupted\n")
        return Interrupted.exit_code
    return 0
