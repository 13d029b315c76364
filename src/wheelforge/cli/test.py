"""``wheelforge test``: parse, run the payload's tests (packaging/testwheels.py), print the table or the JSON
document, then the verdict."""

from __future__ import annotations

from pathlib import Path

import click

from wheelforge.cli.options import (
    build_dir_option,
    cache_dir_option,
    json_option,
    matrix_option,
    out_option,
    tool_verbose_option,
)


@click.command(name="test")
@matrix_option
@click.option(
    "--wheel",
    "wheels",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A wheel to test (repeatable) [default: the wheels the last build published].",
)
@click.option(
    "--torch",
    "torch_versions",
    multiple=True,
    help="A torch version to install and test under (repeatable) [default: tests.torch of the matrix].",
)
@click.option(
    "--torch-from",
    "torch_from",
    multiple=True,
    help="Test under the torch already installed for this Python interpreter, a path or a command on the PATH (repeatable; no download).",
)
@out_option
@build_dir_option
@cache_dir_option
@json_option("test")
@tool_verbose_option
def test_command(
    matrix_path: Path,
    wheels: tuple[Path, ...],
    torch_versions: tuple[str, ...],
    torch_from: tuple[str, ...],
    out: Path | None,
    build_dir: Path | None,
    cache_dir: Path | None,
    as_json: bool,
) -> None:
    """Run the payload's tests against the built wheels, under each torch of the matrix."""
    from wheelforge.cli.console import print_whole
    from wheelforge.cli.test_screen import test_table
    from wheelforge.configuration.settings import TestFlags, resolve_test
    from wheelforge.documents import kinds
    from wheelforge.documents.test_schema import torch_tests_document
    from wheelforge.packaging.testwheels import require_passed, run_test_command

    flags = TestFlags(
        matrix=matrix_path,
        wheels=wheels,
        torch=torch_versions,
        torch_from=torch_from,
        out=out,
        build_dir=build_dir,
        cache_dir=cache_dir,
    )
    outcomes = run_test_command(resolve_test(flags))
    if as_json:
        kinds.echo(torch_tests_document(outcomes))
    else:
        print_whole(test_table(outcomes))
    require_passed(outcomes)
