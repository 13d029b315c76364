"""``wheelforge init``: parse, adopt the project's build (adoption/adopt.py), print what was written
and what needs a hand."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from wheelforge.cli.options import cache_dir_option, tool_verbose_option
from wheelforge.foundation import fence, fsutil


@click.command(name="init")
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
@tool_verbose_option
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
    from wheelforge.adoption.adopt import Door, InitRequest, init_project
    from wheelforge.cli.init_screen import print_result
    from wheelforge.configuration.settings import cache_dir as default_cache_dir
    from wheelforge.configuration.settings import resolve_python

    request = InitRequest(
        root=fsutil.resolved(path),
        force=force,
        torch=torch_versions,
        archs=archs,
        run=not no_run,
        door=cast("Door | None", door),
        python=resolve_python(python),
        cmake_args=cmake_args,
        cache=default_cache_dir(cache_dir),
        sandbox=cast("fence.Choice", sandbox),
    )
    print_result(init_project(request))
