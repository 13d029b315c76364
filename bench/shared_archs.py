"""Three arch sets sharing archs ("8.0 9.0", "9.0 10.0", "8.0 10.0") against one build of their
union ("8.0 9.0 10.0"), by CPU (the children's user+sys, every process of the build: sccache's
server too), in one run (issue 41 item 2):

- baseline: a wheelforge without nvcc's steps (``--baseline``, default main): one ``nvcc -c``
  per (source, arch set);
- steps: this tree, nvcc's steps shared between arch sets (planning/devshare.py);
- sccache: this tree through sccache, which splits nvcc and caches each arch's cicc and ptxas
  (the matrix shares one empty cache; the union has its own);
- alone: each arch set built alone by this tree (``--only``, a fresh copy): its wheel against
  the matrix's, byte for byte.

The bundled kernels, with the four CCCL defines (devshare.CCCL_OFF) in their nvcc flags, in
every case; each build cold (a fresh copy, empty compile and probe caches).

    python bench/shared_archs.py [--baseline main] [--work DIR] [-j 2]
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from bench_build import baseline_src, commit_of  # noqa: E402

SETS = {"a": "8.0 9.0", "b": "9.0 10.0", "c": "8.0 10.0"}
UNION = {"u": "8.0 9.0 10.0"}
CCCL_OFF = (
    "-DTHRUST_DISABLE_ABI_NAMESPACE",
    "-DTHRUST_IGNORE_ABI_NAMESPACE_ERROR",
    "-DCUB_DISABLE_NAMESPACE_MAGIC",
    "-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR",
)
PR_SET_CHILD_SUBREAPER = 36


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def reap(seconds: float) -> None:
    """Wait for orphaned descendants (sccache's server, a daemon) that this process adopted
    as their subreaper, so their CPU time counts among the children's."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            pid, _, _ = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.1)


def project(dest: Path, sets: dict[str, str]) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(
        REPO / "kernels", dest / "kernels", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    text = (REPO / "matrix.yaml").read_text()
    head, _, rest = text.partition("arch-sets:")
    tail = rest[rest.index("\n\n") :] if "\n\n" in rest else "\n"
    listed = "".join(f'  {n}: "{archs}"\n' for n, archs in sets.items())
    dirs = "  include-dirs: [kernels/csrc]\n"
    head = head.replace(dirs, dirs + f"  nvcc-flags: [{', '.join(CCCL_OFF)}]\n")
    (dest / "matrix.yaml").write_text(f"{head}arch-sets:\n{listed}{tail}")
    return dest


def build(root: Path, src: Path, cache: str, jobs: int, *extra: str) -> tuple[float, float, str]:
    """Wall and CPU seconds of one cold build, and what it printed."""
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    env |= {
        "PYTHONPATH": os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p),
        "SCCACHE_DIR": str(root / ".sccache"),
        "CCACHE_DIR": str(root / ".ccache"),
        "XDG_CACHE_HOME": str(root / ".cache"),
        "COLUMNS": "200",
    }
    args = [sys.executable, "-m", "wheelforge", "build", "--compile-cache", cache, "-j", str(jobs)]
    args += ["--no-import-check", *extra]
    before, start = cpu(), time.perf_counter()
    done = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    reap(5.0)
    spent = cpu() - before
    if done.returncode:
        sys.exit(f"failed in {root}: {' '.join(args)}\n{(done.stdout + done.stderr)[-3000:]}")
    print(f"  {wall:6.1f} s wall {spent:6.1f} s CPU  {root.name} {' '.join(extra)}", flush=True)
    return wall, spent, done.stdout + done.stderr


def shas(root: Path) -> dict[str, str]:
    return {
        w.name: hashlib.sha256(w.read_bytes()).hexdigest()[:16]
        for w in sorted((root / "dist").glob("*.whl"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="a wheelforge tree or git revision")
    parser.add_argument("--work", type=Path, default=Path("/tmp/wheelforge-shared-archs"))
    parser.add_argument("-j", type=int, default=2, dest="jobs")
    parser.add_argument("--skip-sccache", action="store_true")
    args = parser.parse_args()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    this, base = REPO / "src", baseline_src(args.baseline, work)
    cases = {"baseline": (base, "none"), "steps": (this, "none")}
    if not args.skip_sccache:
        cases["sccache"] = (this, "sccache")
    figures: dict[str, dict[str, tuple[float, float]]] = {}
    wheels: dict[str, dict[str, str]] = {}
    for name, (src, cache) in cases.items():
        for kind, sets in (("matrix", SETS), ("union", UNION)):
            root = project(work / f"{name}-{kind}", sets)
            wall, spent, _ = build(root, src, cache, args.jobs)
            figures.setdefault(name, {})[kind] = (wall, spent)
            wheels[f"{name}-{kind}"] = shas(root)
    alone = {}
    for n in SETS:
        root = project(work / f"alone-{n}", SETS)
        build(root, this, "none", args.jobs, "--only", f"{n}-cu130")
        [(wheel, sha)] = shas(root).items()
        alone[wheel] = sha == wheels["steps-matrix"][wheel]
    lines = [
        f"Arch sets {', '.join(repr(s) for s in SETS.values())} against their union "
        f"{UNION['u']!r}: the bundled kernels with CCCL's arch-list namespaces off, cold, -j "
        f"{args.jobs}; {len(os.sched_getaffinity(0))} cores, {platform.machine()}, load "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} at the end.",
        "",
        "| build | wheelforge | matrix CPU | union CPU | CPU ÷ | matrix wall | union wall | wall ÷ |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, (src, _cache) in cases.items():
        (mw, mc), (uw, uc) = figures[name]["matrix"], figures[name]["union"]
        what = {"baseline": "one nvcc -c per arch set", "steps": "nvcc's steps, shared",
                "sccache": "sccache's split of nvcc"}[name]  # fmt: skip
        lines.append(
            f"| {what} | {commit_of(src)} | {mc:.1f} s | {uc:.1f} s | **{mc / uc:.2f}×** | "
            f"{mw:.1f} s | {uw:.1f} s | {mw / uw:.2f}× |"
        )
    lines += [
        "",
        f"Each arch set built alone gives the matrix's wheel, byte for byte: {json.dumps(alone)}",
        "The baseline's and this tree's matrix wheels "
        + (
            "are the same bytes"
            if wheels["baseline-matrix"] == wheels["steps-matrix"]
            else "differ"
        )
        + " (nvcc's steps link the host object and the fatbin as two objects).",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
