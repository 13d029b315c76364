"""The one exception hierarchy. Each class carries its exit code; messages say how to fix it.

The CLI catches :class:`WheelforgeError` once, at the top, and prints ``error: <message>``;
nothing below the CLI exits or prints errors itself.
"""

from __future__ import annotations

from collections.abc import Sequence


class WheelforgeError(Exception):
    """Base class of every error wheelforge reports to a user."""

    exit_code = 1

    def __init__(self, message: str, *, details: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        # Extra lines shown under the one-line message, e.g. the tail of a compiler's output.
        self.details = details


class ConfigError(WheelforgeError):
    """Bad configuration or usage: matrix.yaml, a flag or an environment variable (exit 2)."""

    exit_code = 2


class ToolError(WheelforgeError):
    """An external tool is missing, too old, or failed to run."""


class BuildError(WheelforgeError):
    """Compiling, linking, packing or repairing a variant failed."""


class VerificationError(WheelforgeError):
    """A built artifact does not match what was asked for (archs, ABI rules)."""


class BinaryFormatError(WheelforgeError):
    """A binary (ELF, fatbin, wheel) is truncated or corrupt; says which file and offset."""

    def __init__(self, path: str, offset: int | None, problem: str) -> None:
        where = f"{path}" if offset is None else f"{path} at offset {offset:#x}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.offset = offset
        self.problem = problem


def first_and_rest(messages: Sequence[str], *, prefix: str = "") -> tuple[str, str | None]:
    """Several problems as one error: the first, with "(and N more below)", then the rest as its
    details (None when there is one)."""
    first, rest = messages[0], messages[1:]
    return (
        prefix + first + (f" (and {len(rest)} more below)" if rest else ""),
        "\n".join(rest) or None,
    )
