"""Every compile in the build report has its CPU time and peak memory, also when the machine is
busy (issue 38 item 6): a build runs beside a CPU hog, a few busy-looping processes that live
for the test only, and its report's jobs are read. The project has many small C++ sources (each
compile a fraction of a second, shorter than a glance at /proc takes on a busy machine), its
stable-ABI op and a kernel for nvcc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.helpers import ONE_KERNEL, needs_nvcc, tiny, wheelforge
from wheelforge.foundation import jobcost

pytestmark = needs_nvcc

SMALL_SOURCES = 24
MATRIX = """\
extension:
  name: tinyext._C
  sources: [tinyext/csrc/*.cpp, tinyext/csrc/*.cu]
  module-init: false
  cxx-flags: [-DTINY_WITH_CUDA]
  libraries: [m]
torch: ">=2.10"
arch-sets: "8.0"
"""


@contextmanager
def cpu_hog(processes: int) -> Iterator[None]:
    """*processes* busy loops for the duration, each ended by its pid afterwards (and by its
    own deadline should the test die first)."""
    loop = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(processes)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_every_job_has_cpu_time_and_peak_memory_beside_a_cpu_hog(tmp_path: Path) -> None:
    project = tiny(tmp_path / "p", matrix=MATRIX)
    csrc = project / "tinyext" / "csrc"
    for n in range(SMALL_SOURCES):
        (csrc / f"small_{n:02}.cpp").write_text(
            f'extern "C" int small_{n}(void) {{ return {n}; }}\n'
        )
    (csrc / "scale.cu").write_text(ONE_KERNEL)
    report = tmp_path / "report.json"
    # Two busy loops per core this process may use, a few at most on a large machine.
    with cpu_hog(min(8, 2 * len(os.sched_getaffinity(0)))):
        run = wheelforge(
            "build", "--report", report, "--compile-cache", "none", "--cache-dir",
            tmp_path / "cache", cwd=project,
        )  # fmt: skip
    assert run.code == 0, run.err
    [variant] = json.loads(report.read_text())["variants"]
    jobs = variant["compile"]["jobs"]
    assert len(jobs) >= SMALL_SOURCES + 2, [j["source"] for j in jobs]
    assert {j["rule"] for j in jobs} >= {"cxx", "nvcc"}
    missing = [j["source"] for j in jobs if j["cpu_seconds"] is None or j["peak"] is None]
    assert not missing, f"no CPU time or peak memory for {missing}"
    for job in jobs:
        # A compiler's resident memory is megabytes; its CPU time is what its processes used.
        assert job["peak"] >= job["largest"] > 1 << 20, job
        assert job["cpu_seconds"] >= 0, job
    # The summary's lines name no compile without its figures.
    assert "- CPU" not in run.err and "- CPU" not in run.out


def _fake_nvcc(tmp_path: Path, *, fails_split: bool) -> Path:
    """A stand-in nvcc: with --split-compile it prints nvcc 13.0's bitcode error and fails
    (when *fails_split*) or fails with another error; without it, it writes its output."""
    script = tmp_path / "nvcc"
    message = "error: Failed to read bitcode" if fails_split else "error: no such kernel"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in --split-compile=*)\n'
        f'  echo "{message}" >&2; exit 1;; esac; done\n'
        'echo compiled > "$2"\n'
    )
    script.chmod(0o755)
    return script


def test_a_split_compile_that_cannot_read_its_bitcode_compiles_again_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """nvcc 13.0 --split-compile fails on some sources with 'Failed to read bitcode' (vLLM
    0.34.0's vocab_parallel_embedding_kernels.cu): the wrapper says so and compiles once more
    without the option; its cost line counts both runs. Any other failure stays a failure."""
    costs = tmp_path / "costs"
    monkeypatch.setenv(jobcost.ENV, str(costs))
    out = tmp_path / "a.o"
    nvcc = _fake_nvcc(tmp_path, fails_split=True)
    assert jobcost.main(["obj/a.o", str(nvcc), "-o", str(out), "--split-compile=16"]) == 0
    assert out.read_text() == "compiled\n"
    err = capfd.readouterr().err
    assert "error: Failed to read bitcode" in err  # nvcc's own line still shown
    assert "nvcc --split-compile=16 failed to read its own bitcode" in err
    assert list(jobcost.parse(costs.read_text())) == ["obj/a.o"]

    other = _fake_nvcc(tmp_path, fails_split=False)
    assert (
        jobcost.main(["obj/b.o", str(other), "-o", str(tmp_path / "b.o"), "--split-compile=16"])
        == 1
    )
    assert "again without it" not in capfd.readouterr().err
    assert not (tmp_path / "b.o").exists()
