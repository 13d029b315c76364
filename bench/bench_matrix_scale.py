"""Matrix expansion and validation at scale: `wheelforge matrix --json` on generated matrices
of N arch sets, and a matrix with N unknown keys. Prints wall time and peak memory per size;
time per arch set should stay flat (linear scale). Run: .venv/bin/python bench/bench_matrix_scale.py
[N ...] (default 10000 100000 300000)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAD = (
    "package: {name: demo, version: '1.0', packages: [pkg/demo]}\n"
    "extension: {name: demo._C, sources: [csrc/a.cpp]}\ntorch: '>=2.10'\n"
)
ARCHS = ["7.5", "8.0", "8.6", "8.9", "9.0", "9.0+PTX", "10.0", "12.0"]


def project(root: Path) -> None:
    (root / "pkg" / "demo").mkdir(parents=True)
    (root / "pkg" / "demo" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "a.cpp").write_text("//\n")


def run(matrix: Path) -> tuple[float, float, int, int, int]:
    """(seconds, CPU seconds, peak RSS in MiB, exit code, bytes of output) of one
    `wheelforge matrix`; CPU seconds tell more than wall time on a busy machine."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wheelforge", "matrix", "--json", "--matrix", matrix],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        # wait4: this child's own peak RSS (KiB on Linux), not the largest of all children.
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        size = out.tell()
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, usage.ru_maxrss // 1024, proc.returncode, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, metavar="N",
                        help="arch sets (and unknown keys) per matrix [10000 100000 300000]")  # fmt: skip
    sizes = parser.parse_args().sizes or [10_000, 100_000, 300_000]
    if any(n < 1 for n in sizes):
        parser.error("each N must be at least 1")
    with tempfile.TemporaryDirectory(prefix="wf-scale-") as tmp:
        root = Path(tmp)
        project(root)
        print(
            f"{'input':<24} {'seconds':>8} {'CPU s':>6} {'CPU us/entry':>13} {'peak MiB':>9} {'exit':>5} {'output':>10}"
        )
        for kind in ("arch sets", "unknown keys"):
            for n in sizes:
                matrix = root / f"m-{kind[0]}{n}.yaml"
                with matrix.open("w") as f:
                    if kind == "arch sets":
                        f.write(HEAD + "arch-sets:\n")
                        f.writelines(
                            f"  s{i}: '{ARCHS[i % 8]} {ARCHS[i * 3 % 8]}'\n" for i in range(n)
                        )
                    else:
                        f.write(HEAD + "arch-sets: '8.0'\n")
                        f.writelines(f"k{i}: 1\n" for i in range(n))
                seconds, cpu, peak, code, output = run(matrix)
                label = f"{n} {kind}"
                print(
                    f"{label:<24} {seconds:8.1f} {cpu:6.1f} {cpu / n * 1e6:13.1f} {peak:9} "
                    f"{code:5} {output:10}"
                )


if __name__ == "__main__":
    main()
