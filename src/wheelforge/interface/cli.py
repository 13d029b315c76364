"""The command line: parse, call, print. No logic lives here; errors are caught once, in main."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import click

from wheelforge import __version__
from wheelforge.configuration import abi as abis
from wheelforge.configuration.matrix.keys import COMPILE_CACHES
from wheelforge.foundation import fence, fsutil, log, numbers
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.interface.cache_cli import cache_group
from wheelforge.interface.options import (
    WholeNumber,
    build_dir_option,
    cache_dir_option,
    json_option,
    matrix_option,
    out_option,
)
from wheelforge.interface.options import verbose_option as verbose_option_of

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


verbose_option = verbose_option_of(
    "Show commands and tool output (-vv: ninja's full command lines too)."
)


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wheelforge")
def cli() -> None:
    """Build matrices of stable-ABI abi3 wheels for CUDA PyTorch extensions."""


@cli.command()
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
@verbose_option
def build(**given: Any) -> None:
    """Build the matrix's wheels and check their fatbins."""
    from wheelforge.interface import outputs

    outputs.build(outputs.BuildOptions.from_command_line(given))


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@json_option("inspect")
@verbose_option
def inspect(paths: tuple[Path, ...], as_json: bool) -> None:
    """List the SASS and PTX in shared objects, object files, wheels or folders.

    For a variant wheel (PEP 825, experimental) also its variant properties, and any that
    disagree with its binaries (exit 4)."""
    from wheelforge.interface.inspect_command import inspect_command

    inspect_command(paths, as_json=as_json)


@cli.command(name="matrix")
@matrix_option
@click.option("--archs", help="Arch list replacing the matrix's arch sets, as for build.")
@json_option("variants")
@click.option(
    "--github", is_flag=True, help='Print a GitHub Actions matrix ({"include": [...]}) for fan-out.'
)
@cache_dir_option
@verbose_option
def matrix_command(
    matrix_path: Path, archs: str | None, as_json: bool, github: bool, cache_dir: Path | None
) -> None:
    """List the variants the matrix expands to (nothing is downloaded or built)."""
    from wheelforge.configuration.settings import Flags, resolve
    from wheelforge.foundation.document import to_document
    from wheelforge.interface.console import print_whole
    from wheelforge.interface.documents import kinds
    from wheelforge.interface.documents.variants import github_matrix, variants_document
    from wheelforge.interface.render import variants_table
    from wheelforge.toolchain import toolkit

    settings = resolve(Flags(matrix=matrix_path, archs=archs, cache_dir=cache_dir))
    from wheelforge.running.build.prepare import selected

    listed = selected(
        settings, toolkit.discover(cache=settings.cache_dir, pythons=(settings.python,))
    )
    if github:  # one line: it goes into $GITHUB_OUTPUT
        click.echo(json.dumps(to_document(github_matrix(listed))))
    elif as_json:
        kinds.echo(variants_document(listed))
    else:
        from wheelforge.planning.plan import wheel_version

        versions = [wheel_version(settings.matrix, v) for v in listed]
        print_whole(variants_table(listed, settings.matrix, settings.out_dir, versions=versions))


@cli.group(name="toolkit")
def toolkit_group() -> None:
    """CUDA toolkits: the ones found, and provisioning more into the cache."""


@toolkit_group.command(name="list")
@cache_dir_option
@verbose_option
def toolkit_list(cache_dir: Path | None) -> None:
    """Toolkits found on this machine and in the cache, and the ones wheelforge can provision."""
    from wheelforge.configuration import settings
    from wheelforge.interface.render import print_toolkits
    from wheelforge.toolchain import provision, toolkit

    found = toolkit.discover(cache=settings.cache_dir(cache_dir))
    print_toolkits(found, provision.not_found(found))


@toolkit_group.command(name="install")
@click.argument("release")
@cache_dir_option
@verbose_option
def toolkit_install(release: str, cache_dir: Path | None) -> None:
    """Provision CUDA RELEASE, for example 11.8 or 13.1, into the cache."""
    from wheelforge.configuration import settings
    from wheelforge.toolchain import provision, toolkit

    cache = settings.cache_dir(cache_dir)
    found = toolkit.load_provisioned(provision.install_release(release, cache))
    log.info(found.describe() + (f", host compiler {found.host_cxx}" if found.host_cxx else ""))


cli.add_command(cache_group)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--target",
    help="Lowest torch the binaries must load on, e.g. 2.10 [default: a wheel's Requires-Dist on torch].",
)
@click.option(
    "--python-abi", help="abi3 floor of bare shared objects, e.g. cp310 [default: a wheel's tag]."
)
@click.option(
    "--abi",
    type=click.Choice(abis.NAMES),
    help="Whose rules apply [default: a wheel's binaries and requirement say (libtorch C++ "
    "symbols and an exact torch pin: unstable; else stable), whatever its tag; stable for bare "
    "shared objects].",
)
@json_option("check")
@verbose_option
def check(
    paths: tuple[Path, ...],
    target: str | None,
    python_abi: str | None,
    abi: abis.AbiName | None,
    as_json: bool,
) -> None:
    """Check wheels or shared objects against the rules of their ABI (exit 4 on a violation)."""
    from wheelforge.interface.console import print_whole
    from wheelforge.interface.documents import kinds
    from wheelforge.interface.documents.check import check_document
    from wheelforge.interface.render_check import check_table
    from wheelforge.running import checking

    results = checking.run_check(list(paths), target=target, python_abi=python_abi, abi=abi)
    if as_json:
        kinds.echo(check_document(results))
    else:
        print_whole(check_table(results))
    checking.require_clean(results)


@cli.command(name="test")
@matrix_option
@click.option(
    "--wheel",
    "wheels",
    multiple=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="A wheel to test (repeatable) [default: the wheels the last build published].",
)
@click.option(
    "--torch",
    "torch_versions",
    multiple=True,
    help="A torch version to install and test under (repeatable) [default: tests.torch of the matrix].",
)
@click.option(
    "--torch-from",
    "torch_from",
    multiple=True,
    help="Test under the torch already installed for this Python interpreter, a path or a command on the PATH (repeatable; no download).",
)
@out_option
@build_dir_option
@cache_dir_option
@json_option("test")
@verbose_option
def test_command(
    matrix_path: Path,
    wheels: tuple[Path, ...],
    torch_versions: tuple[str, ...],
    torch_from: tuple[str, ...],
    out: Path | None,
    build_dir: Path | None,
    cache_dir: Path | None,
    as_json: bool,
) -> None:
    """Run the payload's tests against the built wheels, under each torch of the matrix."""
    from wheelforge.configuration.settings import TestFlags, resolve_test
    from wheelforge.interface.console import print_whole
    from wheelforge.interface.documents import kinds
    from wheelforge.interface.documents.torch_tests import torch_tests_document
    from wheelforge.interface.render_tests import test_table
    from wheelforge.running import torch_tests

    flags = TestFlags(
        matrix=matrix_path,
        wheels=wheels,
        torch=torch_versions,
        torch_from=torch_from,
        out=out,
        build_dir=build_dir,
        cache_dir=cache_dir,
    )
    outcomes = torch_tests.run_test_command(resolve_test(flags))
    if as_json:
        kinds.echo(torch_tests_document(outcomes))
    else:
        print_whole(test_table(outcomes))
    torch_tests.require_passed(outcomes)


@cli.command(name="init")
@click.argument(
    "path",
    required=False,
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    default=Path(),
)
@click.option("--force", is_flag=True, help="Replace an existing matrix.yaml.")
@click.option(
    "--torch",
    "torch_versions",
    multiple=True,
    help=(
        "A torch version to build for (repeatable) [default: the project's stable-ABI target, "
        "else the build Python's torch]."
    ),
)
@click.option(
    "--archs",
    help=(
        'The arch set to write, e.g. "8.0 9.0+PTX" [default: the project\'s arch flags, '
        "else TORCH_CUDA_ARCH_LIST]."
    ),
)
@click.option(
    "--no-run", is_flag=True, help="Read setup.py without running it (ast; follows less of it)."
)
@click.option(
    "--sandbox",
    type=click.Choice(["auto", "bwrap", "unshare", "off"]),
    default="auto",
    show_default=True,
    help=(
        "What fences the project's code init runs (setup.py, CMake): bubblewrap, else "
        "unshare's namespaces; 'off' runs it UNFENCED, with all your rights."
    ),
)
@click.option(
    "--from",
    "door",
    type=click.Choice(["setup.py", "cmake", "build.toml", "sources"]),
    help="The front door [default: build.toml, else setup.py, else CMakeLists.txt, else the sources].",
)
@click.option(
    "--python",
    "python",
    help="The build Python that runs setup.py and configures CMake [default: this one].",
)
@click.option(
    "--cmake-arg",
    "cmake_args",
    multiple=True,
    help=(
        "An argument for CMake's configure (repeatable), e.g. "
        "-DFETCHCONTENT_SOURCE_DIR_CUTLASS=../cutlass; CMAKE_ARGS adds too."
    ),
)
@cache_dir_option
@verbose_option
def init_command(
    path: Path,
    force: bool,
    torch_versions: tuple[str, ...],
    archs: str | None,
    no_run: bool,
    sandbox: str,
    door: str | None,
    python: str | None,
    cmake_args: tuple[str, ...],
    cache_dir: Path | None,
) -> None:
    """Write a commented matrix.yaml for the project in PATH: its setup.py run with its setup()
    and Extension classes recording (never compiling, never downloading), its CMake project
    configured, or its kernel-builder build.toml read; print what needs a hand."""
    from wheelforge.configuration.settings import cache_dir as default_cache_dir
    from wheelforge.configuration.settings import resolve_python
    from wheelforge.interface.render_init import print_result
    from wheelforge.running import adopt

    request = adopt.InitRequest(
        root=fsutil.resolved(path),
        force=force,
        torch=torch_versions,
        archs=archs,
        run=not no_run,
        door=cast("adopt.Door | None", door),
        python=resolve_python(python),
        cmake_args=cmake_args,
        cache=default_cache_dir(cache_dir),
        sandbox=cast("fence.Choice", sandbox),
    )
    print_result(adopt.init_project(request))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: runs the CLI and turns every error into one message and an exit code."""
    from wheelforge.running.signals import signals_as_errors
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
