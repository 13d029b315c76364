"""``wheelforge check``: parse, check (binaries/checkwheels.py), print the table or the JSON document, then
the verdict."""

from __future__ import annotations

from pathlib import Path

import click

from wheelforge.cli.options import json_option, tool_verbose_option
from wheelforge.configuration import abi as abis


@click.command(name="check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--target",
    help="Lowest torch the binaries must load on, e.g. 2.10 [default: a wheel's Requires-Dist on torch].",
)
@click.option(
    "--python-abi", help="abi3 floor of bare shared objects, e.g. cp310 [default: a wheel's tag]."
)
@click.option(
    "--abi",
    type=click.Choice(abis.NAMES),
    help="Whose rules apply [default: a wheel's binaries and requirement say (libtorch C++ "
    "symbols and an exact torch pin: unstable; else stable), whatever its tag; stable for bare "
    "shared objects].",
)
@click.option(
    "--torch-from",
    "torch_from",
    metavar="PYTHON",
    help="Confirm the verdict by loading each binary in this interpreter's environment (its "
    "torch imported first); a load failure is an error [default: no loading].",
)
@json_option("check")
@tool_verbose_option
def check_command(
    paths: tuple[Path, ...],
    target: str | None,
    python_abi: str | None,
    abi: abis.AbiName | None,
    torch_from: str | None,
    as_json: bool,
) -> None:
    """Check wheels or shared objects against the rules of their ABI (exit 4 on a violation)."""
    from wheelforge.binaries.checkwheels import require_clean, run_check
    from wheelforge.cli.check_screen import check_table
    from wheelforge.cli.console import print_whole
    from wheelforge.configuration.settings import resolve_python
    from wheelforge.documents import kinds
    from wheelforge.documents.check_schema import check_document

    interpreter = resolve_python(torch_from, "--torch-from") if torch_from else None
    results = run_check(
        list(paths), target=target, python_abi=python_abi, abi=abi, torch_from=interpreter
    )
    if as_json:
        kinds.echo(check_document(results))
    else:
        print_whole(check_table(results))
    require_clean(results)
