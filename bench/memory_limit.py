"""A memory-heavy build under a memory limit: the naive schedule (MAX_JOBS = the cores, the
project's default nvcc threads, wheelforge told nothing of the memory) against wheelforge's own
schedule, inside a cgroup (v1 or v2) whose memory limit the naive one exceeds.

    python bench/memory_limit.py --project .bench/flash-attention --limit 8GiB \\
        --naive-threads 2 [--cases naive,naive-in-cgroup,wheelforge-in-cgroup]

Each case builds from nothing (its own build and cache folders, no compile cache), and reports
its wall time, its peak memory (the sum of its processes' resident memory, read four times a
second, and the cgroup's own high-water mark where there is one) and whether it finished.
Needs root for the cgroup (mkdir under /sys/fs/cgroup); it is removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from wheelforge.build import jobwatch  # noqa: E402
from wheelforge.configuration.bytesizes import parse_size  # noqa: E402
from wheelforge.foundation import resources  # noqa: E402

GIB = 1 << 30
ROOT = Path("/sys/fs/cgroup")


@contextlib.contextmanager
def cgroup(limit: int) -> Iterator[tuple[Path, str]]:
    """A cgroup of its own with *limit* bytes of memory (v2 memory.max, else v1
    memory.limit_in_bytes); yields its folder and the file of its high-water mark."""
    controllers = ROOT / "cgroup.controllers"
    v2 = controllers.is_file() and "memory" in controllers.read_text()
    v2_path, v1_path = resources.cgroup_paths(Path("/proc/self/cgroup").read_text())
    # Inside this process's own cgroup: whatever accounts for this process still sees the build.
    base = ROOT / (v2_path or "").strip("/") if v2 else ROOT / "memory" / (v1_path or "").strip("/")
    folder = base / f"wheelforge-bench-{os.getpid()}"
    folder.mkdir()
    try:
        if v2:
            (folder / "memory.max").write_text(str(limit))
            (folder / "memory.swap.max").write_text("0")
            yield folder, "memory.peak"
        else:
            (folder / "memory.limit_in_bytes").write_text(str(limit))
            with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
                (folder / "memory.memsw.limit_in_bytes").write_text(str(limit))
            yield folder, "memory.max_usage_in_bytes"
    finally:
        for _ in range(50):
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.2)


def run(
    cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, group: tuple[Path, str] | None
) -> dict:
    """Run *cmd* (in *group* when given), measuring its wall time and peak memory."""

    start = time.perf_counter()
    with log.open("w") as out:
        if group is not None:  # the child is started inside the cgroup, this process goes back
            (group[0] / "cgroup.procs").write_text(str(os.getpid()))
        try:
            child = subprocess.Popen(
                cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            if group is not None:
                (group[0].parent / "cgroup.procs").write_text(str(os.getpid()))
        peak = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], jobwatch.tree_rss(child.pid))
                done.wait(0.25)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        try:
            child.wait()
        finally:  # stopped (SIGTERM, Ctrl-C): the build's whole tree goes too
            if child.poll() is None:
                _stop_build(child, group)
            done.set()
            thread.join()
    result = {
        "seconds": round(time.perf_counter() - start, 1),
        "returncode": child.returncode,
        "peak_rss_sum_gib": round(peak[0] / GIB, 2),
    }
    if group is not None:
        mark = group[0] / group[1]
        with contextlib.suppress(OSError, ValueError):
            result["cgroup_peak_gib"] = round(int(mark.read_text()) / GIB, 2)
        text = log.read_text(errors="replace")
        kills = 0
        for name in ("memory.events", "memory.oom_control"):  # v2, v1: "oom_kill N"
            with contextlib.suppress(OSError):
                for line in (group[0] / name).read_text().splitlines():
                    if line.startswith("oom_kill "):
                        kills = int(line.split()[1])
        result["oom_kills"] = kills
        result["killed"] = kills > 0 or "signal 9" in text or child.returncode in (-9, 137)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True, help="a folder with matrix.yaml")
    parser.add_argument("--matrix", default="matrix.yaml", help="the matrix, in --project")
    parser.add_argument("--limit", default="8GiB")
    parser.add_argument("--cap", default="15GiB", help="the naive case's own cgroup limit")
    parser.add_argument("--naive-threads", type=int, default=2, help="the project's NVCC_THREADS")
    parser.add_argument("--cases", default="naive,naive-in-cgroup,wheelforge-in-cgroup")
    parser.add_argument("--work", type=Path, default=Path("/tmp/wheelforge-memory-limit"))
    parser.add_argument("--results", type=Path)
    args = parser.parse_args()
    limit = parse_size(args.limit, where="--limit")
    cores = len(os.sched_getaffinity(0))
    results: dict[str, dict] = {}
    for case in args.cases.split(","):
        folder = args.work / case
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYTHONUNBUFFERED="1")
        cmd = [
            sys.executable,
            "-m",
            "wheelforge",
            "build",
            "--matrix",
            args.matrix,
            "--compile-cache",
            "none",
            "--no-import-check",
            "--build-dir",
            str(folder / "build"),
            "--out",
            str(folder / "dist"),
            "--cache-dir",
            str(folder / "cache"),
            "--report",
            str(folder / "report.json"),
        ]
        if case.startswith("naive"):
            # What a plain build does: as many jobs as cores, the project's threads, no memory.
            env |= {"MAX_JOBS": str(cores), "NVCC_THREADS": str(args.naive_threads)}
            cmd += ["--memory-limit", "1024GiB"]
        # The naive case runs under a cap too, above the limit: on a shared machine its
        # excess must not reach anybody else's processes.
        cap = limit if case.endswith("in-cgroup") else parse_size(args.cap, where="--cap")
        group = cgroup(cap)
        with group as g:
            results[case] = run(cmd, cwd=args.project, env=env, log=folder / "build.log", group=g)
        report = folder / "report.json"
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            variant = json.loads(report.read_text())["variants"][0]
            compiled = variant["compile"] or {}
            results[case]["wheelforge_peak_gib"] = round(
                (compiled.get("peak_memory") or 0) / GIB, 2
            )
            results[case]["schedule"] = compiled.get("schedule") or {}
        print(case, json.dumps(results[case]), flush=True)
    if args.results:
        args.results.write_text(
            json.dumps({"limit_gib": limit / GIB, "cores": cores, "cases": results}, indent=1)
            + "\n"
        )


def _stop_build(child: subprocess.Popen, group: tuple[Path, str] | None) -> None:
    """wheelforge stops its own jobs on SIGTERM; whatever is left after 10 s (the jobs run in
    process groups of their own) is killed by the cgroup's member list, so the cgroup can go."""
    child.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(10)
    for _ in range(3):
        pids = [child.pid]
        if group is not None:
            with contextlib.suppress(OSError):
                pids += [int(p) for p in (group[0] / "cgroup.procs").read_text().split()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    child.wait()


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: the build is killed and the cgroup removed


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    main()
