"""The one exception hierarchy. Each class carries its exit code; messages say how to fix it.

The CLI catches :class:`WheelforgeError` once, at the top, and prints ``error: <message>``;
nothing below the CLI exits or prints errors itself.
"""

from __future__ import annotations


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


class EnvironmentProblem(WheelforgeError):
    """The machine can't do what was asked: a folder can't be created or written (EACCES, a full
    disk), or another wheelforge holds a lock that --no-wait refused to wait for."""

    exit_code = 5


class Interrupted(WheelforgeError):
    """SIGINT reached wheelforge: the running tools were stopped, nothing partial was kept.
    Exit 128 + the signal number, as a shell reports a process that a signal ended."""

    exit_code = 130
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
