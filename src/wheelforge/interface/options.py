"""Click options that more than one command module shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from wheelforge.foundation import log


def _verbosity(_ctx: click.Context, _param: click.Parameter, value: int) -> int:
    log.set_verbosity(value)
    return value


def verbose_option(help_text: str) -> Callable[[Any], Any]:
    """``-v``/``--verbose``, counted and applied to the log before the command runs."""
    return click.option(
        "-v", "--verbose", count=True, expose_value=False, callback=_verbosity, is_eager=True,
        help=help_text,
    )  # fmt: skip
