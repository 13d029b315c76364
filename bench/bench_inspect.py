"""Time wheelforge's fatbin reader against ``cuobjdump --list-elf --list-ptx`` on large CUDA
libraries, side by side, and check that both list the same entries.

The libraries are extracted from NVIDIA's library wheels and a CUDA torch wheel into a temporary
folder first (not timed); both tools then read the same extracted files, with a warm page cache.
The reader runs in this process (``inspect_paths``), so its times leave out interpreter start-up,
which is timed once and printed below the table; cuobjdump's include its process start. The
whole ``wheelforge inspect LIBRARY`` command (a fresh interpreter, start-up and rendering
included, output to a pipe) is timed too, its runs alternating with cuobjdump's: that ratio is
what a user sees.

    python bench/bench_inspect.py --library path/to/libfoo.so   # other files instead (repeatable)

    python bench/bench_inspect.py --repeat 3 --markdown docs/bench-inspect.md
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.binaries.inspection import inspect_paths

WHEEL_FOLDERS = (Path("/opt/pypi-more/files"), Path("/opt/wheels"))
# (wheel file pattern, member path inside it)
DEFAULT_LIBRARIES = (
    ("nvidia_cublas-*.whl", "nvidia/cu13/lib/libcublasLt.so.13"),
    ("torch-2.14.1-*.whl", "torch/lib/libtorch_cuda.so"),
    ("nvidia_cufft-*.whl", "nvidia/cu13/lib/libcufft.so.12"),
    ("nvidia_nccl_cu13-*.whl", "nvidia/nccl/lib/libnccl.so.2"),
    ("nvidia_cusparse-*.whl", "nvidia/cu13/lib/libcusparse.so.12"),
    ("nvidia_cublas-*.whl", "nvidia/cu13/lib/libcublas.so.13"),
    ("torch-2.14.1-*.whl", "torch/lib/libtorch_cuda_linalg.so"),
    ("torch-2.14.1-*.whl", "torch/lib/libtorch_nvshmem.so"),
)
LISTED = re.compile(r"(ELF|PTX) file\s+\d+: .*\.(sm_\d+[a-z]?)\.(cubin|ptx)$")


@dataclass(frozen=True)
class Row:
    name: str
    size: int
    entries: int
    reader_s: float
    cuobjdump_s: float
    command_s: float  # the whole `wheelforge inspect LIBRARY` command, best of the runs
    cuobjdump_rss: int  # peak resident set of one cuobjdump run, bytes
    decompressed: int  # total decompressed size of all entries, bytes


def find_cuobjdump() -> str | None:
    on_path = shutil.which("cuobjdump")
    if on_path:
        return on_path
    try:
        dist = importlib.metadata.distribution("nvidia-cuda-cuobjdump")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name == "cuobjdump" and Path(str(dist.locate_file(file))).is_file():
            return str(dist.locate_file(file))
    return None


def find_wheel(pattern: str) -> Path | None:
    for folder in WHEEL_FOLDERS:
        matches = sorted(p for p in folder.glob("*.whl") if fnmatch.fnmatch(p.name, pattern))
        if matches:
            return matches[-1]
    return None


def extract(wheel: Path, member: str, folder: Path) -> Path:
    target = folder / Path(member).name
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return target


def listed_name(entry: FatbinEntry) -> tuple[str, str]:
    """How cuobjdump --list-elf/--list-ptx names an entry (PTX as sm_XX; an f cubin without f)."""
    if entry.kind == "ptx":
        return ("ptx", entry.arch.replace("compute_", "sm_"))
    return ("sass", entry.arch[:-1] if entry.variant == "f" else entry.arch)


# Runs cuobjdump from a small fresh interpreter and reports its time and peak RSS: Linux carries
# the spawning process's peak RSS over into the child's (across vfork and exec), so spawning it
# from this process, which maps the libraries, would report this process's peak instead.
_SPAWN = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
_, status, usage = os.wait4(pid, 0)
print(time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status),
      file=sys.stderr)
"""


def run_cuobjdump(cuobjdump: str, library: Path) -> tuple[float, int, str]:
    """Seconds, peak RSS in bytes and stdout of one cuobjdump run."""
    command = [sys.executable, "-c", _SPAWN, cuobjdump, "--list-elf", "--list-ptx", str(library)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds, max_rss_kib, exit_code = done.stderr.split()
    if int(exit_code) not in (0, 255):  # 255: "does not contain device code"
        sys.exit(f"cuobjdump failed on {library} (exit code {exit_code})")
    return float(seconds), int(max_rss_kib) * 1024, done.stdout


def bench(library: Path, cuobjdump: str, repeat: int) -> Row:
    reader_times = []
    for _ in range(repeat):
        start = time.perf_counter()
        (report,) = inspect_paths([library])
        reader_times.append(time.perf_counter() - start)
    cuobjdump_times, command_times, rss, stdout = [], [], 0, ""
    for _ in range(repeat):  # cuobjdump and the command take turns
        seconds, peak, stdout = run_cuobjdump(cuobjdump, library)
        cuobjdump_times.append(seconds)
        rss = max(rss, peak)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "wheelforge", "inspect", str(library)],
                       check=True, capture_output=True)  # fmt: skip
        command_times.append(time.perf_counter() - start)
    listed = [
        ("sass" if m[1] == "ELF" else "ptx", m[2])
        for m in map(LISTED.match, stdout.splitlines())
        if m
    ]
    mine = [listed_name(e) for e in report.entries]
    if mine != listed:
        first = next(
            (i for i, pair in enumerate(zip(mine, listed, strict=False)) if pair[0] != pair[1]),
            min(len(mine), len(listed)),
        )
        sys.exit(
            f"{library.name}: the reader lists {len(mine)} entries, cuobjdump {len(listed)}; "
            f"they differ from entry {first}"
        )
    return Row(
        name=library.name,
        size=library.stat().st_size,
        entries=len(mine),
        reader_s=min(reader_times),
        cuobjdump_s=min(cuobjdump_times),
        command_s=min(command_times),
        cuobjdump_rss=rss,
        decompressed=sum(e.size for e in report.entries),
    )


def interpreter_startup() -> float:
    """Seconds for a fresh interpreter to import the reader, best of 3."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import wheelforge.binaries.inspection"], check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def human_size(size: int) -> str:
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"


def table(rows: list[Row]) -> str:
    lines = [
        "| file | size | entries | reader s | cuobjdump s | ratio | `wheelforge inspect` s "
        "| ratio | cuobjdump peak RSS | decompressed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row.name} | {human_size(row.size)} | {row.entries} | {row.reader_s:.3f} "
            f"| {row.cuobjdump_s:.2f} | {row.cuobjdump_s / row.reader_s:.0f}x "
            f"| {row.command_s:.2f} | {row.cuobjdump_s / row.command_s:.1f}x "
            f"| {human_size(row.cuobjdump_rss)} | {human_size(row.decompressed)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the best is kept")
    parser.add_argument("--markdown", type=Path, help="also write the results to this file")
    parser.add_argument("--library", type=Path, action="append", default=[],
                        help="a shared object to read instead of the default libraries (repeatable)")  # fmt: skip
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if missing := [p for p in args.library if not p.is_file()]:
        parser.error(f"--library {missing[0]}: no such file")
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        sys.exit(
            "cuobjdump not found: put a CUDA toolkit on PATH or pip install nvidia-cuda-cuobjdump"
        )
    version = subprocess.run([cuobjdump, "--version"], capture_output=True, text=True, check=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as tmp:
        for library in args.library:
            print(f"{library.name} ...", file=sys.stderr, flush=True)
            rows.append(bench(library, cuobjdump, args.repeat))
        for pattern, member in () if args.library else DEFAULT_LIBRARIES:
            wheel = find_wheel(pattern)
            if wheel is None:
                print(f"skipped {member}: no {pattern} in {', '.join(map(str, WHEEL_FOLDERS))}")
                continue
            library = extract(wheel, member, Path(tmp))
            print(f"{library.name} (from {wheel.name}) ...", file=sys.stderr, flush=True)
            rows.append(bench(library, cuobjdump, args.repeat))
            library.unlink()
    startup = interpreter_startup()
    result = table(rows)
    print(result)
    release = re.search(r"release [\d.]+, V[\d.]+", version.stdout)
    cuobjdump_version = release[0] if release else version.stdout.strip().splitlines()[-1]
    notes = (
        f"Best of {args.repeat} runs each, warm page cache. Both list the same entries (checked). "
        "The reader reads the ELF section headers and the fatbin entry headers only; cuobjdump's "
        "peak RSS follows the decompressed size of all images (the decompressed column), so it "
        "apparently inflates every image to list it. "
        f"A fresh interpreter takes {startup:.2f} s to import the reader (not in the table)."
    )
    print(notes)
    if args.markdown:
        command = "python bench/bench_inspect.py " + " ".join(sys.argv[1:])
        args.markdown.write_text(
            "# Fatbin listing: wheelforge's reader vs cuobjdump\n\n"
            f"Measured {datetime.date.today().isoformat()} on {platform.machine()} Linux, "
            f"{os.cpu_count()} CPU cores, Python {platform.python_version()}, "
            f"cuobjdump {cuobjdump_version} ({cuobjdump}).\n\n"
            f"Reproduce with:\n\n```\n{command}\n```\n\n"
            f"{result}\n\n{notes}\n"
        )


if __name__ == "__main__":
    main()
