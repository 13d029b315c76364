"""Click options that more than one command shares: -v/--verbose, --json, --cache-dir, --matrix,
--out, --build-dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from wheelforge.foundation import log, numbers, readers


class WholeNumber(click.ParamType[int, Any]):
    """A whole number of ASCII digits from *low* to *high*, parsed by foundation/numbers (click's
    INT takes '٤' as 4 and prints a 5,000-digit value back)."""

    name = "integer"

    def __init__(self, *, low: int, high: int) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if self.low < 0 and text.startswith("-"):  # a negative one, for the command to word
            magnitude = numbers.whole(text[1:], high=-self.low)
            number = None if magnitude is None else -magnitude
        else:
            number = numbers.whole(text, low=max(self.low, 0), high=self.high)
        if number is None:
            shown = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
            self.fail(
                f"'{shown}' is not a valid integer from {self.low} to {self.high} (ASCII digits)",
                param,
                ctx,
            )
        return number


def _verbosity(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    log.set_verbosity(value)
    return value


def verbose_option(help_text: str) -> Callable[[Any], Any]:
    """``-v``/``--verbose``, counted and applied to the log before the command runs."""
    return click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=_verbosity,
        is_eager=True,
        help=help_text,
    )


# The -v of every command but cache's, which runs no tool and says its own.
tool_verbose_option = verbose_option(
    "Show commands and tool output (-vv: ninja's full command lines too)."
)


def json_option(document: str) -> Callable[[Any], Any]:
    """``--json`` (the parameter ``as_json``): print the command's one JSON document instead of
    its tables; *document* names it, as its schema file does (documents/)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help=(
            "Print one JSON document instead of tables "
            f"(its schema: wheelforge/data/{document}.schema.json)."
        ),
    )


def _cache_folder(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None and value.exists() and not value.is_dir():
        kind = readers.kind_of(value.stat().st_mode) or "a file"
        raise click.BadParameter(
            f"{value} is {kind}, not a folder; pass --cache-dir a folder (or remove the file)"
        )
    return value


cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(path_type=Path),
    callback=_cache_folder,
    help=(
        "The user cache: provisioned toolkits, test environments, kept repairs, probes "
        "[default: $XDG_CACHE_HOME/wheelforge, else ~/.cache/wheelforge]."
    ),
)
matrix_option = click.option(
    "--matrix",
    "matrix_path",
    type=click.Path(path_type=Path),
    default=Path("matrix.yaml"),
    show_default=True,
    help="The matrix file.",
)
out_option = click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="The folder for wheels [default: dist/ beside the matrix].",
)
build_dir_option = click.option(
    "--build-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="The folder for intermediate files [default: build/wheelforge/ beside the matrix].",
)
