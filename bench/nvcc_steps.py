"""nvcc's steps as separate jobs (issue 41, items 1 and 2): a prototype measured beside the
one-job ``nvcc -c`` it would replace, on the bundled kernels' ``.cu`` sources.

One ``nvcc -c`` runs, one after the other: the host preprocessing, cudafe++, then per arch the
device preprocessing, cicc and ptxas, then fatbinary, and last the host compile of the
``.cudafe1.cpp``, which includes the stub, which includes the ``.fatbin.c`` (the fatbin as
data). Split into jobs:

- host (one per source, the same for every arch set): the host preprocessing, cudafe++ and the
  host compile, replayed from ``nvcc -dryrun`` (nvcc has no documented host-only phase), with
  the ``.fatbin.c`` replaced by a wrapper (``__fatDeviceText`` in ``.nvFatBinSegment``, what
  ``__cudaRegisterFatBinary`` reads) that points at a hidden symbol named after the source's
  module id, instead of holding the data;
- device (one per source and arch): ``nvcc -cubin`` (``-ptx`` for +PTX), nvcc's own phase;
- fatbin (one per source and arch set): ``fatbinary --create`` with the images, the flags
  nvcc gives it;
- fatbin object (one per source and arch set): the fatbin in ``.nv_fatbin`` under that symbol
  (``.incbin``).

Sound only where no step reads the arch list: nvcc defines ``__CUDA_ARCH_LIST__`` for the host
and every device preprocessing, and CCCL (which torch's headers include) names its inline
namespaces after it unless the project turns that off (docs/performance.md, "The union, not
the sum"). The script checks it: the host preprocessing and each arch's device preprocessing
with ``-dU`` (gcc lists every macro that is expanded or tested) must not name it.

What it shows, each figure from this one run:

1. the host object is byte-identical whichever arch set it is built for, each arch's cubin is
   the one ``nvcc -c`` embeds, and the fatbin is byte-identical to ``nvcc -c``'s;
2. CPU time (the children's user+sys) of the matrix "8.0 9.0", "9.0 10.0", "8.0 10.0" against
   the union "8.0 9.0 10.0", one-job nvcc and split, each compile once (what a shared cache
   and a shared host folder would give);
3. ``--gpu``: a small CUDA program (a kernel template in an anonymous namespace, a
   ``__device__`` variable, ``__constant__`` memory, a static device variable) linked from split
   objects and from one-job objects into shared objects, loaded and run: same results.

    PYTHONPATH=src python bench/nvcc_steps.py --work /tmp/nvccsteps/steps [--gpu]
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from wheelforge.build.nvccsplit import (  # the fatbin wrapper and object the steps write
    DATA,
    WRAPPER,
)
from wheelforge.planning import devshare

REPO = Path(__file__).resolve().parent.parent
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
NVCC = str(CUDA / "bin/nvcc")
CCCL_OFF = list(devshare.CCCL_OFF)  # the planner's list
# the host job's arch: any one, the same for every arch set (the -dU check proves it unread)
HOST_ARCH = "80"
MATRIX = {"a": ["80", "90"], "b": ["90", "100"], "c": ["80", "100"]}
UNION = ["80", "90", "100"]
# the wrapper nvcc's .fatbin.c defines, pointing at the data by symbol instead of holding it


class Clock:
    """CPU seconds (user+sys) of the children run since the last read."""

    def __init__(self) -> None:
        self.last = self._now()

    @staticmethod
    def _now() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def read(self) -> float:
        now = self._now()
        spent, self.last = now - self.last, now
        return spent


def run(cmd: list[str] | str, cwd: Path) -> None:
    env = dict(os.environ, PATH=f"{CUDA}/nvvm/bin:{CUDA}/bin:{os.environ['PATH']}")
    shell = isinstance(cmd, str)
    p = subprocess.run(cmd, cwd=cwd, shell=shell, env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"failed ({p.returncode}) in {cwd}: {cmd}\n{p.stderr[-3000:]}")


def gencode(archs: list[str], ptx: str | None = None) -> list[str]:
    out = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    return out + ([f"-gencode=arch=compute_{ptx},code=compute_{ptx}"] if ptx else [])


def seeded(flags: list[str], src: Path) -> list[str]:
    """The flags with the source's seed: cudafe++ (host job) and cicc (device job) each make
    the module id, which names static device symbols on both sides; the seed makes it the same."""
    return [*flags, f"--frandom-seed={src.name}"]


def dryrun(flags: list[str], src: Path, archs: list[str], cwd: Path, keep: bool) -> list[str]:
    """nvcc -c's commands (the ``#$`` lines that are not variable settings)."""
    flags = seeded(flags, src)
    extra = ["--keep", "--keep-dir", "."] if keep else []
    cmd = [NVCC, *flags, *gencode(archs), "-c", str(src), "-o", "whole.o", "-dryrun", *extra]
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True)
    lines = [ln[3:] for ln in p.stderr.splitlines() if ln.startswith("#$ ")]
    return [ln for ln in lines if not re.match(r"^[A-Za-z_]+=", ln)]


def names_arch_list(pp_cmd: str, cwd: Path) -> bool:
    """Whether the preprocessing *pp_cmd* expands or tests ``__CUDA_ARCH_LIST__`` (gcc -dU)."""
    probe = re.sub(r' -o "[^"]*"', ' -o "dU.ii"', pp_cmd).replace(" -E ", " -E -dU ", 1)
    run(probe, cwd)
    text = (cwd / "dU.ii").read_text(errors="replace")
    (cwd / "dU.ii").unlink()
    return re.search(r"^#(define|undef) __CUDA_ARCH_LIST__\b", text, re.M) is not None


def host_front(flags: list[str], src: Path, work: Path) -> tuple[str, bool, str]:
    """The host job's first half (no device job before it): the host preprocessing and
    cudafe++, for HOST_ARCH; the host compile's command, whether the host preprocessing reads
    the arch list, and the symbol the wrapper names (after the module id cudafe++ wrote, the
    one cicc makes from the same seed)."""
    work.mkdir(parents=True, exist_ok=True)
    cmds = dryrun(flags, src, [HOST_ARCH], work, keep=True)
    pp = next(c for c in cmds if " -E " in c and ".cpp4.ii" in c)
    fe = next(c for c in cmds if c.startswith("cudafe++"))
    cc = next(c for c in cmds if " -c " in c and "cudafe1.cpp" in c)
    reads = names_arch_list(pp, work)
    run(pp, work)
    run(fe, work)
    module_id = next(work.glob("*.module_id")).read_text().strip()
    symbol = "__wf_fatbin" + re.sub(r"[^A-Za-z0-9_]", "_", module_id)
    return cc.replace('-o "whole.o"', '-o "host.o"'), reads, symbol


def host_compile(cc: str, symbol: str, stub: Path, work: Path) -> Path:
    """The host job's second half: the ``.cudafe1.cpp`` compiled with the stub cicc wrote (in
    the device job of any arch: the bench checks they are the same bytes) and the wrapper in
    place of the ``.fatbin.c``."""
    shutil.copyfile(stub, work / stub.name)
    fatbin_c = re.search(r'#include "([^"]+\.fatbin\.c)"', stub.read_text())
    assert fatbin_c, f"{stub}: no .fatbin.c include"
    (work / fatbin_c[1]).write_text(WRAPPER.replace("SYMBOL", symbol))
    run(cc, work)
    return work / "host.o"


def host_job(flags: list[str], src: Path, work: Path, stub: Path) -> tuple[Path, str, bool]:
    cc, reads, symbol = host_front(flags, src, work)
    return host_compile(cc, symbol, stub, work), symbol, reads


def device_job(flags: list[str], src: Path, arch: str, ptx: bool, work: Path) -> Path:
    """One arch's cubin (or PTX) of *src*: nvcc -cubin / -ptx, its intermediate files kept
    (cicc writes the stub the host compile includes)."""
    work.mkdir(parents=True, exist_ok=True)
    kind = "ptx" if ptx else "cubin"
    code = f"compute_{arch}" if ptx else f"sm_{arch}"
    out = work / f"{src.stem}.{code}.{kind}"
    run(
        [
            NVCC,
            *seeded(flags, src),
            f"-{kind}",
            f"-gencode=arch=compute_{arch},code={code}",
            str(src),
            "-o",
            out.name,
            "--keep",
            "--keep-dir",
            ".",
        ],
        work,
    )
    return out


def stub_of(cubin: Path) -> Path:
    return next(cubin.parent.glob("*.cudafe1.stub.c"))


def device_reads_arch_list(flags: list[str], src: Path, archs: list[str], work: Path) -> bool:
    work.mkdir(parents=True, exist_ok=True)
    cmds = dryrun(flags, src, archs, work, keep=True)
    return any(names_arch_list(c, work) for c in cmds if " -E " in c and ".cpp1.ii" in c)


def fatbin_job(
    flags: list[str], src: Path, archs: list[str], images: dict[str, Path], work: Path
) -> Path:
    """The arch set's fatbin: fatbinary with the flags nvcc -c gives it, --create instead of
    --embedded-fatbin."""
    work.mkdir(parents=True, exist_ok=True)
    line = next(c for c in dryrun(flags, src, archs, work, keep=False) if c.startswith("fatbinary"))
    args = [
        a for a in shlex.split(line)[1:] if not a.startswith(("--image3=", "--embedded-fatbin="))
    ]
    for a in archs:
        args.append(f"--image3=kind=elf,sm={a},file={images[a]}")
    run(["fatbinary", *args, f"--create={src.stem}.fatbin"], work)
    return work / f"{src.stem}.fatbin"


def data_job(fatbin: Path, symbol: str, work: Path) -> Path:
    s = work / f"{fatbin.stem}.fatbin.S"
    s.write_text(DATA.replace("SYMBOL", symbol).replace("FATBIN", fatbin.name))
    run(["cc", "-c", s.name, "-o", f"{fatbin.stem}.fatbin.o"], work)
    return work / f"{fatbin.stem}.fatbin.o"


def whole_job(flags: list[str], src: Path, archs: list[str], work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    run([NVCC, *seeded(flags, src), *gencode(archs), "-c", str(src), "-o", "whole.o"], work)
    return work / "whole.o"


def embedded(obj: Path) -> bytes:
    """The fatbin nvcc -c put in *obj*'s .nv_fatbin (its size from the fatbin's header)."""
    out = obj.with_suffix(".nv_fatbin")
    run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj.name, out.name], obj.parent)
    data = out.read_bytes()
    return data[: 16 + int.from_bytes(data[8:16], "little")]


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def kernel_flags() -> list[str]:
    import torch  # noqa: F401  (its headers)
    from torch.utils.cpp_extension import include_paths

    incs = [f"-I{p}" for p in include_paths()] + [f"-I{REPO / 'kernels/csrc'}"]
    py = subprocess.run(
        [sys.executable, "-c", "import sysconfig;print(sysconfig.get_paths()['include'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return [
        "-std=c++17",
        "-O3",
        "-ccbin=/usr/bin/c++",
        "-Xcompiler=-fPIC",
        "-DUSE_CUDA",
        "-DTORCH_TARGET_VERSION=0x020a000000000000",
        "-DPy_LIMITED_API=0x030a0000",
        "-DTORCH_EXTENSION_NAME=_C",
        *incs,
        f"-I{py}",
        *CCCL_OFF,
    ]


def split_matrix(
    flags: list[str], sources: list[Path], sets: dict[str, list[str]], work: Path
) -> dict:
    """Every job of the split scheme for *sets*, each once: host per source, device per
    (source, arch), fatbin and its object per (source, arch set). CPU seconds by kind."""
    clock, cpu = Clock(), {"host": 0.0, "device": 0.0, "fatbin": 0.0}
    out: dict = {"objects": {}, "reads_arch_list": {}}
    for src in sources:
        archs = sorted({a for s in sets.values() for a in s}, key=int)
        cubins = {a: device_job(flags, src, a, False, work / "dev" / src.stem / a) for a in archs}
        cpu["device"] += clock.read()
        stubs = {stub_of(c).read_bytes() for c in cubins.values()}
        out.setdefault("stubs_same", {})[src.name] = len(stubs) == 1
        host, symbol, reads = host_job(
            flags, src, work / "host" / src.stem, stub_of(cubins[archs[0]])
        )
        cpu["host"] += clock.read()
        out["reads_arch_list"][src.name] = reads
        for name, s in sets.items():
            fb = fatbin_job(flags, src, s, cubins, work / "fat" / name / src.stem)
            obj = data_job(fb, symbol, fb.parent)
            cpu["fatbin"] += clock.read()
            out["objects"].setdefault(name, []).extend([host, obj])
            out.setdefault("fatbins", {}).setdefault(name, []).append(fb)
    out["cpu"] = cpu
    return out


def whole_matrix(
    flags: list[str], sources: list[Path], sets: dict[str, list[str]], work: Path
) -> dict:
    clock = Clock()
    objs = {
        name: [whole_job(flags, src, s, work / name / src.stem) for src in sources]
        for name, s in sets.items()
    }
    return {"objects": objs, "cpu": clock.read()}


GPU_TEST = r"""
#include <cstdio>
namespace {
template <int K> __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * K;
}
}
__device__ int counter;
__constant__ float bias[4];
static __device__ float hidden = 0.5f;
__global__ void add_bias(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] += bias[i % 4] + hidden; atomicAdd(&counter, 1); }
}
extern "C" int wf_run(float* out, int n) {
  float* d; cudaMalloc(&d, n * sizeof(float));
  for (int i = 0; i < n; ++i) out[i] = float(i);
  cudaMemcpy(d, out, n * sizeof(float), cudaMemcpyHostToDevice);
  float b[4] = {1, 2, 3, 4}; cudaMemcpyToSymbol(bias, b, sizeof b);
  int zero = 0; cudaMemcpyToSymbol(counter, &zero, sizeof zero);
  scale<3><<<(n + 127) / 128, 128>>>(d, n);
  add_bias<<<(n + 127) / 128, 128>>>(d, n);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { fprintf(stderr, "%s\n", cudaGetErrorString(e)); return -1; }
  cudaMemcpy(out, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  int c = 0; cudaMemcpyFromSymbol(&c, counter, sizeof c);
  cudaFree(d);
  return c;
}
"""


def gpu_check(work: Path, archs: list[str]) -> dict:
    """The test program built both ways into shared objects, loaded and run."""
    work.mkdir(parents=True, exist_ok=True)
    src = work / "wf_steps_test.cu"
    src.write_text(GPU_TEST)
    flags = ["-O3", "-Xcompiler=-fPIC"]
    results = {}
    whole = whole_job(flags, src, archs, work / "whole")
    cubins = {a: device_job(flags, src, a, False, work / "dev" / a) for a in archs}
    host, symbol, _ = host_job(flags, src, work / "host", stub_of(cubins[archs[0]]))
    fb = fatbin_job(flags, src, archs, cubins, work / "fat")
    data = data_job(fb, symbol, fb.parent)
    for name, objs in {"whole": [whole], "split": [host, data]}.items():
        so = work / f"{name}.so"
        run(
            [
                "c++",
                "-shared",
                "-o",
                str(so),
                *map(str, objs),
                f"{CUDA}/lib64/libcudart_static.a",
                "-ldl",
                "-lrt",
                "-lpthread",
            ],
            work,
        )
        n = 1000
        out = (ctypes.c_float * n)()
        count = ctypes.CDLL(str(so)).wf_run(out, n)
        results[name] = {"count": count, "sum": sum(out), "first": list(out[:5])}
    results["same"] = results["whole"] == results["split"] and results["whole"]["count"] == 1000
    return results


def fa3_flags(root: Path, source: str) -> list[str]:
    """The nvcc flags wheelforge gives *source* of the prepared FA3 tree (its --dry-run), less
    the output, the depfile, the split compilation, the arch and the seed (set here)."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    p = subprocess.run(
        [sys.executable, "-m", "wheelforge", "build", "--dry-run", "-j", "1"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(
        ln for ln in p.stdout.splitlines() if "/bin/nvcc " in ln and f" ../../../{source} " in ln
    )
    args = shlex.split(line[line.index("/bin/nvcc ") :])[1:]
    drop_next = {"--dependency-output", "-o", "-c", "-include"}
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in drop_next:
            skip = True
        elif not a.startswith(
            (
                "--split-compile",
                "-gencode",
                "--frandom-seed",
                "--generate-dependencies",
                "--objdir-as",
            )
        ):
            out.append(a)
    return out


def fa3_ab(root: Path, source: str, arch: str, work: Path) -> dict:
    """One FA3 source, in the folder wheelforge compiles it in: one-job nvcc -c, then the split
    jobs, the host front (host preprocessing, cudafe++) beside the device job. Wall seconds of each, and whether the fatbins match."""
    import threading

    # each job's folder three levels below the tree, as wheelforge's (its -I../../../hopper)
    work = root / "build" / work.name
    shutil.rmtree(work, ignore_errors=True)
    flags = fa3_flags(root, source)
    src = (root / source).resolve()
    out: dict = {"source": source, "arch": arch}
    t = time.monotonic()
    whole = whole_job(flags, src, [arch], work / "whole")
    out["one_job_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    marks: dict[str, float] = {}
    front: dict = {}

    def host_first() -> None:
        front["v"] = host_front(flags, src, work / "host")
        marks["host front"] = time.monotonic() - t

    th = threading.Thread(target=host_first)
    th.start()
    # nvcc -ptx keeps no stub (its cicc is not asked for one): the device job is nvcc -cubin,
    # and the host compile, which includes the stub, follows it
    cubin = device_job(flags, src, arch, False, work / "dev")
    marks["cicc+ptxas"] = time.monotonic() - t
    th.join()
    cc, reads, symbol = front["v"]
    host_compile(cc, symbol, stub_of(cubin), work / "host")
    marks["host compile"] = time.monotonic() - t
    fb = fatbin_job(flags, src, [arch], {arch: cubin}, work / "fat")
    data_job(fb, symbol, fb.parent)
    out["split_s"] = round(time.monotonic() - t, 1)
    out["split_marks_s"] = {k: round(v, 1) for k, v in marks.items()}
    out["host_reads_arch_list"] = reads
    out["fatbin_same_as_nvcc_c"] = embedded(whole) == fb.read_bytes()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument(
        "--gpu", action="store_true", help="also build, load and run the test program (needs a GPU)"
    )
    ap.add_argument(
        "--fa3", type=Path, help="instead: one FA3 source both ways, in this prepared tree"
    )
    ap.add_argument("--fa3-source", default="hopper/instantiations/flash_fwd_hdim128_bf16_sm90.cu")
    args = ap.parse_args()
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    if args.fa3:
        print(json.dumps(fa3_ab(args.fa3.resolve(), args.fa3_source, "90a", work), indent=2))
        return
    sources = sorted((REPO / "kernels/csrc").glob("*.cu"))
    flags = kernel_flags()
    report: dict = {}
    t = time.monotonic()
    whole_m = whole_matrix(flags, sources, MATRIX, work / "whole-matrix")
    whole_u = whole_matrix(flags, sources, {"u": UNION}, work / "whole-union")
    split_m = split_matrix(flags, sources, MATRIX, work / "split-matrix")
    split_u = split_matrix(flags, sources, {"u": UNION}, work / "split-union")
    # an arch set alone: its host job in a folder of its own, for another arch (the proof the
    # host object does not depend on it), and its objects against the matrix's
    alone_fb = split_matrix(flags, sources[:1], {"b": MATRIX["b"]}, work / "alone-b")
    report["seconds"] = round(time.monotonic() - t, 1)
    report["reads_arch_list"] = {
        "host": split_m["reads_arch_list"],
        "device": {
            s.name: device_reads_arch_list(flags, s, UNION, work / "dU" / s.stem) for s in sources
        },
    }
    # the same bytes: fatbins against nvcc -c's own (kept), the host object in every set
    same_fatbin = {}
    for name in MATRIX:
        for src, fb in zip(sources, split_m["fatbins"][name], strict=True):
            same_fatbin[f"{name}/{src.name}"] = (
                embedded(work / "whole-matrix" / name / src.stem / "whole.o") == fb.read_bytes()
            )
    report["fatbin_same_as_nvcc_c"] = same_fatbin
    report["stub_same_for_every_arch"] = split_m["stubs_same"]
    report["host_object_same_whatever_arch_set"] = (
        sha(split_m["objects"]["a"][0])
        == sha(split_u["objects"]["u"][0])
        == sha(alone_fb["objects"]["b"][0])
    )
    report["alone_same_as_matrix"] = [sha(p) for p in alone_fb["objects"]["b"]] == [
        sha(p) for p in split_m["objects"]["b"][:2]
    ]
    cpu_wm, cpu_wu = whole_m["cpu"], whole_u["cpu"]
    cpu_sm, cpu_su = sum(split_m["cpu"].values()), sum(split_u["cpu"].values())
    report["cpu_s"] = {
        "one-job nvcc": {
            "matrix": round(cpu_wm, 1),
            "union": round(cpu_wu, 1),
            "ratio": round(cpu_wm / cpu_wu, 2),
        },
        "split": {
            "matrix": round(cpu_sm, 1),
            "union": round(cpu_su, 1),
            "ratio": round(cpu_sm / cpu_su, 2),
            "matrix by kind": {k: round(v, 1) for k, v in split_m["cpu"].items()},
            "union by kind": {k: round(v, 1) for k, v in split_u["cpu"].items()},
        },
    }
    if args.gpu:
        report["gpu"] = gpu_check(work / "gpu", ["80", "90"])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
