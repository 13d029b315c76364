"""``wheelforge build``: its options parsed into one BuildOptions, the build run
(build/orchestration.run_build), then what it writes besides wheels: the terminal summary, the
JSON report (--report), in GitHub Actions the step summary and annotations."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wheelforge.cli.options import (
    WholeNumber,
    build_dir_option,
    cache_dir_option,
    matrix_option,
    out_option,
    tool_verbose_option,
)
from wheelforge.configuration.matrix.keys import COMPILE_CACHES
from wheelforge.foundation import log, numbers, writers
from wheelforge.foundation.errors import WheelforgeError

if TYPE_CHECKING:  # the report and CI modules load only when a report is wanted (no-op speed)
    from wheelforge.build.results import BuildReport
    from wheelforge.configuration.settings import BuildSettings, Flags
    from wheelforge.documents.build_report_schema import BuildReportDocument


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
        """The options as click names them (build_command below)."""
        from wheelforge.configuration.settings import Flags

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


def _report_wanted(report_path: Path | None) -> bool:
    """A JSON report is made for --report and for the GitHub Actions step summary only."""
    return report_path is not None or log.ci() == "github"


def _report(
    settings: BuildSettings | None,
    result: BuildReport | None,
    error: WheelforgeError | None,
    seconds: float,
) -> BuildReportDocument:
    from wheelforge.documents.build_report_schema import build_report

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
    from wheelforge.cli import ci
    from wheelforge.documents.kinds import document_text

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


compile_cache_option = click.option(
    "--compile-cache",
    type=click.Choice(COMPILE_CACHES),
    help=(
        "Compile cache in front of the compilers (else WHEELFORGE_COMPILE_CACHE, else "
        "matrix.yaml's compile-cache, else auto: ccache or sccache when installed)."
    ),
)
no_wait_option = click.option(
    "--no-wait",
    is_flag=True,
    help=(
        "Fail at once when another wheelforge is building into the same build folder "
        "[default: wait]."
    ),
)
verify_option = click.option(
    "--verify-reproducible",
    is_flag=True,
    help=(
        "Build each variant a second time in a temporary folder; fail unless the wheels are "
        "identical."
    ),
)
no_import_check_option = click.option(
    "--no-import-check",
    "no_import_check",
    is_flag=True,
    help="Do not import each extension module (under the build torch) before publishing.",
)


@click.command(name="build")
@matrix_option
@click.option(
    "--archs",
    help='Arch list replacing the matrix\'s arch sets, e.g. "7.5 8.0 9.0+PTX" '
    "(else TORCH_CUDA_ARCH_LIST, else matrix.yaml).",
)
@out_option
@build_dir_option
@click.option(
    "-j",
    "--jobs",
    type=WholeNumber(low=1, high=numbers.MAX_JOBS),
    help="Parallel compile jobs (else MAX_JOBS, else ninja's default).",
)
@click.option(
    "--python",
    help="Python whose torch the extension is built against: a path or a command on the PATH "
    "[default: this one].",
)
@click.option(
    "--only",
    multiple=True,
    metavar="ID",
    help="Build only this variant (repeatable); 'wheelforge matrix' lists them.",
)
@click.option(
    "--torch-from",
    metavar="PY",
    help="Unstable ABI: build against the torch of this Python (a path or a command on the PATH), "
    "no pip and no network, instead of the matrix's torch versions.",
)
@click.option(
    "--offline",
    is_flag=True,
    help="Never download a CUDA toolkit or run pip for a torch; fail instead.",
)
@compile_cache_option
@no_import_check_option
@no_wait_option
@verify_option
@cache_dir_option
@click.option(
    "--size-budget",
    metavar="SIZE",
    help=(
        "Largest wheel allowed, e.g. 100MiB, 450MB [default: size-budget of the matrix, else "
        "100MiB]."
    ),
)
@click.option(
    "--memory-limit",
    metavar="SIZE",
    help=(
        "Memory the compiles may use at once, e.g. 24GiB; the schedule keeps each moment's "
        "compiles under it [default: WHEELFORGE_MEMORY_LIMIT, else memory-limit of the matrix, "
        "else what the machine and its cgroups leave]."
    ),
)
@click.option(
    "--dist-scheduler",
    metavar="URL",
    help=(
        "Spread the compiles over sccache-dist's build servers through this scheduler (its "
        "client token in WHEELFORGE_DIST_TOKEN) [default: WHEELFORGE_DIST_SCHEDULER]."
    ),
)
@click.option(
    "--report",
    "report_path",
    metavar="PATH",
    type=click.Path(path_type=Path, dir_okay=False, allow_dash=True),
    help=(
        "Write a JSON report of the run to PATH ('-': stdout), also when it fails (its schema: "
        "wheelforge/data/build-report.schema.json)."
    ),
)
@click.option(
    "--ci",
    "ci_mode",
    type=click.Choice(["github", "none"]),
    help=(
        "CI output: log groups, annotations, step summary [default: github when "
        "GITHUB_ACTIONS=true]."
    ),
)
@click.option(
    "--dry-run", is_flag=True, help="Show the plan and the compile commands; build nothing."
)
@click.option(
    "-q", "--quiet", is_flag=True, help="Print only the wheels' paths, warnings and errors."
)
@click.option(
    "--wheel-variants",
    is_flag=True,
    help="EXPERIMENTAL (PEP 825 draft): variant wheels, variant.json from the fatbins.",
)
@tool_verbose_option
def build_command(**given: Any) -> None:
    """Build the matrix's wheels and check their fatbins."""
    # ``wheelforge build``: the output modes (--ci, --quiet), then the plan alone (--dry-run) or the
    # build: resolve, build, then write every output; the first failure is raised at the end (the
    # CLI prints it and exits with its code), after the report says what failed and why.
    from wheelforge.build import preflight
    from wheelforge.build.orchestration import run_build
    from wheelforge.cli.build_screen import print_build, print_dry_run
    from wheelforge.cli.console import output_console
    from wheelforge.configuration.settings import resolve

    options = BuildOptions.from_command_line(given)

    if options.ci_mode is not None:
        log.set_ci("github" if options.ci_mode == "github" else None)
    log.set_quiet(options.quiet)
    flags, report_path = options.flags, options.report_path
    if options.dry_run:
        from wheelforge.build.dryrun import dry_run as plan_dry_run

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
            if report is not None and report_path is not None:  # nor any file the build reads
                preflight.refuse_read(settings.matrix, settings.build_root, report_path, "--report")
            result = run_build(settings)
        except writers.ReadByTheBuild:
            raise  # the one report never written: it would replace a file the build reads
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
