"""The union, not the sum: a matrix of three arch sets ("8.0 9.0", "9.0 10.0", "8.0 10.0")
built through sccache's split of nvcc, against one build of their union ("8.0 9.0 10.0"); the
cache counts (each (source, arch)'s cicc and ptxas: a miss once, hits after); and each arch
set built alone, from an empty cache, giving the matrix's bytes.

    python bench/arch_union.py [--work DIR] [--project DIR] [--no-cccl-namespace-off]

--project: another project folder with a matrix.yaml (a CUTLASS-class one: the device code most
of each compile) instead of the bundled kernels; its `arch-sets:` section (the file's last) is
replaced, and the defines are added to its extension's `nvcc-flags:` list.

The bundled kernels include torch's headers, which include Thrust, whose inline namespace
names the arch list (docs/performance.md): without the four CCCL defines below an arch's
inputs differ between arch sets and nothing is shared. Each build has its own empty
SCCACHE_DIR but the matrix's, which its three variants share.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SETS = {"a": "8.0 9.0", "b": "9.0 10.0", "c": "8.0 10.0"}
CCCL_OFF = [
    "-DTHRUST_DISABLE_ABI_NAMESPACE",
    "-DTHRUST_IGNORE_ABI_NAMESPACE_ERROR",
    "-DCUB_DISABLE_NAMESPACE_MAGIC",
    "-DCUB_IGNORE_NAMESPACE_MAGIC_ERROR",
]


def project(dest: Path, *, cccl_off: bool, arch_sets: dict[str, str], source: Path | None) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    skip = shutil.ignore_patterns("build", "dist")
    if source is not None:
        shutil.copytree(source, dest, ignore=skip, symlinks=True)
    else:
        shutil.copytree(REPO / "kernels", dest / "kernels", ignore=skip)
    given = (source or REPO) / "matrix.yaml"
    text = given.read_text(encoding="utf-8")
    text = (
        text.split("arch-sets:")[0]
        + "arch-sets:\n"
        + "".join(f'  {name}: "{archs}"\n' for name, archs in arch_sets.items())
    )
    if cccl_off:
        if source is None:  # the bundled matrix has no nvcc-flags: list: one after include-dirs
            dirs = "  include-dirs: [kernels/csrc]\n"
            text = text.replace(dirs, dirs + "  nvcc-flags:\n")
        if "  nvcc-flags:\n" not in text:
            raise SystemExit(f"{given}: no `  nvcc-flags:` list to add to")
        flags = "".join(f"    - {f}\n" for f in CCCL_OFF)
        text = text.replace("  nvcc-flags:\n", "  nvcc-flags:\n" + flags, 1)
    (dest / "matrix.yaml").write_text(text, encoding="utf-8")
    return dest


def build(root: Path, sccache_dir: Path, report: Path, *extra: str) -> float:
    env = dict(os.environ, SCCACHE_DIR=str(sccache_dir), PYTHONPATH=str(REPO / "src"))
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "wheelforge",
            "build",
            "--compile-cache",
            "sccache",
            "--no-import-check",
            "--report",
            str(report),
            *extra,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return time.perf_counter() - start


def counts(report: Path) -> dict[str, dict[str, int]]:
    doc = json.loads(report.read_text())
    return {v["id"]: v["compile"]["cache"]["detail"] for v in doc["variants"]}


def timings(report: Path) -> dict[str, dict[str, float]]:
    """Each variant's time, and its compile jobs' wall seconds summed (their CPU time is
    unknown: sccache's server ran them)."""
    doc = json.loads(report.read_text())
    out = {}
    for v in doc["variants"]:
        jobs = (v.get("compile") or {}).get("jobs") or []
        out[v["id"]] = {
            "seconds": round(v["seconds"], 1),
            "jobs_wall": round(sum(j["seconds"] for j in jobs), 1),
        }
    return out


def wheels(report: Path) -> dict[str, str]:
    doc = json.loads(report.read_text())
    return {v["arch_set"]["archs"]: v["wheel"]["sha256"] for v in doc["variants"]}


def _alone(work: Path, off: bool, out: dict, source: Path | None) -> None:
    """Each arch set alone: the same matrix in another folder, that variant only (--only: the
    same variant label, so the same wheel name), from an empty cache."""
    doc = json.loads((work / "matrix.json").read_text())
    same = {}
    for variant in doc["variants"]:
        name = variant["id"]
        alone = project(work / f"alone-{name}", cccl_off=off, arch_sets=SETS, source=source)
        build(alone, work / f"sc-{name}", work / f"alone-{name}.json", "--only", name)
        (built,) = json.loads((work / f"alone-{name}.json").read_text())["variants"]
        same[variant["arch_set"]["archs"]] = built["wheel"]["sha256"] == variant["wheel"]["sha256"]
    out["identical_to_alone"] = same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/wheelforge-arch-union"))
    parser.add_argument("--project", type=Path, help="a project folder (matrix.yaml) to build")
    parser.add_argument("--no-cccl-namespace-off", action="store_true")
    parser.add_argument("--skip-alone", action="store_true")
    parser.add_argument("--alone-only", action="store_true", help="only each arch set alone")
    args = parser.parse_args()
    source = args.project.resolve() if args.project else None
    work = args.work
    off = not args.no_cccl_namespace_off
    out: dict = {"cccl_namespace_off": off}
    if args.alone_only:  # the matrix and union built before, in --work
        args.skip_alone = False
        _alone(work, off, out, source)
        print(json.dumps(out, indent=1))
        return
    shutil.rmtree(work, ignore_errors=True)
    matrix = project(work / "matrix", cccl_off=off, arch_sets=SETS, source=source)
    out["matrix_seconds"] = round(build(matrix, work / "sc-matrix", work / "matrix.json"), 1)
    out["matrix_counts"] = counts(work / "matrix.json")
    out["matrix_timings"] = timings(work / "matrix.json")
    union = project(work / "union", cccl_off=off, arch_sets={"u": "8.0 9.0 10.0"}, source=source)
    out["union_seconds"] = round(build(union, work / "sc-union", work / "union.json"), 1)
    out["union_counts"] = counts(work / "union.json")
    out["union_timings"] = timings(work / "union.json")
    out["matrix_over_union"] = round(out["matrix_seconds"] / out["union_seconds"], 2)
    totals: dict[str, int] = {}
    for detail in out["matrix_counts"].values():
        for key, n in detail.items():
            totals[key] = totals.get(key, 0) + n
    out["matrix_totals"] = totals
    if not args.skip_alone:
        _alone(work, off, out, source)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
