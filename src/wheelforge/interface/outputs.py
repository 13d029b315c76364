"""What ``wheelforge build`` writes besides wheels: the terminal summary, the JSON report
(--report), and in GitHub Actions the step summary and annotations. The CLI only calls these."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wheelforge.configuration.settings import BuildSettings, Flags, resolve
from wheelforge.foundation import log, writers
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.interface.console import output_console
from wheelforge.interface.render import print_build, print_dry_run
from wheelforge.running.build.command import run_build
from wheelforge.running.build.results import BuildReport

if TYPE_CHECKING:  # the report and CI modules load only when a report is wanted (no-op speed)
    from wheelforge.interface.documents.build_report import BuildReportDocument


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """``wheelforge build``'s command line: what resolves into the build's settings, and what
    decides its outputs."""

    flags: Flags
    report_path: Path | None = None  # --report PATH ('-': stdout)
    ci_mode: str | None = None  # --ci github|none; None: github when GITHUB_ACTIONS=true
    quiet: bool = False
    dry_run: bool = False

    @classmethod
    def from_command_line(cls, given: Mapping[str, Any]) -> BuildOptions:
        """The options as click names them (interface/cli.py's build command)."""
        options = dict(given)
        outputs = {
            name: options.pop(name) for name in ("report_path", "ci_mode", "quiet", "dry_run")
        }
        flags = Flags(
            matrix=options.pop("matrix_path"),
            wait=not options.pop("no_wait"),
            import_check=not options.pop("no_import_check"),
            **options,
        )
        return cls(flags=flags, **outputs)


def build(options: BuildOptions) -> None:
    """``wheelforge build``: the output modes (--ci, --quiet), then the plan alone (--dry-run)
    or the build: resolve, build, then write every output; the first failure is raised at the
    end (the CLI prints it and exits with its code), after the report says what failed and why."""
    if options.ci_mode is not None:
        log.set_ci("github" if options.ci_mode == "github" else None)
    log.set_quiet(options.quiet)
    flags, report_path = options.flags, options.report_path
    if options.dry_run:
        from wheelforge.running.build.dryrun import dry_run as plan_dry_run

        print_dry_run(plan_dry_run(resolve(flags)), output_console())
        return
    start = time.perf_counter()
    with contextlib.ExitStack() as held:
        report = None
        if report_path is not None and str(report_path) != "-":
            # Refused now, not after the build: a device, a FIFO nobody reads, a file of the
            # kernel. Nor the matrix the build reads, nor its pyproject.toml, however spelled or
            # linked.
            reads = (flags.matrix, flags.matrix.parent / "pyproject.toml")
            report = writers.open_output(report_path, what=f"--report {report_path}", reads=reads)
            held.callback(report.close)
        settings: BuildSettings | None = None
        try:
            settings = resolve(flags)
            result = run_build(settings)
        except WheelforgeError as exc:
            if _report_wanted(report_path):
                _write(
                    _report(settings, None, exc, time.perf_counter() - start), report_path, report
                )
            raise
        seconds = time.perf_counter() - start
        if log.quiet():
            if report_path is None or str(report_path) != "-":
                for v in result.variants:
                    click.echo(str(v.wheel))
        else:
            print_build(
                result, output_console(stderr=report_path is not None and str(report_path) == "-")
            )
        if _report_wanted(report_path):
            _write(_report(settings, result, None, seconds), report_path, report)
        _raise_failures(result)


def _report_wanted(report_path: Path | None) -> bool:
    """A JSON report is made for --report and for the GitHub Actions step summary only."""
    return report_path is not None or log.ci() == "github"


def _report(
    settings: BuildSettings | None,
    result: BuildReport | None,
    error: WheelforgeError | None,
    seconds: float,
) -> BuildReportDocument:
    from wheelforge.interface.documents.build_report import build_report

    return build_report(settings=settings, result=result, error=error, seconds=seconds)


def _raise_failures(result: BuildReport) -> None:
    """Every failed variant is named; the first one's error is raised (its code is the exit)."""
    if not result.failures:
        return
    first, *rest = result.failures
    for failure in rest:
        log.failed(failure.error)  # the CLI shows the raised one
    raise first.error


def _write(
    report: BuildReportDocument, report_path: Path | None, output: writers.Output | None
) -> None:
    from wheelforge.interface import ci
    from wheelforge.interface.documents.kinds import document_text

    text = document_text(report)
    if report_path is not None:
        if str(report_path) == "-":
            sys.stdout.write(text)
            sys.stdout.flush()
        elif output is not None:
            written = output.write(text)
            log.info(f"report: {written or report_path}")
    if log.ci() == "github":
        written = ci.append_step_summary(ci.step_summary(report))
        if written is not None:
            log.info(f"step summary appended to {written}")
