"""The click group, each command registered from its module in cli/ (which parses, calls its
library entry and prints its screen or document), and main, where errors are caught once."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from wheelforge import __version__
from wheelforge.cli import build, cache, check, init, inspect, matrix, test, toolkit
from wheelforge.foundation import log
from wheelforge.foundation.errors import WheelforgeError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wheelforge")
def cli() -> None:
    """Build matrices of stable-ABI abi3 wheels for CUDA PyTorch extensions."""


cli.add_command(build.build_command)
cli.add_command(inspect.make_command())
cli.add_command(matrix.matrix_command)
cli.add_command(toolkit.toolkit_group)
cli.add_command(cache.cache_group)
cli.add_command(check.check_command)
cli.add_command(test.test_command)
cli.add_command(init.init_command)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: runs the CLI and turns every error into one message and an exit code."""
    from wheelforge.cli.signals import signals_as_errors
    from wheelforge.toolchain import warmtorch

    log.set_ci(log.detect_ci(os.environ))
    try:
        with signals_as_errors(), warmtorch.session():
            cli.main(
                args=list(argv) if argv is not None else None,
                prog_name="wheelforge",
                standalone_mode=False,
            )
    except WheelforgeError as exc:
        log.failed(exc)
        return exc.exit_code
    except click.exceptions.Abort:
        log.error("interrupted")
        return EXIT_INTERRUPTED
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "wheelforge"
        log.error(f"{exc.format_message()} (see '{where} --help')")
        return EXIT_USAGE
    except click.ClickException as exc:
        log.error(exc.format_message())
        return exc.exit_code if exc.exit_code else EXIT_USAGE
    except KeyboardInterrupt:
        log.error("interrupted")
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
