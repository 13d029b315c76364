"""What a person sees (issue 33): paths never broken inside a word at a terminal and never folded
in a pipe, matrix errors in line order each with ``error:``, compile errors naming files as the
project does. Rendered on recording consoles at 80 columns."""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from tests.unit.conftest import GOOD_MATRIX
from tests.unit.fakes import plan_for
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.verify import check_binary
from wheelforge.build import diagnose
from wheelforge.build.results import AbiSummary, BuildReport, VariantResult
from wheelforge.cli.app import main
from wheelforge.cli.build_screen import abi_summary, print_build
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import log
from wheelforge.foundation.progress import JobProgress
from wheelforge.planning import hostshare
from wheelforge.toolchain import envs, ninjafeed

Project = Callable[..., Path]
LONG = "/work/scratch/someone/projects/grouped_gemm-0.3.0/build/wheelforge/default-cu130/build.log"


def terminal(width: int = 80) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=width, force_terminal=True, color_system=None), out


def pipe() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=80, force_terminal=False, color_system=None), out


@pytest.fixture
def on_console(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Console], None]]:
    def use(console: Console) -> None:
        monkeypatch.setattr(log, "console", console)

    yield use


def test_a_path_is_never_broken_inside_a_word_at_a_terminal(
    on_console: Callable[[Console], None],
) -> None:
    console, out = terminal(80)
    on_console(console)
    log.error(f"variant default-cu130: compiling csrc/bad.cu failed; the whole log is {LONG}")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("error: variant default-cu130")
    assert all(len(line) <= 80 for line in lines[:-1])
    # The path is a line of its own (it is wider than the rest of the first line).
    assert LONG in lines, lines
    # Every word is whole on one of the lines.
    words = f"error: variant default-cu130: compiling csrc/bad.cu failed; the whole log is {LONG}"
    assert " ".join(lines).split() == words.split()


def test_a_path_that_fits_the_width_stays_on_one_line_with_its_indent(
    on_console: Callable[[Console], None],
) -> None:
    console, out = terminal(80)
    on_console(console)
    path = "/root/.cache/wheelforge/envs/torch-2.13.0+cu130-304385668f"
    log.info(f"  torch 2.13.0+cu130, Python 3.11: made in 1:09 in {path}")
    lines = out.getvalue().splitlines()
    assert lines == ["  torch 2.13.0+cu130, Python 3.11: made in 1:09 in", f"  {path}"]


def test_piped_a_line_is_never_folded(on_console: Callable[[Console], None]) -> None:
    console, out = pipe()
    on_console(console)
    message = f"variant default-cu130: compiling csrc/bad.cu failed; the whole log is {LONG}"
    log.error(message)
    log.warning(message)
    log.info(message)
    assert out.getvalue().splitlines() == [
        f"error: {message}",
        f"warning: {message}",
        message,
    ]


def test_words_wrapped_keeps_the_style_of_each_word() -> None:
    console, _ = terminal(20)
    text = console.render_str("[red]error:[/red] one two three four five six")
    wrapped = log.words_wrapped(text, 20)
    assert wrapped.plain.splitlines() == ["error: one two three", "four five six"]
    assert [wrapped.plain[s.start : s.end] for s in wrapped.spans] == ["error:"]


def test_matrix_errors_are_each_an_error_line_in_line_order(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33: the matrix's errors came out with the first one last (the rest above it, as
    dim details without 'error:'), and '8.o' suggested 8.9."""
    text = (
        GOOD_MATRIX.replace("version: 1.2.0", "version: one")
        .replace("include-dirs: [csrc]", "include-dir: [csrc]")
        .replace('"8.0 9.0+PTX"', '"8.o 9.0+PTX"')
    )
    path = project(text)
    monkeypatch.chdir(path.parent)
    monkeypatch.setattr(log, "console", Console(stderr=True, width=80, color_system=None))
    assert main(["matrix"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("error: ") for line in lines), lines
    numbers = [int(m[1]) for line in lines if (m := re.match(r"error: matrix\.yaml:(\d+): ", line))]
    assert numbers == sorted(numbers) and len(numbers) == 3, lines
    assert "'8.o' is not a CUDA arch; did you mean '8.0'?" in lines[2]
    assert lines[-1] == "error: matrix.yaml: 3 problems, above in line order"


def test_compile_errors_name_files_relative_to_the_project(
    project: Project, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    rel = os.path.relpath(tmp_path, plan.build_dir)  # ../../.., as ninja's commands name files
    from_build = f"{rel}/csrc/kernel.cu"
    assert (plan.build_dir / from_build).resolve() == (tmp_path / "csrc" / "kernel.cu").resolve()
    output = (
        f"In file included from {rel}/csrc/ops.h:3,\n"
        f'{from_build}(12): error: identifier "x" is undefined\n'
        f"{tmp_path}/csrc/ops.cpp:3:5: error: 'y' was not declared in this scope\n"
        "/usr/include/c++/12/bits/stl_vector.h:10:1: note: declared here\n"
        f"{rel}/../../../outside.h:1:1: warning: outside the project\n"
    )
    shown = diagnose.project_paths(output, plan).splitlines()
    assert shown[0] == "In file included from csrc/ops.h:3,"
    assert shown[1] == 'csrc/kernel.cu(12): error: identifier "x" is undefined'
    assert shown[2] == "csrc/ops.cpp:3:5: error: 'y' was not declared in this scope"
    assert shown[3].startswith("/usr/include/c++/12/bits/stl_vector.h:10:1")
    outside = (plan.build_dir / rel / "../../../outside.h").resolve()
    assert shown[4] == f"{outside}:1:1: warning: outside the project"


def test_a_step_of_wheelforges_own_is_no_job_on_the_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before CUDA 12.9 ninja first builds the fixed-pid library (PRELOAD fixedpid.so): the
    screen listed it as job 1 of the project's compiles."""
    log_file = tmp_path / ".ninja_log"
    log_file.write_text("# ninja log v5\n")
    jobs = ["NVCC ops.cu", "LINK x.so"]  # what ninja.run gives the progress: no PRELOAD
    progress = JobProgress(jobs, parallel=1)
    outputs = {"NVCC ops.cu": "obj/ops.cu.o", "LINK x.so": "x.so"}
    feed = ninjafeed.Feed(
        progress,
        ninjafeed.NinjaLog(log_file),
        name_of=lambda d: d,
        output_of=lambda job: outputs.get(job, "gen/fixedpid.so"),
    )
    feed.line("[wheelforge 1/3] PRELOAD gen/fixedpid.so")
    feed.line("[wheelforge 2/3] NVCC ops.cu")
    feed.line("[wheelforge 3/3] LINK x.so")
    feed.close()
    progress.close()
    err = capsys.readouterr().err
    assert "PRELOAD" not in err
    assert err.splitlines() == ["  [1/2] NVCC ops.cu ", "  [2/2] LINK x.so "]


def test_a_torch_download_is_announced_with_its_size_and_the_way_around_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before pip fetches a CUDA torch (gigabytes) into a new environment, the screen says so,
    how much, and how to use an installed torch instead; a cached one is not announced."""
    order: list[str] = []
    monkeypatch.setattr(envs.proc, "run", lambda argv, **k: Path(argv[-1]).mkdir(parents=True))
    monkeypatch.setattr(
        envs,
        "_pip_torch",
        lambda spec, python, req: order.append(f"pip {req} after: {capsys.readouterr().err}"),
    )
    monkeypatch.setattr(
        envs,
        "_probe",
        lambda python: {
            "torch": "2.13.0+cu130",
            "cuda_build": "13.0",
            "cuda": False,
            "python": "3.11",
        },
    )
    envs.ensure_env(envs.EnvSpec(torch="2.13.0", cuda=True), tmp_path)
    [first] = order
    said = " ".join(first.split())
    assert said.startswith("pip torch==2.13.0 after: warning: torch 2.13.0 is not in the cache")
    assert "pip will install it into a new environment there, a CUDA build" in said
    assert "2 to 3 GB to download" in said and "--torch-from PYTHON" in said
    capsys.readouterr()
    envs.ensure_env(envs.EnvSpec(torch="2.13.0"), tmp_path)  # found: nothing to download
    assert "warning" not in capsys.readouterr().err and len(order) == 1


@pytest.mark.parametrize("width", [20, 33, 40, 64, 79, 80, 100])
def test_no_folded_line_is_wider_than_the_terminal(width: int) -> None:
    words = (
        "  - CUDAExtension myops._C (setup.py:9): its nvcc arch flags name 8.0: written as "
        "archs (arch-sets, unless --archs), not as nvcc flags in /tmp/scr/proj/matrix.yaml"
    )
    console, _ = terminal(width)
    lines = log.words_wrapped(console.render_str(words), width).plain.splitlines()
    assert all(len(line) <= width or " " not in line.strip() for line in lines), lines
    assert " ".join(lines).split() == words.split()
    if width >= 40:  # a list item's continuation lines up with its text
        assert all(line.startswith("    ") for line in lines[1:]), lines


def _report(*, reused: bool, tests: tuple[str, ...] | None) -> BuildReport:
    binary = BinaryContents(path="x.whl!demo/_C.abi3.so", size=100, entries=())
    variant = VariantResult(
        variant_id="default-cu130", arch_set=ArchSet("default", parse_arch_list("8.0", source="t")),
        toolkit="13.0.88", torch="2.13.0+cpu", wheel=Path(LONG).with_name("demo-1.0-cp310-abi3-linux_x86_64.whl"),
        wheel_size=4000, sha256="0" * 64, sources=1, compiled=(), reused=reused, binaries=(binary,),
        arch_checks=(check_binary(binary, None),), abi_checks=(), size=None, stages=(), seconds=1.0,
    )  # fmt: skip
    return BuildReport(matrix=Path("matrix.yaml"), target_version=(2, 10), built_against="2.13.0+cpu",
                       variants=(variant,), test_torches=tests)  # fmt: skip


@pytest.mark.parametrize("reused", [True, False])
def test_the_build_summary_says_built_or_reused_and_the_next_step(reused: bool) -> None:
    console, out = terminal(80)
    print_build(_report(reused=reused, tests=("2.13.0", "2.14.1")), console)
    lines = out.getvalue().splitlines()
    wheel = str(Path(LONG).with_name("demo-1.0-cp310-abi3-linux_x86_64.whl"))
    assert wheel in lines  # whole, on a line of its own: it can be copied
    assert all(len(line) <= 80 for line in lines if line != wheel)
    text = " ".join(out.getvalue().split())
    if reused:
        assert "reused: an earlier build made it from the same inputs" in text
        assert "0 wheels built, 1 reused (up to date), 0 failed" in text
    else:
        assert "built by this run" in text and "1 wheel built, 0 failed" in text
    assert text.endswith(
        "next: wheelforge test installs each wheel under torch 2.13.0, 2.14.1 and runs the "
        "matrix's tests (--torch-from PYTHON: under a torch already installed)"
    )
    console, out = terminal(80)
    print_build(_report(reused=reused, tests=None), console)  # no tests section: install it
    assert " ".join(out.getvalue().split()).endswith(
        f"next: pip install {wheel} (a 'tests' section in the matrix lets 'wheelforge test' run "
        "your tests)"
    )


def test_the_abi_line_is_in_plain_words() -> None:
    check = BinaryCheck(
        path="x.so", shims=("aoti_torch_a", "aoti_torch_b"), newest_shim=(2, 10),
        python_symbols=("PyModule_Create2",), violations=(),
    )  # fmt: skip
    line = abi_summary(AbiSummary.of((check,)), (2, 10))
    assert "shim" not in line and "(s)" not in line
    assert "calls 2 functions of torch's stable C API, the newest from torch 2.10" in line
    assert "1 function of Python's limited C API (abi3)" in line


def test_a_binary_that_needs_only_the_first_limited_api_reads_any_python() -> None:
    """check's Python column said 3.2 (the limited API's first release) beside a cp310 wheel."""
    from wheelforge.binaries.checkwheels import result_of
    from wheelforge.cli.check_screen import check_table

    def row(floor: tuple[int, int]) -> str:
        check = BinaryCheck(
            path="/d/x.abi3.so", shims=(), newest_shim=(2, 10), python_symbols=("PyModule_Create2",),
            violations=(), python_floor=floor, role="extension",
        )  # fmt: skip
        console, out = terminal(80)
        console.print(check_table(result_of([check])))
        [line] = [ln for ln in out.getvalue().splitlines() if "x.abi3.so" in ln]
        return line

    assert "│ any " in row((3, 2)) and "3.2" not in row((3, 2))
    assert "│ 3.10 " in row((3, 10))


def test_the_compile_line_tells_cache_hits_from_compiles(project: Project, tmp_path: Path) -> None:
    from wheelforge.build.compiling import Compiled
    from wheelforge.build.results import JobReport
    from wheelforge.build.variant import _compiled_words
    from wheelforge.toolchain.compilecache import CacheStats

    plan = plan_for(load_matrix(project()), tmp_path)
    total = len(hostshare.all_steps(plan))

    def made(*cached: bool | None) -> Compiled:
        jobs = tuple(
            JobReport(source=f"csrc/{i}.cpp", rule="cxx", seconds=1.0, cpu_seconds=None, peak=None,
                      largest=None, threads=1, cached=c)
            for i, c in enumerate(cached)
        )  # fmt: skip
        hits = sum(1 for c in cached if c)
        stats = CacheStats(tool="ccache", requests=len(cached), hits=hits, misses=len(cached) - hits,
                           uncached=0, location="/c", detail={})  # fmt: skip
        return Compiled(ran=("CXX",) * len(cached), cache=stats, jobs=jobs)

    assert _compiled_words(plan, made(True, True), 2, 0) == (
        f"2 of {total} sources from the compile cache (ccache), none compiled"
    )
    assert _compiled_words(plan, made(True, False), 2, 0) == (
        f"compiled 1 of {total} sources, 1 more from the compile cache (ccache)"
    )
    assert _compiled_words(plan, made(False, False), 2, 0) == f"compiled 2 of {total} sources"
    assert _compiled_words(plan, Compiled(), 0, 0) == "nothing to compile: up to date"
    summary = made(True, False).cache.summary()  # type: ignore[union-attr]
    assert (
        summary
        == "compile cache ccache (/c): of 2 compiles, 1 from the cache (hits), 1 compiled (misses)"
    )


def test_a_job_whose_shell_execd_its_command_is_found(tmp_path: Path) -> None:
    """dash execs a lone simple command: ninja's child is then ``ccache nvcc ... -o obj/x.o``
    itself, not ``sh -c '...'``; the job is still found by the output its words name."""
    from wheelforge.foundation import proctree

    log_file = tmp_path / ".ninja_log"
    log_file.write_text("# ninja log v5\n")
    progress = JobProgress(["NVCC x.cu", "LINK x.so"], parallel=1)
    feed = ninjafeed.Feed(progress, ninjafeed.NinjaLog(log_file), name_of=lambda d: d,
                          output_of={"NVCC x.cu": "obj/x.cu.o", "LINK x.so": "x.so"}.__getitem__)  # fmt: skip
    execd = proctree.Process(
        pid=2, ppid=1, argv=("ccache", "nvcc", "-o", "obj/x.cu.o", "-c", "x.cu")
    )
    shell = proctree.Process(
        pid=3, ppid=1, argv=("/bin/sh", "-c", "cd / && nvcc -c x.cu -o obj/x.cu.o")
    )
    assert feed._job_of(execd) == "NVCC x.cu"
    assert feed._job_of(shell) == "NVCC x.cu"


def test_toolkit_list_shows_folders_and_the_install_command_whole_at_80_columns() -> None:
    """The table's 'found at' cell cut the folder (/usr/local/cud…), its 'how' cell folded
    'wheelforge toolkit install 13.5' over three lines."""
    import dataclasses

    from tests.unit import fakes
    from wheelforge.cli.toolkit_screen import print_toolkits
    from wheelforge.toolchain import provision

    folder = Path("/opt/nvidia/hpc_sdk/Linux_x86_64/25.9/cuda/13.0")
    found = dataclasses.replace(fakes.toolkit(), root=folder, origin="$CUDA_HOME")
    console, out = terminal(80)
    print_toolkits([found], provision.not_found([found]), console)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert f"CUDA {found.version} ($CUDA_HOME): {folder}" in lines
    assert "provision one: wheelforge toolkit install RELEASE" in lines
