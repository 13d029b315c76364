"""Time wheelforge's fatbin reader against ``cuobjdump --list-elf --list-ptx`` on large CUDA
libraries, side by side, and check that both list the same entries.

The libraries are extracted from NVIDIA's library wheels and a CUDA torch wheel into a temporary
folder first (not timed); both tools then read the same extracted files, with a warm page cache.
The reader runs in this process (``inspect_paths``), so its times leave out interpreter start-up,
which is timed once and printed below the table; cuobjdump's include its process start. The
whole ``wheelforge inspect LIBRARY`` command (``python -m wheelforge``: a fresh interpreter,
start-up and rendering included, output to a pipe) is timed too, its runs alternating with
cuobjdump's: that ratio is what a user sees; its table lists the same entries the reader does.

With ``--baseline TREE`` (another wheelforge: a folder holding ``wheelforge/``, a checkout holding
``src/wheelforge/``, or a git revision of this repository, extracted with ``git archive``;
repeatable) that tree's whole command is timed in the same rounds (cuobjdump, this tree, each
baseline, in turns, the first of each round rotating), and its screen compared with this tree's.
Every tree is run with its own ``src`` first on PYTHONPATH, and every folder on PYTHONPATH is
byte-compiled first, as ``pip install`` does (where bytecode is not written,
PYTHONDONTWRITEBYTECODE, each run would compile every module it imports). Below the table: the
bare interpreter's start (``python -c pass``), the floor of any Python command, next to a tenth
of each cuobjdump time, the most a command 10x faster than cuobjdump may take.

    python bench/bench_inspect.py --library path/to/libfoo.so   # other files instead (repeatable)

    python bench/bench_inspect.py --repeat 5 --baseline main --markdown bench-inspect.md
"""

from __future__ import annotations

import argparse
import compileall
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

from bench_build import REPO, baseline_src, commit_of
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
# A row of inspect's table: kind, arch, entries (its count of entries of that kind and arch).
SHOWN_COUNT = re.compile(r"^│ (?:SASS|PTX) +│ \S+ +│ +(\d+) │", re.MULTILINE)


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
    baseline_s: tuple[float, ...] = ()  # each baseline's whole command, best of the runs
    same_screen: tuple[bool, ...] = ()  # whether each baseline printed this tree's screen


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


def command_env(src: Path) -> dict[str, str]:
    """The environment a tree's ``python -m wheelforge`` runs in: its source folder first."""
    rest = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(src), rest) if p)}


def run_command(src: Path, library: Path) -> tuple[float, str]:
    """Seconds and stdout of one ``wheelforge inspect LIBRARY`` of the tree at *src*."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "wheelforge", "inspect", str(library)],
                          env=command_env(src), check=True, capture_output=True, text=True)  # fmt: skip
    return time.perf_counter() - start, done.stdout


def bench(library: Path, cuobjdump: str, repeat: int, baselines: list[Path]) -> Row:
    reader_times = []
    for _ in range(repeat):
        start = time.perf_counter()
        (report,) = inspect_paths([library])
        reader_times.append(time.perf_counter() - start)
    trees = [REPO / "src", *baselines]
    cuobjdump_times: list[float] = []
    command_times: list[list[float]] = [[] for _ in trees]
    screens: list[str] = ["" for _ in trees]
    rss, stdout = 0, ""
    for round_ in range(repeat):  # cuobjdump and each tree take turns; who goes first rotates
        turns = [-1, *range(len(trees))]
        for turn in turns[round_ % len(turns) :] + turns[: round_ % len(turns)]:
            if turn < 0:
                seconds, peak, stdout = run_cuobjdump(cuobjdump, library)
                cuobjdump_times.append(seconds)
                rss = max(rss, peak)
            else:
                seconds, screens[turn] = run_command(trees[turn], library)
                command_times[turn].append(seconds)
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
    shown = sum(int(m[1]) for m in SHOWN_COUNT.finditer(screens[0]))
    if shown != len(mine):
        sys.exit(
            f"{library.name}: the command's table counts {shown} entries, the reader {len(mine)}"
        )
    return Row(
        name=library.name,
        size=library.stat().st_size,
        entries=len(mine),
        reader_s=min(reader_times),
        cuobjdump_s=min(cuobjdump_times),
        command_s=min(command_times[0]),
        cuobjdump_rss=rss,
        decompressed=sum(e.size for e in report.entries),
        baseline_s=tuple(min(times) for times in command_times[1:]),
        same_screen=tuple(screen == screens[0] for screen in screens[1:]),
    )


def interpreter_startup(code: str = "import wheelforge.binaries.inspection") -> float:
    """Seconds for a fresh interpreter to run *code* (by default: import the reader), best of 5."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=command_env(REPO / "src"))
        times.append(time.perf_counter() - start)
    return min(times)


def human_size(size: int) -> str:
    if size >= 2**30:
        return f"{size / 2**30:.1f} GiB"
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"


def table(rows: list[Row], baselines: list[str]) -> str:
    head = ("| file | size | entries | cuobjdump s | reader s | ratio | `wheelforge inspect` s "
            "| ratio |")  # fmt: skip
    rule = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for name in baselines:
        head += f" {name} s | ratio | same screen |"
        rule += " ---: | ---: | --- |"
    lines = [
        head + " 10x needs s | cuobjdump peak RSS | decompressed |",
        rule + " ---: | ---: | ---: |",
    ]
    for row in rows:
        line = (
            f"| {row.name} | {human_size(row.size)} | {row.entries} | {row.cuobjdump_s:.3f} "
            f"| {row.reader_s:.4f} | {row.cuobjdump_s / row.reader_s:.0f}x "
            f"| {row.command_s:.3f} | **{row.cuobjdump_s / row.command_s:.1f}x** |"
        )
        for seconds, same in zip(row.baseline_s, row.same_screen, strict=True):
            line += (
                f" {seconds:.3f} | {row.cuobjdump_s / seconds:.1f}x | {'yes' if same else 'no'} |"
            )
        line += (
            f" {row.cuobjdump_s / 10:.3f} | {human_size(row.cuobjdump_rss)} "
            f"| {human_size(row.decompressed)} |"
        )
        lines.append(line)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool; the best is kept")
    parser.add_argument("--markdown", type=Path, help="also write the results to this file")
    parser.add_argument("--library", type=Path, action="append", default=[],
                        help="a shared object to read instead of the default libraries (repeatable)")  # fmt: skip
    parser.add_argument("--baseline", metavar="TREE", action="append", default=[],
                        help="another wheelforge whose whole command is timed alongside: a source "
                             "folder, a checkout or a git revision (repeatable)")  # fmt: skip
    parser.add_argument(
        "--work", type=Path, help="where baselines are extracted [a temporary folder]"
    )
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
        work = args.work or Path(tmp)
        baselines = [baseline_src(given, work, n) for n, given in enumerate(args.baseline)]
        folders = [REPO / "src", *baselines]
        folders += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        for folder in dict.fromkeys(folders):  # as pip install does (see the docstring)
            if folder.is_dir():
                compileall.compile_dir(folder, quiet=1)
        names = [
            f"{given} ({commit_of(src)})"
            for given, src in zip(args.baseline, baselines, strict=True)
        ]
        for library in args.library:
            print(f"{library.name} ...", file=sys.stderr, flush=True)
            rows.append(bench(library, cuobjdump, args.repeat, baselines))
        for pattern, member in () if args.library else DEFAULT_LIBRARIES:
            wheel = find_wheel(pattern)
            if wheel is None:
                print(f"skipped {member}: no {pattern} in {', '.join(map(str, WHEEL_FOLDERS))}")
                continue
            library = extract(wheel, member, Path(tmp))
            print(f"{library.name} (from {wheel.name}) ...", file=sys.stderr, flush=True)
            rows.append(bench(library, cuobjdump, args.repeat, baselines))
            library.unlink()
        startup = interpreter_startup()
        bare = interpreter_startup("pass")
        stack = interpreter_startup("import dataclasses, pathlib, rich.console, rich.table")
    result = table(rows, names)
    print(result)
    release = re.search(r"release [\d.]+, V[\d.]+", version.stdout)
    cuobjdump_version = release[0] if release else version.stdout.strip().splitlines()[-1]
    notes = (
        f"Best of {args.repeat} runs each, warm page cache. Both list the same entries (checked). "
        "The reader reads the ELF section headers and the fatbin entry headers only; cuobjdump's "
        "peak RSS follows the decompressed size of all images (the decompressed column), so it "
        "apparently inflates every image to list it. "
        f"A fresh interpreter takes {startup:.3f} s to import the reader (not in the table), "
        f"{bare:.3f} s to start and do nothing (`python -c pass`, site included, as the console "
        "script starts): the floor of any Python command, against the 10x column's budgets; "
        f"{stack:.3f} s to import only what any command printing a rich table of frozen "
        "dataclasses loads (`import dataclasses, pathlib, rich.console, rich.table`). "
        f"This tree: {commit_of(REPO / 'src')}."
    )
    under = [r.name for r in rows if r.command_s * 10 > r.cuobjdump_s]
    below_floor = [r.name for r in rows if r.cuobjdump_s / 10 < bare]
    below_stack = [r.name for r in rows if bare <= r.cuobjdump_s / 10 < stack]
    if under:
        notes += f" Under 10x: {', '.join(under)}"
        if below_floor:
            notes += (f"; a tenth of cuobjdump's time is less than the bare interpreter's start on "
                      f"{', '.join(below_floor)}")  # fmt: skip
        if below_stack:
            notes += f", less than that import on {', '.join(below_stack)}"
        notes += "."
    print(notes)
    if args.markdown:
        command = "python bench/bench_inspect.py " + " ".join(sys.argv[1:])
        args.markdown.write_text(
            "# Fatbin listing: wheelforge's reader vs cuobjdump\n\n"
            f"Measured {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='minutes')} on "
            f"{platform.machine()} Linux ({platform.node()}), {os.cpu_count()} CPU cores, "
            f"load average {os.getloadavg()[0]:.2f} at the end, Python {platform.python_version()}, "
            f"cuobjdump {cuobjdump_version} ({cuobjdump}).\n\n"
            f"Reproduce with:\n\n```\n{command}\n```\n\n"
            f"{result}\n\n{notes}\n"
        )


if __name__ == "__main__":
    main()
