"""``wheelforge matrix``: parse, list the variants (build/variantlist.py), print their table, the JSON
document (documents/variants_schema.py) or the GitHub Actions matrix."""

from __future__ import annotations

import json
from pathlib import Path

import click

from wheelforge.cli.options import cache_dir_option, json_option, matrix_option, tool_verbose_option


@click.command(name="matrix")
@matrix_option
@click.option("--archs", help="Arch list replacing the matrix's arch sets, as for build.")
@json_option("variants")
@click.option(
    "--github", is_flag=True, help='Print a GitHub Actions matrix ({"include": [...]}) for fan-out.'
)
@cache_dir_option
@tool_verbose_option
def matrix_command(
    matrix_path: Path, archs: str | None, as_json: bool, github: bool, cache_dir: Path | None
) -> None:
    """List the variants the matrix expands to (nothing is downloaded or built)."""
    from wheelforge.build.variantlist import list_variants
    from wheelforge.cli.console import print_whole
    from wheelforge.cli.matrix_screen import variants_table
    from wheelforge.configuration.settings import Flags, resolve
    from wheelforge.documents import kinds
    from wheelforge.documents.variants_schema import github_matrix, variants_document
    from wheelforge.foundation.document import to_document

    settings = resolve(Flags(matrix=matrix_path, archs=archs, cache_dir=cache_dir))
    listed = list_variants(settings)
    if github:  # one line: it goes into $GITHUB_OUTPUT
        click.echo(json.dumps(to_document(github_matrix(listed.variants))))
    elif as_json:
        kinds.echo(variants_document(listed.variants))
    else:
        print_whole(
            variants_table(
                listed.variants, settings.matrix, settings.out_dir, versions=listed.versions
            )
        )
