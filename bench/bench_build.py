"""Build times of the bundled kernels: wheelforge next to a torch.utils.cpp_extension setup.py
of the same sources, archs and MAX_JOBS, and the core-bound limit, in one run.

    python bench/bench_build.py --archs "7.5 8.0 8.6 8.9 9.0 10.0 12.0+PTX" --out bench.md

Cases (each a fresh process, timed by wall clock):

- cold: a fresh copy of kernels/ and matrix.yaml, empty build folder, empty compile cache
  (wheelforge's default compile cache, in a private folder: a cold cache is part of cold) and
  empty probe cache (torch and nvcc are asked again); ``--repeat`` runs (default 3), each from
  nothing, alternating with the setup.py's cold builds; the median is shown, every run listed;
- no-op: the same command again (median of seven);
- one .cu touched: a line of code appended to one .cu file (a comment would be a cache hit);
- add one arch: the arch list plus ``--add-arch``, into an output folder of its own (its wheel
  has the first build's name, and a build never replaces a wheel another variant published);
- warm cache, fresh clone: the untouched sources copied into other folders (``--repeat`` of
  them), built with the cache the first cold build filled; each wheel is compared byte for
  byte with the cold build's.

The core-bound limit: a cold build with one nvcc thread per job and no cache gives the CPU
work of every compile job in ninja's log (``.ninja_log``: start and end of each job); the
limit is that sum divided by the cores, plus the serial tail of the median cold build (its
wall time after ninja's last job ended, and before its first began: probing, link, pack,
repair, checks). Next to it, the floor of any schedule that compiles each source in one nvcc
job: the longest of those jobs run again alone, with one nvcc thread per target.

With ``--baseline TREE`` (another wheelforge: a source folder holding ``wheelforge/``, a checkout
holding ``src/wheelforge/``, or a git revision of this repository, extracted with ``git archive``;
repeatable), the no-op rebuild is also measured side by side: each wheelforge builds its own
copy once, then their no-op rebuilds alternate (A B C C B A A B C ...: none always runs first),
``--noop-runs`` each; the medians of wall and CPU time and their ratios are shown, with each
tree's commit. ``--cases noop`` runs only that comparison (no setup.py, no cold-build series):

    python bench/bench_build.py --cases noop --baseline a350be1 --baseline 0ca3cee --archs "9.0"

``--cases arch-sets`` (issue 33: the matrix of several arch sets against one build of their
union): for this tree and each ``--baseline``, cold builds of the kernels with a matrix whose
``arch-sets:`` are ``--sets`` (default "8.0" "9.0" "10.0", one variant each) and with one arch set of
their union; each build from nothing (a fresh copy, its own empty compile cache and probe cache),
the trees and the two builds taking turns, ``--repeat`` of each; the medians, the ratio matrix ÷
union per tree, where the matrix's compile jobs went (each build folder's ``.ninja_log``: jobs and
Σ job time per folder, the shared one of C++ and C compiles included) and whether the trees'
wheels are the same bytes:

    python bench/bench_build.py --cases arch-sets --baseline main --repeat 2

The wheelforge under test is this file's tree (``src/``, first on PYTHONPATH). Every folder on
PYTHONPATH is byte-compiled first, as ``pip install`` does, so no run pays for compiling modules
where bytecode is not written (PYTHONDONTWRITEBYTECODE, dependencies installed ``--no-compile``).

Needs torch, nvcc, ninja and wheelforge's dependencies importable, and setuptools for the setup.py
baseline (not for ``--cases noop``).
"""

from __future__ import annotations

import argparse
import compileall
import hashlib
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOUCHED = "kernels/csrc/activation_cuda.cu"
NOOP_RUNS = 7
STATS_RE = re.compile(r"compile cache (\w+): (\d+) hit\(s\), (\d+) miss\(es\)")
COMPILED_RE = re.compile(r"compiled (\d+) of (\d+) sources")

SETUP_PY = """\
import glob, os
import torch
from setuptools import setup
from torch.utils import cpp_extension
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

# A CPU build of torch leaves CUDA_HOME unset whatever the environment says; a CUDA build of
# torch finds it by itself.
cpp_extension.CUDA_HOME = cpp_extension.CUDA_HOME or os.environ["CUDA_HOME"]

defines = ["-DTORCH_TARGET_VERSION=0x020a000000000000", "-DPy_LIMITED_API=0x030a0000",
           "-DTORCH_EXTENSION_NAME=_C"]
ext = CUDAExtension(
    "wheelforge_kernels._C",
    sorted(glob.glob("kernels/csrc/*.cpp")) + sorted(glob.glob("kernels/csrc/*.cu"))
    + ["module_init.c"],
    include_dirs=["kernels/csrc"], py_limited_api=True,
    extra_compile_args={"cxx": ["-O3", *defines], "nvcc": ["-O3", "-DUSE_CUDA", *defines]},
)
if not torch.cuda._is_compiled():  # a CPU torch has no libtorch_cuda to link
    ext.libraries = [n for n in ext.libraries if n not in ("c10_cuda", "torch_cuda")]
setup(
    name="wheelforge-kernels", version="0.1.0", packages=["wheelforge_kernels"],
    package_dir={"wheelforge_kernels": "kernels/wheelforge_kernels"},
    ext_modules=[ext], cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
"""
MODULE_INIT = """\
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&m); }
"""


@dataclass
class Run:
    seconds: float
    cpu: float  # user + system seconds of the command and everything it waited for
    out: str
    ninja_log: Path | None = None

    @property
    def cache(self) -> str:
        m = STATS_RE.search(self.out)
        return f"{m[1]}: {m[2]} hits, {m[3]} misses" if m else "-"

    @property
    def compiled(self) -> str:
        m = COMPILED_RE.search(self.out)
        return f"{m[1]}/{m[2]}" if m else "0"


@dataclass
class Bench:
    archs: str
    add_arch: str
    jobs: int
    work: Path
    python: str
    threads: int  # nvcc --threads of the longest job run alone: the targets per source
    repeat: int  # runs of each cold build and of the fresh clone (their median is shown)
    env: dict[str, str] = field(default_factory=dict)

    def fresh_copy(self, name: str) -> Path:
        root = self.work / name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        ignore = shutil.ignore_patterns("__pycache__", "*.so")
        shutil.copytree(REPO / "kernels", root / "kernels", ignore=ignore)
        shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
        return root

    def run(self, args: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
        # The arch lists are the bench's own (the matrix's sets, --archs, or the setup.py
        # baseline's TORCH_CUDA_ARCH_LIST given in *env*): one in the environment (the GPU
        # machine's TORCH_CUDA_ARCH_LIST=9.0a) would replace the matrix's arch sets.
        full = {
            **{k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"},
            "MAX_JOBS": str(self.jobs),
            "COLUMNS": "200",
            **self.env,
            **(env or {}),
        }
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"  {fmt(seconds):>8}  {' '.join(args[1:])}", flush=True)
        out = proc.stdout + proc.stderr
        if proc.returncode != 0:
            sys.exit(f"failed ({proc.returncode}): {' '.join(args)} in {cwd}\n{out[-4000:]}")
        return Run(seconds, cpu, out)

    def wheelforge(
        self,
        root: Path,
        archs: str,
        env: dict[str, str] | None = None,
        *,
        out: str | None = None,
        src: Path = REPO / "src",
    ) -> Run:
        # no archs: the matrix's arch sets (the arch-sets case)
        args = [self.python, "-m", "wheelforge", "build", *(["--archs", archs] if archs else [])]
        args += ["--out", out] if out else []
        path = os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p)
        run = self.run(args, root, {"PYTHONPATH": path, **(env or {})})
        logs = sorted((root / "build" / "wheelforge").glob("*/.ninja_log"))
        run.ninja_log = logs[0] if logs else None
        return run

    def setup_py(self, root: Path, archs: str) -> Run:
        env = {"TORCH_CUDA_ARCH_LIST": archs, "CUDA_HOME": cuda_home()}
        args = [self.python, "setup.py", "-q", "bdist_wheel", "-d", "dist"]
        return self.run(args, root, env)


def cuda_home() -> str:
    """$CUDA_HOME, else the root of the toolkit wheelforge would pick: cpp_extension cannot
    find it by itself when torch is a CPU build."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    from wheelforge.toolchain.toolkits import discover

    found = discover()
    if not found:
        sys.exit("no CUDA toolkit found; set CUDA_HOME")
    return str(found[0].root)


def ninja_jobs(log: Path) -> list[tuple[int, int, str]]:
    """(start ms, end ms, output) of each job of the last build recorded in a .ninja_log."""
    jobs: dict[str, tuple[int, int, str]] = {}
    for line in log.read_text().splitlines():
        if line.startswith("#"):
            continue
        start, end, _mtime, output, _hash = line.split("\t")
        jobs[output] = (int(start), int(end), output)  # a later build of an output wins
    return sorted(jobs.values())


def critical_job(log: Path, jobs: list[tuple[int, int, str]], threads: int) -> tuple[str, float]:
    """The longest compile job of a one-thread build, run again alone with nvcc ``--threads``:
    how long one source takes when nothing else runs, the shortest any schedule that compiles
    each source in one nvcc job can be (its host compile waits for every arch's device code)."""
    output = max(jobs, key=lambda j: j[1] - j[0])[2]
    folder = log.parent
    command = subprocess.run(["ninja", "-t", "commands", "-s", output], cwd=folder,
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    env = {**os.environ, "NVCC_APPEND_FLAGS": f"--threads {threads}"}
    began = time.perf_counter()
    subprocess.run(command, shell=True, cwd=folder, env=env, check=True, capture_output=True)
    return Path(output).name, time.perf_counter() - began


def touch(root: Path, nonce: int) -> None:
    path = root / TOUCHED
    path.write_text(
        path.read_text()
        + f"\nnamespace {{ [[maybe_unused]] const int wf_bench_{nonce} = {nonce}; }}\n"
    )


def sha(root: Path) -> str:
    (wheel,) = (root / "dist").glob("*.whl")
    return hashlib.sha256(wheel.read_bytes()).hexdigest()


def median_of(n: int, fn: Callable[[], Run]) -> Run:
    return median_run([fn() for _ in range(n)])


def median_run(done: list[Run]) -> Run:
    """The run with the median time (the upper one of an even count)."""
    return sorted(done, key=lambda r: r.seconds)[len(done) // 2]


def runs(done: list[Run]) -> str:
    return ", ".join(fmt(r.seconds) for r in done)


def fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"


def measure(b: Bench) -> str:
    wider = f"{b.archs} {b.add_arch}"
    cores = len(os.sched_getaffinity(0))
    print("limit: cold build, one nvcc thread per job, no cache ...", flush=True)
    serial = b.wheelforge(b.fresh_copy("serial"), b.archs, {"NVCC_THREADS": "1",
                          "WHEELFORGE_COMPILE_CACHE": "none",
                          "XDG_CACHE_HOME": str(b.work / "xdg-serial")})  # fmt: skip
    assert serial.ninja_log is not None
    jobs = ninja_jobs(serial.ninja_log)
    compile_jobs = [j for j in jobs if j[2].endswith(".o")]
    work_s = sum(e - s for s, e, _ in compile_jobs) / 1000
    longest, longest_s = critical_job(serial.ninja_log, compile_jobs, b.threads)

    print(f"cold builds, {b.repeat} of each, alternating ...", flush=True)
    s = b.fresh_copy("setup")
    (s / "setup.py").write_text(SETUP_PY)
    (s / "module_init.c").write_text(MODULE_INIT)
    a = b.fresh_copy("a")
    sp_colds: list[Run] = []
    wf_colds: list[Run] = []
    for i in range(b.repeat):
        # The first of each goes on (no-op, touched, ...); the others start from nothing too:
        # a fresh copy, and for wheelforge private compile and probe caches.
        sp_root = s if i == 0 else b.fresh_copy(f"setup-{i}")
        if i:
            (sp_root / "setup.py").write_text(SETUP_PY)
            (sp_root / "module_init.c").write_text(MODULE_INIT)
        sp_colds.append(b.setup_py(sp_root, b.archs))
        private = {name: str(b.work / f"{name.lower()}-{i}")
                   for name in ("CCACHE_DIR", "SCCACHE_DIR", "XDG_CACHE_HOME")}  # fmt: skip
        wf_colds.append(b.wheelforge(a, b.archs) if i == 0 else
                        b.wheelforge(b.fresh_copy(f"cold-{i}"), b.archs, private))  # fmt: skip
    sp_cold, wf_cold = median_run(sp_colds), median_run(wf_colds)
    cold_sha = sha(a)
    assert wf_cold.ninja_log is not None
    cold_jobs = ninja_jobs(wf_cold.ninja_log)
    ninja_span = (max(e for _, e, _ in cold_jobs) - min(s for s, _, _ in cold_jobs)) / 1000
    tail = wf_cold.seconds - ninja_span

    print("setup.py: no-op, touched, add-arch ...", flush=True)
    sp_noop = median_of(NOOP_RUNS, lambda: b.setup_py(s, b.archs))
    touch(s, 1)
    sp_touch = b.setup_py(s, b.archs)
    sp_add = b.setup_py(s, wider)

    print("wheelforge: no-op, touched, add-arch, fresh clones ...", flush=True)
    wf_noop = median_of(NOOP_RUNS, lambda: b.wheelforge(a, b.archs))
    touch(a, 1)
    wf_touch = b.wheelforge(a, b.archs)
    wf_add = b.wheelforge(a, wider, out="dist-added")
    clones = [b.fresh_copy(f"elsewhere/clone-{i}") for i in range(b.repeat)]
    wf_clones = [b.wheelforge(clone, b.archs) for clone in clones]
    wf_clone = median_run(wf_clones)
    same = all(sha(clone) == cold_sha for clone in clones)

    print("wheelforge with sccache: cold, add-arch (its per-arch steps) ...", flush=True)
    sc = b.fresh_copy("sccache")
    sccache = {"WHEELFORGE_COMPILE_CACHE": "sccache"}
    sc_cold = b.wheelforge(sc, b.archs, sccache)
    sc_add = b.wheelforge(sc, wider, sccache, out="dist-added")

    limit = work_s / cores + tail
    rows = [
        (f"cold build (median of {b.repeat})", wf_cold, sp_cold),
        (f"no-op rebuild (median of {NOOP_RUNS})", wf_noop, sp_noop),
        ("one .cu touched", wf_touch, sp_touch),
        (f"add one arch (+{b.add_arch})", wf_add, sp_add),
        (f"warm cache, fresh clone in another folder (median of {b.repeat})", wf_clone, None),
        ("cold build, `--compile-cache sccache`", sc_cold, None),
        (f"add one arch (+{b.add_arch}), `--compile-cache sccache`", sc_add, None),
    ]
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"Load average at the end (1/5/15 min): {load}.",
        f"Machine: {cores} cores, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, {_versions(b.python)}; archs `{b.archs}`, MAX_JOBS={b.jobs}.",
        "",
        "| case | wheelforge | its CPU time | compiled | compile cache | setup.py (cpp_extension) |",
        "| --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for name, wf, sp in rows:
        lines.append(f"| {name} | {fmt(wf.seconds)} | {fmt(wf.cpu)} | {wf.compiled} | {wf.cache} | "
                     f"{fmt(sp.seconds if sp else None)} |")  # fmt: skip
    lines += [
        "",
        "| core-bound limit | value |",
        "| --- | ---: |",
        f"| compile jobs in ninja's log (one nvcc thread each) | {len(compile_jobs)} |",
        f"| Σ job time | {fmt(work_s)} |",
        f"| ÷ {cores} cores | {fmt(work_s / cores)} |",
        f"| serial tail of the cold build (wall − ninja's span) | {fmt(tail)} |",
        f"| **limit** | **{fmt(limit)}** |",
        f"| cold build ÷ limit | {wf_cold.seconds / limit:.2f}× |",
        f"| longest compile job alone, nvcc `--threads {b.threads}` (`{longest}`) | {fmt(longest_s)} |",
        f"| floor of one nvcc job per source: max(Σ ÷ cores, longest alone) + tail | "
        f"{fmt(max(work_s / cores, longest_s) + tail)} |",
        f"| cold build ÷ that floor | {wf_cold.seconds / (max(work_s / cores, longest_s) + tail):.2f}× |",
        f"| cold, one nvcc thread per job, no cache (for comparison) | {fmt(serial.seconds)} |",
        f"| setup.py cold ÷ wheelforge cold | {sp_cold.seconds / wf_cold.seconds:.2f}× |",
        f"| warm fresh clone ÷ cold | {wf_clone.seconds / wf_cold.seconds:.1%} |",
        f"| fresh clones' wheels identical to the cold build's | {'yes' if same else 'NO'} |",
        "",
        "Each run of the repeated cases: wheelforge cold "
        f"{runs(wf_colds)}; setup.py cold {runs(sp_colds)}; fresh clone {runs(wf_clones)}.",
    ]
    return "\n".join(lines) + "\n"


def baseline_src(given: str, work: Path, n: int = 0) -> Path:
    """The baseline's source folder (the one holding ``wheelforge/``): *given* itself, its
    ``src/``, or this repository's revision *given* extracted into *work* (the *n*-th
    baseline's folder)."""
    for folder in (Path(given), Path(given) / "src"):
        if (folder / "wheelforge" / "__init__.py").is_file():
            return folder.resolve()
    dest = work / ("baseline" if n == 0 else f"baseline-{n + 1}")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", given, "src"],
                             capture_output=True)  # fmt: skip
    if archive.returncode != 0:
        sys.exit(f"--baseline {given}: neither a folder holding wheelforge/ (or src/wheelforge/) "
                 f"nor a git revision of {REPO}: {archive.stderr.decode().strip()}")  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    (dest / "COMMIT").write_text(given + "\n")
    return dest / "src"


def commit_of(src: Path) -> str:
    """The commit a source folder is at (``git rev-parse``), or the revision it was extracted
    from; this tree's is $WHEELFORGE_BENCH_COMMIT where set (the device's copy of a working
    tree carries a .git that is not the tree's)."""
    recorded = src.parent / "COMMIT"
    if recorded.is_file():
        rev = recorded.read_text().strip()
        done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev],
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout.strip() or rev
    if src == REPO / "src" and os.environ.get("WHEELFORGE_BENCH_COMMIT"):
        return os.environ["WHEELFORGE_BENCH_COMMIT"]  # a copy whose .git is not its own
    done = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return (done.stdout.strip() or "?") + (" + uncommitted changes" if dirty else "")


def is_noop(run: Run) -> bool:
    return "nothing to compile: up to date" in run.out and "is up to date" in run.out


def measure_noop(b: Bench, baselines: list[Path], runs_each: int) -> str:
    """The no-op rebuild of this tree's wheelforge and of each baseline's, alternating: each
    builds its own copy of the kernels once (the compile cache makes the second a cache hit),
    then their no-op rebuilds take turns, A B C C B A A B C ..., so none always runs first."""
    trees = {"this tree": REPO / "src"}
    for n, baseline in enumerate(baselines):
        trees["baseline" if len(baselines) == 1 else f"baseline {n + 1}"] = baseline
    roots = {}
    for n, (name, src) in enumerate(trees.items()):
        print(f"{name}: build once ({src}) ...", flush=True)
        roots[name] = b.fresh_copy("noop-this" if n == 0 else f"noop-baseline-{n}")
        b.wheelforge(roots[name], b.archs, src=src)
    # Once every copy is built (the builds share the user cache: job costs, probe entries),
    # one no-op each settles the stamps and what a no-op stores for the next.
    for name, src in trees.items():
        if not is_noop(b.wheelforge(roots[name], b.archs, src=src)):
            sys.exit(f"{name}: the second build was not a no-op")
    print(f"no-op rebuilds, {runs_each} of each, alternating ...", flush=True)
    done: dict[str, list[Run]] = {name: [] for name in trees}
    order = list(trees)
    for i in range(runs_each):
        for name in order if i % 2 == 0 else order[::-1]:
            run = b.wheelforge(roots[name], b.archs, src=trees[name])
            if not is_noop(run):
                sys.exit(f"{name}: rebuild {i + 1} was not a no-op:\n{run.out[-2000:]}")
            done[name].append(run)
    wall = {n: statistics.median(r.seconds for r in rs) for n, rs in done.items()}
    cpu = {n: statistics.median(r.cpu for r in rs) for n, rs in done.items()}
    cores = len(os.sched_getaffinity(0))
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"No-op rebuild, {runs_each} runs of each, alternating; load average at the end "
        f"(1/5/15 min): {load}.",
        f"Machine: {cores} cores, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, {_versions(b.python)}; archs `{b.archs}`.",
        "",
        "| wheelforge | commit | no-op wall (median) | its CPU (median) | every run's wall |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for name, src in trees.items():
        lines.append(f"| {name} | {commit_of(src)} | {fmt(wall[name])} | {fmt(cpu[name])} | "
                     f"{runs(done[name])} |")  # fmt: skip
    lines.append("")
    for name in order[1:]:
        lines.append(f"This tree ÷ {name}: wall {wall['this tree'] / wall[name]:.2f}×, "
                     f"CPU {cpu['this tree'] / cpu[name]:.2f}×.")  # fmt: skip
    return "\n".join(lines) + "\n"


def arch_sets_copy(b: Bench, name: str, sets: dict[str, str]) -> Path:
    """A fresh copy of the kernels whose matrix.yaml has *sets* as its arch sets."""
    root = b.fresh_copy(name)
    matrix = root / "matrix.yaml"
    text = matrix.read_text()
    head, _, rest = text.partition("arch-sets:")
    tail = rest[rest.index("\n\n") :] if "\n\n" in rest else "\n"
    listed = "".join(f'  {n}: "{archs}"\n' for n, archs in sets.items())
    matrix.write_text(f"{head}arch-sets:\n{listed}{tail}")
    return root


def folder_jobs(root: Path) -> str:
    """Each build folder's compile jobs and their summed time (its .ninja_log), as one cell."""
    cells = []
    for log in sorted((root / "build" / "wheelforge").glob("*/.ninja_log")):
        jobs = [j for j in ninja_jobs(log) if j[2].endswith(".o")]
        total = sum(e - s for s, e, _ in jobs) / 1000
        cells.append(f"{log.parent.name}: {len(jobs)} ({fmt(total)})")
    return "; ".join(cells)


def wheel_shas(root: Path) -> dict[str, str]:
    return {
        w.name: hashlib.sha256(w.read_bytes()).hexdigest()
        for w in sorted((root / "dist").glob("*.whl"))
    }


def measure_arch_sets(b: Bench, baselines: list[Path], sets: list[str]) -> str:
    """The matrix of *sets* (one variant each) against one build of their union, cold, for this
    tree and each baseline, taking turns (A-matrix A-union B-matrix B-union, then reversed)."""
    trees = {"this tree": REPO / "src"}
    for n, baseline in enumerate(baselines):
        trees["baseline" if len(baselines) == 1 else f"baseline {n + 1}"] = baseline
    matrix_sets = {chr(ord("a") + i): archs for i, archs in enumerate(sets)}
    union = " ".join(dict.fromkeys(a for archs in sets for a in archs.split()))
    cases = {"matrix": matrix_sets, "union": {"u": union}}
    done: dict[tuple[str, str], list[Run]] = {(t, c): [] for t in trees for c in cases}
    jobs: dict[tuple[str, str], str] = {}
    shas: dict[tuple[str, str], dict[str, str]] = {}
    order = [(t, c) for t in trees for c in cases]
    print(f"arch sets {sets} against their union {union!r}, {b.repeat} of each ...", flush=True)
    for i in range(b.repeat):
        for n, (tree, case) in enumerate(order if i % 2 == 0 else order[::-1]):
            slug = f"sets-{i}-{n}"
            root = arch_sets_copy(b, slug, cases[case])
            private = {name: str(b.work / f"{name.lower()}-{slug}")
                       for name in ("CCACHE_DIR", "SCCACHE_DIR", "XDG_CACHE_HOME")}  # fmt: skip
            run = b.wheelforge(root, "", private, src=trees[tree])
            done[(tree, case)].append(run)
            jobs[(tree, case)] = folder_jobs(root)
            shas[(tree, case)] = wheel_shas(root)
    medians = {k: statistics.median(r.seconds for r in rs) for k, rs in done.items()}
    cpus = {k: statistics.median(r.cpu for r in rs) for k, rs in done.items()}
    cores = len(os.sched_getaffinity(0))
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    cache = b.env.get("WHEELFORGE_COMPILE_CACHE", "auto")
    lines = [
        f"Arch sets {', '.join(repr(s) for s in sets)} as a matrix (a variant each) against one "
        f"build of their union {union!r}; cold builds (fresh copies, empty compile and probe "
        f"caches), `--compile-cache {cache}`, {b.repeat} of each, taking turns; load average at "
        f"the end (1/5/15 min): {load}.",
        f"Machine: {cores} cores, {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}, {_versions(b.python)}, MAX_JOBS={b.jobs}.",
        "",
        "| wheelforge | commit | matrix (median) | union (median) | matrix ÷ union | CPU: matrix, union (medians) | CPU ÷ | every run: matrix; union |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for tree, src in trees.items():
        m, u = medians[(tree, "matrix")], medians[(tree, "union")]
        mc, uc = cpus[(tree, "matrix")], cpus[(tree, "union")]
        lines.append(f"| {tree} | {commit_of(src)} | {fmt(m)} | {fmt(u)} | **{m / u:.2f}×** | "
                     f"{fmt(mc)}, {fmt(uc)} | {mc / uc:.2f}× | "
                     f"{runs(done[(tree, 'matrix')])}; {runs(done[(tree, 'union')])} |")  # fmt: skip
    lines += ["", "| wheelforge | build | compile jobs per build folder (Σ job time), last run |",
              "| --- | --- | --- |"]  # fmt: skip
    for tree, case in order:
        lines.append(f"| {tree} | {case} | {jobs[(tree, case)]} |")
    lines.append("")
    for tree in list(trees)[1:]:
        for case in cases:
            same = shas[("this tree", case)] == shas[(tree, case)]
            lines.append(f"The {case}'s wheels of this tree and {tree}: "
                         f"{'the same bytes' if same else 'DIFFERENT'} "
                         f"({len(shas[(tree, case)])} wheel(s)).")  # fmt: skip
    return "\n".join(lines) + "\n"


def _versions(python: str) -> str:
    code = "import torch; print(torch.__version__)"
    torch_v = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()
    nvcc = Path(cuda_home()) / "bin" / "nvcc"
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\S+),", out)
    return f"torch {torch_v}, nvcc {m[1] if m else '?'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default="8.0 9.0+PTX")
    parser.add_argument("--add-arch", default="10.3", help="the arch the add-one-arch case adds")
    parser.add_argument(
        "--jobs", type=int, default=len(os.sched_getaffinity(0)), help="MAX_JOBS of both"
    )
    parser.add_argument("--work", type=Path, help="work folder [default: a temporary one, removed]")
    parser.add_argument("--out", type=Path, help="also write the tables to this file")
    parser.add_argument("--compile-cache", default="auto", help="wheelforge's compile cache")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each cold build and fresh clone; the median is shown")  # fmt: skip
    parser.add_argument("--cases", choices=["all", "noop", "arch-sets"], default="all",
                        help="noop: only the no-op comparison with --baseline; arch-sets: only "
                        "the matrix of --sets against their union (each --baseline beside)")  # fmt: skip
    parser.add_argument("--sets", nargs="+", default=["8.0", "9.0", "10.0"], metavar="ARCHS",
                        help="the arch-sets case's arch sets, one variant each [8.0 9.0 10.0]")  # fmt: skip
    parser.add_argument("--baseline", metavar="TREE", action="append", default=[],
                        help="another wheelforge (a folder or a git revision) whose no-op "
                        "rebuild (with --cases arch-sets: its matrix and union builds) is measured "
                        "beside this tree's (repeatable)")  # fmt: skip
    parser.add_argument("--noop-runs", type=int, default=NOOP_RUNS,
                        help=f"no-op rebuilds of each wheelforge [{NOOP_RUNS}]")  # fmt: skip
    args = parser.parse_args()
    if args.cases == "noop" and not args.baseline:
        parser.error("--cases noop needs --baseline")
    if args.repeat < 1 or args.noop_runs < 1:
        parser.error("--repeat and --noop-runs must be at least 1")
    sys.path.insert(0, str(REPO / "src"))  # this tree's wheelforge (cuda_home)
    work = args.work or Path(tempfile.mkdtemp(prefix="wf-bench-"))
    baselines = [baseline_src(given, work, n) for n, given in enumerate(args.baseline)]
    # As `pip install` does: byte-compiled once, this tree's wheelforge, the baseline's and every
    # folder on PYTHONPATH (dependencies installed with --no-compile). Otherwise, where
    # bytecode is not written (PYTHONDONTWRITEBYTECODE, a read-only checkout), every run
    # compiles each module it imports again (~0.1 s here, ~1 s on the H200 machine for
    # wheelforge's alone), which no installed copy does.
    folders = [REPO / "src", *baselines]
    folders += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in dict.fromkeys(folders):
        if folder.is_dir():
            compileall.compile_dir(folder, quiet=1)
    # A private compile cache and probe cache: the cold build starts from nothing.
    env = {"CCACHE_DIR": str(work / "ccache"), "SCCACHE_DIR": str(work / "sccache"),
           "XDG_CACHE_HOME": str(work / "xdg"), "WHEELFORGE_COMPILE_CACHE": args.compile_cache}  # fmt: skip
    try:
        threads = len(args.archs.split()) + args.archs.count("+PTX")
        bench = Bench(archs=args.archs, add_arch=args.add_arch, jobs=args.jobs, work=work,
                      python=sys.executable, threads=threads, repeat=args.repeat, env=env)  # fmt: skip
        if args.cases == "arch-sets":
            table = measure_arch_sets(bench, baselines, args.sets)
        else:
            table = measure(bench) if args.cases == "all" else ""
            if baselines:
                table += ("\n" if table else "") + measure_noop(bench, baselines, args.noop_runs)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
