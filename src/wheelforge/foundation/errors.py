"""The one exception hierarchy. Each class carries its exit code; messages say how to fix it.

The CLI catches :class:`WheelforgeError` once, at the top, and prints ``error: <message>``;
nothing below the CLI exits or prints errors itself. Exit codes go by class, so a CI job can
tell a bad matrix from a broken compiler from a wheel that failed a check (the habit of
cibuildwheel's ``errors.py``); docs/usage.md lists them.
"""

from __future__ import annotations

import traceback as tracebacks
from collections.abc import Sequence

from wheelforge.foundation.diagnostics import Diagnostic


class WheelforgeError(Exception):
    """Base class of every error wheelforge reports to a user."""

    exit_code = 1
    kind = "error"  # the class's name in a build report: configuration, tool, verification, ...
    # A Python traceback worth showing with -v (a bug of wheelforge's own code), else None.
    traceback: str | None = None

    def __init__(
        self,
        message: str,
        *,
        details: str | None = None,
        diagnostics: tuple[Diagnostic, ...] = (),
        problems: tuple[str, ...] = (),
    ) -> None:
        # str(): every line (a test's match=, a traceback while debugging)
        super().__init__("\n".join([*problems, message]))
        self.message = message
        # Extra lines shown under the one-line message, e.g. the tail of a compiler's output.
        self.details = details
        # Where in which file the problem is (matrix.yaml lines, compiler errors): CI annotations.
        self.diagnostics = diagnostics
        # Several errors of one file, in its line order: on the screen each an ``error:`` line
        # of its own, before *message*, which counts them (Problems.raise_if_any). *details*
        # holds them too, for what reads an error as its message and details (the report).
        self.problems = problems


class ConfigError(WheelforgeError):
    """Bad configuration or usage: matrix.yaml, a flag or an environment variable (exit 2)."""

    exit_code = 2
    kind = "configuration"


class ToolError(WheelforgeError):
    """An external tool failed to run or failed (exit 3)."""

    exit_code = 3
    kind = "tool"


class BuildError(ToolError):
    """Compiling, linking, packing or repairing a variant failed (exit 3)."""

    kind = "build"


class VerificationError(WheelforgeError):
    """A built artifact does not match what was asked for: archs, ABI rules, the import check,
    the size budget (exit 4)."""

    exit_code = 4
    kind = "verification"


class SizeBudgetError(VerificationError):
    """A wheel is larger than its size budget (exit 4); nothing was published."""

    kind = "size-budget"


class EnvironmentProblem(WheelforgeError):
    """This machine lacks something the build needs: a CUDA toolkit, torch, a compiler, ninja
    (exit 5). Installing it fixes the build; the matrix is fine."""

    exit_code = 5
    kind = "environment"


class BinaryFormatError(VerificationError):
    """A binary (ELF, fatbin, wheel) is truncated or corrupt; says which file and offset (exit 4)."""

    kind = "binary-format"

    def __init__(self, path: str, offset: int | None, problem: str) -> None:
        where = f"{path}" if offset is None else f"{path} at offset {offset:#x}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.offset = offset
        self.problem = problem


class RuleBug(WheelforgeError):
    """An ABI rule's own code raised: a bug in that rule, not a fault of the binary it judged
    (exit 70, sysexits.h's EX_SOFTWARE). The message names the rule; -v shows the traceback."""

    exit_code = 70
    kind = "rule-bug"

    def __init__(self, rule: str, binary: str, exc: BaseException) -> None:
        super().__init__(
            f"a bug in rule {rule}: {type(exc).__name__}: {exc} (while judging {binary}); "
            "the rule is at fault, not the binary: please report it with the traceback -v shows"
        )
        self.rule = rule
        self.traceback = "".join(tracebacks.format_exception(type(exc), exc, exc.__traceback__))


class Interrupted(WheelforgeError):
    """SIGINT reached wheelforge: the running tools were stopped, nothing partial was kept.
    Exit 128 + the signal number, as a shell reports a process that a signal ended."""

    exit_code = 130
    kind = "interrupted"
    signal_name = "SIGINT"

    def __init__(self) -> None:
        super().__init__(
            f"interrupted by {self.signal_name}: stopped every tool wheelforge had started and kept "
            "nothing half-written; run the same command again to resume"
        )


class Terminated(Interrupted):
    """SIGTERM reached wheelforge (a CI runner cancelling a job, a release script's timeout)."""

    exit_code = 143
    signal_name = "SIGTERM"


def first_and_rest(
    messages: Sequence[str], *, prefix: str = "", unlisted: int = 0
) -> tuple[str, str | None]:
    """Several problems as one error: the first, with "(and N more above)", then the rest as its
    details (None when there is one), which log.error prints before it. *unlisted* problems were counted but not kept: N counts
    them, and the details end with a line that says so."""
    first, rest = messages[0], list(messages[1:])
    more = len(rest) + unlisted
    if unlisted:
        rest.append(f"... and {unlisted} more problems not listed; fix these first")
    return (
        prefix + first + (f" (and {more} more above)" if more else ""),
        "\n".join(rest) or None,
    )
