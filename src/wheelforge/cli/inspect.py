"""``wheelforge inspect``: read (packaging/inspectwheels.py), then print the tables or the JSON document.
The click command (:func:`make_command`, registered by cli/app.py) and the quick path
(:func:`quick`, asked first by entry.py) both run :func:`inspect_command`, so they print the
same thing.

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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the quick path never imports click
    import click


def inspect_command(paths: Sequence[Path], *, as_json: bool) -> None:
    """List the fatbin entries of *paths* (packaging/inspectwheels.py); variant wheels also get their
    properties checked against their binaries (VerificationError when they disagree)."""
    from wheelforge.packaging.inspectwheels import require_agree, run_inspect

    found = run_inspect(paths)
    if as_json:
        from wheelforge.documents import kinds
        from wheelforge.documents.inspect_schema import inspect_document

        kinds.echo(inspect_document(found.reports, found.checks))
    else:
        from wheelforge.cli.inspect_screen import print_inspect

        print_inspect(found.reports)
        if found.checks:
            from wheelforge.cli.console import print_whole
            from wheelforge.cli.inspect_screen import variant_checks_table

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


def make_command() -> click.Command:
    """The click command, made when cli/app.py registers it: this module is also the quick path's,
    which never imports click."""
    import click

    from wheelforge.cli.options import json_option, tool_verbose_option

    @click.command(name="inspect")
    @click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
    @json_option("inspect")
    @tool_verbose_option
    def inspect(paths: tuple[Path, ...], as_json: bool) -> None:
        """List the SASS and PTX in shared objects, object files, wheels or folders.

        For a variant wheel (PEP 825, experimental) also its variant properties, and any that
        disagree with its binaries (exit 4)."""
        inspect_command(paths, as_json=as_json)

    return inspect
