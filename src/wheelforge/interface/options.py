"""Click options that more than one command module shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from wheelforge.foundation import log, numbers


class WholeNumber(click.ParamType[int, Any]):
    """A whole number of ASCII digits from *low* to *high*, parsed by foundation/numbers (click's
    INT takes '٤' as 4 and prints a 5,000-digit value back)."""

    name = "integer"

    def __init__(self, *, low: int, high: int) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        number = numbers.whole(str(value), low=self.low, high=self.high)
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
        "-v", "--verbose", count=True, expose_value=False, callback=_verbosity, is_eager=True,
        help=help_text,
    )  # fmt: skip
