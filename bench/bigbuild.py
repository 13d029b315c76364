"""The big builds: FlashAttention-3 (``hopper/``, reduced by its own switches to sm90, forward,
hdim128, bf16: 12 ``.cu`` and one ``.cpp``) and the FlashAttention-2 stable-ABI port of
huggingface/kernels-community (``flash-attn2/``, 72 ``.cu``), each built by wheelforge and by
its own setup.py with the same archs, in one run:

- cold: an empty build folder and an empty compile cache;
- no-op: the same command again;
- one source touched: a line of code appended to the cheapest ``.cu`` (the cold build's report
  names it; a comment would be a cache hit);
- warm fresh clone: the untouched project copied into another folder, built with the cache the
  cold build filled (setup.py has no cache: its clone is a cold build, not run);
- the peak memory of each whole build (the sum of its processes' resident memory, read from
  /proc four times a second, the same way for both);
- the floor of any schedule that compiles each source in one job: the longest job (its wall
  time as it ran) and the CPU time of every job over the cores.

Steps (run in this order; each is kept in ``--results`` when it ends, so a second call goes on
where the first stopped, and a step cut short by a time limit resumes: ninja keeps what it
compiled, and the times of the attempts add up):

    prepare   here, where the mirrors are: the project's sources into --work, its matrix.yaml
    wf-cold, wf-noop, wf-touch, wf-clone           wheelforge
    own-cold, own-noop, own-touch                  the project's setup.py
    test      the project's GPU test, from wheelforge's wheel
    table     the markdown table (docs/performance.md's)

    python bench/bigbuild.py prepare fa3 --work .bench          # here (mirrors), ~10 s
    python bench/bigbuild.py run fa3 --work .bench --steps wf-cold,wf-noop ...
    python bench/bigbuild.py table --work .bench

``--subset N`` keeps the N cheapest ``.cu`` sources by name order (the rehearsal: 2).
Needs torch (CUDA, for the test), nvcc, and wheelforge importable (``PYTHONPATH=src``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from wheelforge.build import jobwatch  # noqa: E402

MIRRORS = Path("/work/.mirror")
FA_COMMIT = "HEAD"
FA3_CUTLASS = "7127592069c2fe01b041e174ba4345ef9b279671"  # csrc/cutlass of flash-attention
FA2_CUTLASS = "v3.6.0"  # kernel-builder's cutlass_3_6
GIB = 1 << 30

# FlashAttention-3's own switches (hopper/setup.py): forward only, sm90, hdim128, bf16.
FA3_SWITCHES = (
    "BACKWARD",
    "SM80",
    "FP16",
    "FP8",
    "HDIM64",
    "HDIM96",
    "HDIM192",
    "HDIM256",
    "HDIMDIFF64",
    "HDIMDIFF192",
)
# ... and the defines they turn into (hopper/setup.py feature_args).
FA3_DEFINES = [
    "-DFLASHATTENTION_DISABLE_BACKWARD",
    "-DFLASHATTENTION_DISABLE_FP16",
    "-DFLASHATTENTION_DISABLE_FP8",
    "-DFLASHATTENTION_DISABLE_HDIM64",
    "-DFLASHATTENTION_DISABLE_HDIM96",
    "-DFLASHATTENTION_DISABLE_HDIM192",
    "-DFLASHATTENTION_DISABLE_HDIM256",
    "-DFLASHATTENTION_DISABLE_SM8x",
    "-DFLASHATTENTION_DISABLE_HDIMDIFF64",
    "-DFLASHATTENTION_DISABLE_HDIMDIFF192",
]
# hopper/setup.py's nvcc_flags, and torch.utils.cpp_extension's COMMON_NVCC_FLAGS that its
# build adds (wheelforge adds -O3 -std=c++17 itself, and nvcc threads from the cores).
FA3_NVCC = [
    "--ftemplate-backtrace-limit=0",
    "--use_fast_math",
    "-lineinfo",
    "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED",
    "-DCUTLASS_ENABLE_GDC_FOR_SM90",
    "-DCUTLASS_DEBUG_TRACE_LEVEL=0",
    "-DNDEBUG",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
]


@dataclass(frozen=True)
class Project:
    name: str
    root: str  # the project folder under --work
    archs: str
    own_dir: str  # where its own setup.py runs, relative to root
    sources: str  # the glob of its .cu sources, relative to root


PROJECTS = {
    "fa3": Project("fa3", "flash-attention", "8.0 9.0a", "hopper", "hopper/instantiations/*.cu"),
    # sm_90: the H200's own (an sm_80 cubin does not run on sm_90), so its test runs there
    "fa2": Project("fa2", "flash-attn2", "9.0", ".", "flash_attn/src/*.cu"),
}


def _archive(repo: Path, rev: str, paths: list[str], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(
        ["git", f"--git-dir={repo}", "archive", rev, *paths], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=tar, check=True)


def _yaml_list(items: list[str], indent: int = 2) -> str:
    pad = " " * indent
    return "".join(f"{pad}- {json.dumps(i)}\n" for i in items)


def prepare_fa3(work: Path, subset: int | None) -> None:
    root = work / "flash-attention"
    shutil.rmtree(root, ignore_errors=True)
    fa = MIRRORS / "Dao-AILab+flash-attention/repo"
    _archive(fa, FA_COMMIT, ["hopper", "README.md"], root)
    _archive(
        MIRRORS / "NVIDIA+cutlass/repo",
        FA3_CUTLASS,
        ["include", "LICENSE.txt"],
        root / "csrc/cutlass",
    )
    _fa3_package(root)
    kernels = sorted(
        p.relative_to(root).as_posix()
        for p in (root / "hopper/instantiations").glob("flash_fwd_hdim128_bf16*_sm90.cu")
    )
    others = ["hopper/flash_fwd_combine.cu", "hopper/flash_prepare_scheduler.cu"]
    cu = (others + kernels)[:subset] if subset else others + kernels
    keep = set(cu)
    if subset:  # the rehearsal: setup.py compiles the same sources (those left on disk)
        for p in (root / "hopper/instantiations").glob("*.cu"):
            if p.relative_to(root).as_posix() not in keep:
                p.unlink()
        for other in others:
            if other not in keep:
                (root / other).unlink()
        setup = root / "hopper/setup.py"
        text = setup.read_text(encoding="utf-8")
        anchor = "    nvcc_flags = [\n"
        assert anchor in text, "hopper/setup.py changed: its nvcc_flags list was not found"
        text = text.replace(
            anchor,
            "    sources = [s for s in sources if os.path.exists(s)]  "
            "# bench/bigbuild.py --subset\n" + anchor,
            1,
        )
        setup.write_text(text, encoding="utf-8")
    # hopper/setup.py compiles the *_sm90.cu kernels for sm_90a, and every other .cu (the
    # combine and the scheduler) for sm_80 and sm_90a (its cuda_compile_sm80_sm90 rule), even
    # with FLASH_ATTENTION_DISABLE_SM80: the same here.
    kept = "".join(f'    - {{files: "{k}", archs: "9.0a"}}\n' for k in cu if k in kernels)
    plain = ["hopper/flash_api_stable.cpp", *(c for c in cu if c not in kernels)]
    (root / "matrix.yaml").write_text(
        "# bench/bigbuild.py: FlashAttention-3 reduced by its own switches (sm90 forward hdim128\n"
        "# bf16), the flags and archs of hopper/setup.py.\n"
        "package:\n  name: flash_attn_3\n  version: 3.0.0\n  pyproject: false\n"
        "  packages: [hopper/flash_attn_3]\n"
        "extension:\n  name: flash_attn_3._C\n  module-init: false\n  sources:\n"
        + _yaml_list(plain, 4)
        + kept
        + "  include-dirs: [hopper, csrc/cutlass/include]\n  cxx-flags:\n"
        + _yaml_list(FA3_DEFINES, 4)
        + "  nvcc-flags:\n"
        + _yaml_list(FA3_NVCC + FA3_DEFINES, 4)
        + 'abi: stable\ntorch: ">=2.9"\narch-sets:\n  sm80_90a: "8.0 9.0a"\n',
        encoding="utf-8",
    )


def _fa3_package(root: Path) -> None:
    """hopper/setup.py ships its Python API as two top-level modules (``py_modules``:
    flash_attn_interface, and flash_attn_config, which it writes from its switches), and
    ``flash_attn_3/`` re-exports them; a matrix packages folders only, so the bench puts both
    inside ``flash_attn_3/`` (the config written as setup.py would, for these switches). Python
    files only: nothing compiled changes, and setup.py's own build is unaffected."""
    hopper = root / "hopper"
    interface = (hopper / "flash_attn_interface.py").read_text(encoding="utf-8")
    anchor = "from flash_attn_config import CONFIG"
    assert anchor in interface, "hopper/flash_attn_interface.py changed: its config import"
    pkg = hopper / "flash_attn_3"
    (pkg / "flash_attn_interface.py").write_text(
        interface.replace(anchor, "from flash_attn_3.flash_attn_config import CONFIG"),
        encoding="utf-8",
    )
    text = (hopper / "setup.py").read_text(encoding="utf-8")
    names = re.findall(r'"(FLASH_?ATTENTION_(?:DISABLE|ENABLE)_\w+)": \w+,', text)
    assert names, "hopper/setup.py changed: its create_build_config_file flags"
    switched = {f"FLASH_ATTENTION_DISABLE_{s}" for s in FA3_SWITCHES}
    flags = {n: n.replace("FLASHATTENTION_", "FLASH_ATTENTION_") in switched for n in names}
    flags["FLASHATTENTION_DISABLE_SM8x"] = True  # its DISABLE_SM80 switch
    (pkg / "flash_attn_config.py").write_text(
        "# bench/bigbuild.py: as hopper/setup.py writes it, for the bench's switches\n"
        f"CONFIG = {{'build_flags': {flags!r}}}\n",
        encoding="utf-8",
    )


FA2_REGISTRATION = """\
// bench/bigbuild.py: the registration macros kernel-builder generates (huggingface/kernels).
#pragma once
#include <Python.h>
#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)
#define _STRINGIFY(A) #A
#define STRINGIFY(A) _STRINGIFY(A)
#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)
#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) \\
  STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
#define REGISTER_EXTENSION(NAME)                                                \\
  PyMODINIT_FUNC CONCAT(PyInit_, NAME)() {                                      \\
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STRINGIFY(NAME), \\
                                        nullptr, 0, nullptr};                   \\
    return PyModule_Create(&module);                                            \\
  }
"""
FA2_OPS = """\
# bench/bigbuild.py: what kernel-builder generates: the ops of the compiled module.
import torch

from . import _flash_attn2_wf  # noqa: F401  (loads the library: its registrations)

ops = torch.ops._flash_attn2_wf


def add_op_namespace_prefix(op_name: str) -> str:
    return f"_flash_attn2_wf::{op_name}"
"""
# kernel-builder's define for a CUDA backend: torch_binding_stable.cpp (the ops and the module's
# PyInit) is inside #if defined(CUDA_KERNEL)
FA2_CXX = ["-DCUDA_KERNEL"]
FA2_NVCC = [
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
]


_FA2_SOURCE_RE = re.compile(
    r"flash_(?:fwd|bwd|fwd_split)_hdim(\d+)_(fp16|bf16)(?:_causal)?_sm80\.cu$"
)


def _fa2_reduce(
    root: Path, cu: list[str], hdims: tuple[int, ...], dtypes: tuple[str, ...]
) -> list[str]:
    """FlashAttention-2 reduced to some head dims and dtypes, the way its own switches would if it
    had them: the other kernels' sources deleted (both builders compile what is left), and
    static_switch.h's HEADDIM_SWITCH / FP16_SWITCH dispatching only to the kept ones (a head
    dim up to the next kept one, as before; anything else raises), so the library links whole."""
    kept = []
    for source in cu:
        m = _FA2_SOURCE_RE.search(source)
        assert m, f"flash-attn2 has a source the bench does not know: {source}"
        if (not hdims or int(m[1]) in hdims) and (not dtypes or m[2] in dtypes):
            kept.append(source)
        else:
            (root / source).unlink()
    header = root / "flash_attn/src/static_switch.h"
    text = header.read_text(encoding="utf-8")
    fp16 = re.search(r"#define FP16_SWITCH\(COND, \.\.\.\).*?\}\(\)\n", text, re.S)
    hdim = re.search(r"#define HEADDIM_SWITCH\(HEADDIM, \.\.\.\).*?\}\(\)\n", text, re.S)
    assert fp16 and hdim, "static_switch.h changed: FP16_SWITCH / HEADDIM_SWITCH not found"
    if hdims:
        chain = "".join(
            f"    if (HEADDIM <= {h}) {{ constexpr static int kHeadDim = {h}; return __VA_ARGS__(); }} \\\n"
            for h in sorted(hdims)
        )
        text = text.replace(
            hdim[0],
            "#define HEADDIM_SWITCH(HEADDIM, ...) \\\n  [&] { \\\n"
            + chain
            + f'    throw std::runtime_error("built for head dims {sorted(hdims)} only (bench/bigbuild.py)"); \\\n'
            "  }()\n",
        )
    if dtypes and set(dtypes) != {"fp16", "bf16"}:
        (only,) = dtypes
        elem = {"fp16": "cutlass::half_t", "bf16": "cutlass::bfloat16_t"}[only]
        wrong = "!(COND)" if only == "fp16" else "(COND)"  # COND: fp16 (FP16_SWITCH(!is_bf16))
        text = text.replace(
            fp16[0],
            "#define FP16_SWITCH(COND, ...) \\\n  [&] { \\\n"
            f'    if ({wrong}) throw std::runtime_error("built for {only} only (bench/bigbuild.py)"); \\\n'
            f"    using elem_type = {elem}; \\\n    return __VA_ARGS__(); \\\n  }}()\n",
        )
    header.write_text("#include <stdexcept>\n" + text, encoding="utf-8")
    return kept


def prepare_fa2(
    work: Path, subset: int | None, hdims: tuple[int, ...] = (), dtypes: tuple[str, ...] = ()
) -> None:
    root = work / "flash-attn2"
    shutil.rmtree(root, ignore_errors=True)
    kc = MIRRORS / "huggingface+kernels-community/repo"
    _archive(
        kc,
        "HEAD",
        ["flash-attn2/flash_attn", "flash-attn2/torch-ext", "flash-attn2/tests"],
        work / "_fa2",
    )
    shutil.move(work / "_fa2/flash-attn2", root)
    shutil.rmtree(work / "_fa2")
    _archive(
        MIRRORS / "NVIDIA+cutlass/repo", FA2_CUTLASS, ["include", "LICENSE.txt"], root / "cutlass"
    )
    (root / "torch-ext/registration.h").write_text(FA2_REGISTRATION, encoding="utf-8")
    (root / "torch-ext/flash_attn2/_ops.py").write_text(FA2_OPS, encoding="utf-8")
    cu = sorted(p.relative_to(root).as_posix() for p in (root / "flash_attn/src").glob("*.cu"))
    if hdims or dtypes:
        cu = _fa2_reduce(root, cu, hdims, dtypes)
    if subset:
        for extra in cu[subset:]:
            (root / extra).unlink()
        cu = cu[:subset]
    sources = ["torch-ext/torch_binding_stable.cpp", "flash_attn/flash_api.cpp", *cu]
    includes = ["flash_attn", "flash_attn/src", "torch-ext", "cutlass/include"]
    (root / "matrix.yaml").write_text(
        "# bench/bigbuild.py: kernels-community's FlashAttention-2 stable-ABI port\n"
        "package:\n  name: flash_attn2\n  version: 2.8.3\n  pyproject: false\n"
        "  packages: [torch-ext/flash_attn2]\n"
        "extension:\n  name: flash_attn2._flash_attn2_wf\n  module-init: false\n  sources:\n"
        + _yaml_list(sources, 4)
        + f"  include-dirs: {json.dumps(includes)}\n"
        + "  cxx-flags:\n"
        + _yaml_list(FA2_CXX, 4)
        + "  nvcc-flags:\n"
        + _yaml_list(FA2_NVCC, 4)
        + f'abi: stable\ntorch: ">=2.10"\narch-sets:\n  fa2: "{PROJECTS["fa2"].archs}"\n',
        encoding="utf-8",
    )
    # Its own build: the port ships none (kernel-builder is Nix), so a plain
    # torch.utils.cpp_extension setup.py of the same sources and flags stands in for it.
    (root / "setup.py").write_text(
        "# bench/bigbuild.py: the port's sources through torch.utils.cpp_extension, as a\n"
        "# setup.py project would build them.\n"
        "import os\nfrom setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        "here = os.path.dirname(os.path.abspath(__file__))\n"
        f"FA2_CXX = {FA2_CXX!r}\n"
        "setup(name='flash_attn2', version='2.8.3', packages=['flash_attn2'],\n"
        "      package_dir={'flash_attn2': 'torch-ext/flash_attn2'},\n"
        "      ext_modules=[CUDAExtension('flash_attn2._flash_attn2_wf',\n"
        f"          sources={sources!r},\n"
        f"          include_dirs=[os.path.join(here, d) for d in {includes!r}],\n"
        "          py_limited_api=True,\n"
        "          extra_compile_args={'cxx': ['-O3', '-std=c++17', '-DTORCH_TARGET_VERSION=0x020a000000000000',\n"
        "                                      '-DPy_LIMITED_API=0x030a0000', *FA2_CXX],\n"
        "                              'nvcc': ['-O3', '-std=c++17', '-DTORCH_TARGET_VERSION=0x020a000000000000',\n"
        f"                                       *{FA2_NVCC!r}]}})],\n"
        "      cmdclass={'build_ext': BuildExtension}, options={'bdist_wheel': {'py_limited_api': 'cp310'}})\n",
        encoding="utf-8",
    )


# ---------------------------------------------------------------------------------------------
# Running and measuring


@dataclass
class Timed:
    seconds: float
    peak: int  # bytes
    returncode: int
    timed_out: bool = False


def run_measured(
    cmd: list[str], *, cwd: Path, env: dict[str, str], log: Path, deadline: float | None
) -> Timed:
    """Run *cmd* in a session of its own, its output into *log*; the sum of its session's
    resident memory read every quarter second; stopped (SIGTERM to the session) at *deadline*."""
    start = time.perf_counter()
    with log.open("ab") as out:
        out.write(f"\n$ {' '.join(cmd)}  (in {cwd})\n".encode())
        out.flush()
        child = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        peak = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], jobwatch.tree_rss(child.pid))
                done.wait(0.25)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        timed_out = False
        try:
            left = None if deadline is None else max(1.0, deadline - time.time())
            child.wait(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(child.pid, 15)
            child.wait()
        finally:
            done.set()
            thread.join()
    return Timed(time.perf_counter() - start, peak[0], child.returncode, timed_out)


class Results:
    """The steps done so far, kept in a JSON file after each (a later call goes on)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict = json.loads(path.read_text()) if path.is_file() else {}

    def get(self, project: str, step: str) -> dict | None:
        return self.data.get(project, {}).get(step)

    def put(self, project: str, step: str, value: dict) -> None:
        self.data.setdefault(project, {})[step] = value
        self.path.write_text(json.dumps(self.data, indent=1) + "\n")
        out = os.environ.get("OUT")  # the device machine's folder that comes back after a call
        if out:
            shutil.copy2(self.path, Path(out) / "results.json")
            (Path(out) / "table.md").write_text(table(self.path.parent) + "\n")


def _touch(path: Path, n: int) -> None:
    # A line of code, not a comment: the preprocessed source changes, so no cache hits it.
    with path.open("a", encoding="utf-8") as f:
        f.write(f"\nnamespace {{ [[maybe_unused]] int wheelforge_bench_touch_{n} = {n}; }}\n")


def _cheapest_cu(report: Path) -> str:
    doc = json.loads(report.read_text())
    jobs = [j for v in doc["variants"] for j in v["compile"]["jobs"] if j["rule"] == "nvcc"]
    return min(jobs, key=lambda j: j["seconds"])["source"]


def _floor(report: Path, cores: int) -> dict:
    """The longest job as it ran (its wall time: an upper bound of it alone, and close to it
    where its CPU ÷ wall is about its threads; dividing its CPU by the nvcc threads it was given
    would be wrong for a one-arch source, which nvcc's --threads do not split: FA3's and FA2's
    kernels ran at CPU ÷ wall = 1.0 on the H200), and every job's CPU over the cores."""
    doc = json.loads(report.read_text())
    jobs = [j for v in doc["variants"] for j in v["compile"]["jobs"]]
    cpu = [j["cpu_seconds"] or 0.0 for j in jobs]
    alone = max((j["seconds"], j["source"]) for j in jobs)
    return {
        "longest_alone": alone[0],
        "longest": alone[1],
        "sum_cpu": sum(cpu),
        "core_bound": sum(cpu) / cores,
        "floor": max(alone[0], sum(cpu) / cores),
        "jobs": len(jobs),
    }


def _copy_project(src: Path, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    ignore = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__")
    shutil.copytree(src, dest, ignore=ignore, symlinks=True)


def run_steps(args: argparse.Namespace) -> None:
    project = PROJECTS[args.project]
    work = args.work.resolve()
    root = work / project.root
    results = Results(work / "results.json")
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    cores = len(os.sched_getaffinity(0))
    deadline = time.time() + args.budget if args.budget else None
    python = args.python or sys.executable
    env = dict(os.environ, PYTHONUNBUFFERED="1", CCACHE_DIR=str(work / "ccache"))
    # The GPU machine's environment names its own arch (9.0a), which would replace the matrix's
    # arch sets in wheelforge's build: both builds compile the project's archs, as prepared.
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    wf = [
        sys.executable,
        "-m",
        "wheelforge",
        "build",
        "--python",
        python,
        "--cache-dir",
        str(work / "wf-cache"),
    ]
    if args.no_import_check:  # a --subset build lacks the kernels its API calls
        wf.append("--no-import-check")
    own_env = dict(env, MAX_JOBS=str(args.jobs or cores), FLASH_ATTENTION_FORCE_BUILD="TRUE")
    if project.name == "fa2":  # the stand-in setup.py: cpp_extension's archs (else the GPU's)
        own_env["TORCH_CUDA_ARCH_LIST"] = project.archs
    for switch in FA3_SWITCHES:
        own_env[f"FLASH_ATTENTION_DISABLE_{switch}"] = "TRUE"
    own = [python, "setup.py", "bdist_wheel"]
    if args.cpu_torch:  # the rehearsal: a CPU torch has no CUDA_HOME, so setup.py is given one
        shim = (
            "import runpy, sys, torch.utils.cpp_extension as c; c.CUDA_HOME = c._find_cuda_home(); "
            "sys.argv = ['setup.py', 'bdist_wheel']; runpy.run_path('setup.py', run_name='__main__')"
        )
        own = [python, "-c", shim]
        # ... and the toolkit's headers, which cpp_extension adds to C++ files for a CUDA torch.
        # torch finds the toolkit as CUDA_HOME, else nvcc's folder's parent: wrong where nvcc
        # on the PATH is a wrapper script (/usr/local/bin/nvcc here), so CUDA_HOME is given.
        home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        if (Path(home) / "include/cuda_runtime_api.h").is_file():
            own_env["CUDA_HOME"] = home
            own_env["CPATH"] = os.pathsep.join(
                filter(None, [str(Path(home) / "include"), own_env.get("CPATH")])
            )

    def step(
        name: str, cmd: list[str], cwd: Path, env_: dict[str, str], *, fresh: list[Path] = ()
    ) -> dict | None:
        done = results.get(project.name, name)
        if done and done.get("complete"):
            print(f"{project.name} {name}: done before ({done['seconds']:.1f} s)")
            return done
        if done is not None and not done.get("stopped"):
            done = None  # it failed before (not stopped at the budget): from the start again
        if done is None:  # a step stopped at the budget resumes where ninja stopped
            for path in fresh:
                shutil.rmtree(path, ignore_errors=True)
        timed = run_measured(
            cmd, cwd=cwd, env=env_, log=logs / f"{project.name}-{name}.log", deadline=deadline
        )
        before = done or {"seconds": 0.0, "peak": 0, "attempts": 0}
        value = {
            "seconds": before["seconds"] + timed.seconds,
            "peak": max(before["peak"], timed.peak),
            "attempts": before["attempts"] + 1,
            "complete": timed.returncode == 0 and not timed.timed_out,
            "returncode": timed.returncode,
            "stopped": timed.timed_out,
        }
        results.put(project.name, name, value)
        report_file = work / f"{project.name}-{name}.json"
        if os.environ.get("OUT") and report_file.is_file() and name == "wf-cold":
            shutil.copy2(report_file, Path(os.environ["OUT"]) / report_file.name)
        state = (
            "ok"
            if value["complete"]
            else ("stopped at the budget" if timed.timed_out else f"FAILED ({timed.returncode})")
        )
        print(
            f"{project.name} {name}: {timed.seconds:.1f} s, peak {timed.peak / GIB:.1f} GiB, "
            f"{state}",
            flush=True,
        )
        return value if value["complete"] else None

    wanted = args.steps.split(",")
    report = work / f"{project.name}-wf-cold.json"
    _forget_lost(results, project.name, wanted, root, work / "own" / project.root / project.own_dir)
    results.put(project.name, "machine", _machine(cores))
    for name in wanted:
        if deadline and time.time() > deadline - 5:
            print("the budget is spent: run again to go on")
            return
        if name == "wf-cold":
            cmd = [*wf, "--report", str(report)]
            if step(
                name,
                cmd,
                root,
                env,
                fresh=[root / "build", root / "dist", work / "ccache", work / "wf-cache"],
            ):
                results.put(project.name, "floor", _floor(report, cores))
        elif name == "wf-noop":
            step(name, [*wf, "--report", str(work / f"{project.name}-wf-noop.json")], root, env)
        elif name == "wf-touch":
            touched = results.get(project.name, "touched") or {
                "source": args.touch or _cheapest_cu(report)
            }
            if results.get(project.name, name) is None:
                _touch(root / touched["source"], 1)
                results.put(project.name, "touched", touched)
            step(name, [*wf, "--report", str(work / f"{project.name}-wf-touch.json")], root, env)
        elif name == "wf-clone":
            clone = work / "clone" / project.root
            if results.get(project.name, name) is None:
                _copy_project(work / "pristine" / project.root, clone)
            step(name, [*wf, "--report", str(work / f"{project.name}-wf-clone.json")], clone, env)
        elif name in ("own-cold", "own-noop", "own-touch"):
            own_root = work / "own" / project.root
            cold = results.get(project.name, "own-cold")
            if name != "own-cold" and not (cold and cold["complete"]):
                print(f"{project.name} {name}: skipped, its cold build did not succeed")
                continue
            if name == "own-cold" and results.get(project.name, name) is None:
                # its own folder (build/ is setup.py's too), the sources wheelforge's cold had
                _copy_project(work / "pristine" / project.root, own_root)
            if name == "own-touch" and results.get(project.name, name) is None:
                touched = results.get(project.name, "touched") or {
                    "source": args.touch or _cheapest_cu(report)
                }
                _touch(own_root / touched["source"], 2)
            step(name, own, own_root / project.own_dir, own_env)
        elif name == "test":
            done = results.get(project.name, "test")
            if done and done.get("complete"):
                print(f"{project.name} test: done before ({done['output']})")
                continue
            results.put(project.name, "test", test_fa(project, work, python, env))
            print(f"{project.name} test: {results.get(project.name, 'test')}", flush=True)
        else:
            raise SystemExit(f"unknown step {name}")


_WF_STEPS = ("wf-cold", "wf-noop", "wf-touch", "wf-clone", "floor", "touched", "test")
_OWN_STEPS = ("own-cold", "own-noop", "own-touch")


def _forget_lost(
    results: Results, project: str, wanted: list[str], wf_root: Path, own_dir: Path
) -> None:
    """A second call on a fresh machine (the results carried, the build folders gone): a group
    of steps this call runs whose build folder is not here is run again from its cold build
    (wheelforge's steps need its build folder and ccache, setup.py's its build/); a group this
    call does not run keeps its results (the other call's)."""
    for steps, folder in ((_WF_STEPS, wf_root / "build"), (_OWN_STEPS, own_dir / "build")):
        if not any(s in wanted for s in steps):
            continue
        if any(results.get(project, s) for s in steps) and not folder.is_dir():
            print(f"{project}: {folder} is not here (a fresh machine): {', '.join(steps)} again")
            for step in steps:
                results.data.get(project, {}).pop(step, None)


def _machine(cores: int) -> dict:
    """What the table names the machine by: cores, memory, the versions, the memory limit."""
    meminfo = dict(
        line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line
    )
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    return {
        "cores": cores,
        "mem_total": meminfo.get("MemTotal", "").strip(),
        "mem_available": meminfo.get("MemAvailable", "").strip(),
        "memory_limit": os.environ.get("WHEELFORGE_MEMORY_LIMIT", "(the machine's)"),
        "nvcc": nvcc.strip().splitlines()[-1] if nvcc.strip() else "?",
        "python": sys.version.split()[0],
    }


def test_fa(project: Project, work: Path, python: str, env: dict[str, str]) -> dict:
    """Import the project from wheelforge's wheel, in a folder of its own, and compare its
    attention with PyTorch's on the GPU (bf16, hdim 128)."""
    wheels = sorted((work / project.root / "dist").rglob("*.whl"))
    if not wheels:
        return {"complete": False, "output": "no wheel from wheelforge's build"}
    site = work / "test-site"
    shutil.rmtree(site, ignore_errors=True)
    pip = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheels[-1])],
        capture_output=True,
        text=True,
    )
    if pip.returncode != 0:
        return {"complete": False, "output": f"pip install failed: {pip.stderr.strip()[-300:]}"}
    module, call = {
        "fa3": ("flash_attn_3.flash_attn_interface", "flash_attn_func(q, k, v, causal=True)"),
        "fa2": ("flash_attn2", "flash_attn_func(q, k, v, causal=True)"),
    }[project.name]
    script = f"""
import torch, {module} as m
torch.manual_seed(0)
q, k, v = (torch.randn(2, 1024, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
out = m.{call}
out = out[0] if isinstance(out, tuple) else out
ref = torch.nn.functional.scaled_dot_product_attention(
    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)
err = (out.float() - ref.float()).abs().max().item()
print("max abs error vs torch sdpa:", err)
assert err < 2e-2, err
print("TEST OK")
"""
    ran = subprocess.run(
        [python, "-c", script],
        cwd=site,
        env=dict(env, PYTHONPATH=str(site)),
        capture_output=True,
        text=True,
    )
    lines = (ran.stdout + ran.stderr).strip().splitlines()
    return {
        "complete": ran.returncode == 0,
        "output": " / ".join(ln for ln in lines if "error" in ln.lower() or "OK" in ln)[-400:]
        or (lines[-1] if lines else ""),
        "wheel": wheels[-1].name,
    }


# ---------------------------------------------------------------------------------------------
# The table


def _cell(steps: dict, step: str) -> str:
    s = steps.get(step)
    if not s:
        return "not run"
    return f"{s['seconds']:.1f} s" + ("" if s["complete"] else " (incomplete)")


def _ratio(steps: dict, a: str, b: str) -> str:
    x, y = steps.get(a), steps.get(b)
    if not (x and y and x["complete"] and y["complete"] and x["seconds"]):
        return "-"
    return f"{y['seconds'] / x['seconds']:.2f}×"


def _peak(steps: dict, step: str) -> str:
    return f"{steps[step]['peak'] / GIB:.1f} GiB" if step in steps else "not run"


def table(work: Path) -> str:
    """The results as docs/performance.md's tables: one per project."""
    data = json.loads((work / "results.json").read_text())
    lines = []
    for name, steps in data.items():
        rows = [("cold", "cold"), ("no-op", "noop"), ("one source touched", "touch")]
        lines += [
            f"### {name}",
            "",
            "| | wheelforge | own setup.py | setup.py ÷ wheelforge |",
            "| --- | ---: | ---: | ---: |",
        ]
        for label, step in rows:
            wf, own = f"wf-{step}", f"own-{step}"
            lines.append(
                f"| {label} | {_cell(steps, wf)} | {_cell(steps, own)} | {_ratio(steps, wf, own)} |"
            )
        lines.append(f"| warm fresh clone | {_cell(steps, 'wf-clone')} | = cold (no cache) | |")
        lines.append(
            f"| peak memory (whole build) | {_peak(steps, 'wf-cold')} | {_peak(steps, 'own-cold')} | |"
        )
        floor, cold = steps.get("floor"), steps.get("wf-cold")
        if floor:
            share = f"cold = {cold['seconds'] / floor['floor']:.2f}× the floor" if cold else ""
            lines.append(
                f"| floor: max(longest job, Σ CPU ÷ cores) | {floor['floor']:.1f} s "
                f"(longest {floor['longest_alone']:.1f} s; {floor['sum_cpu']:.0f} s of CPU ÷ "
                f"cores) | | {share} |"
            )
        if "touched" in steps:
            lines += ["", f"Touched: `{steps['touched']['source']}`."]
        if "test" in steps:
            test = steps["test"]
            verdict = "passed" if test["complete"] else "FAILED"
            lines += ["", f"GPU test from wheelforge's wheel: {verdict}: {test['output']}"]
        if "machine" in steps:
            m = steps["machine"]
            lines += [
                "",
                f"Machine: {m['cores']} cores, MemTotal {m['mem_total']} (MemAvailable "
                f"{m['mem_available']}) at the start, wheelforge's memory limit "
                f"{m['memory_limit']}, {m['nvcc']}, Python {m['python']}.",
            ]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["prepare", "run", "table"])
    parser.add_argument("project", nargs="?", choices=sorted(PROJECTS))
    parser.add_argument("--work", type=Path, default=REPO / ".bench")
    parser.add_argument(
        "--steps", default="wf-cold,wf-noop,wf-touch,wf-clone,test,own-cold,own-noop,own-touch"
    )
    parser.add_argument("--subset", type=int, help="prepare: keep this many .cu sources")
    parser.add_argument(
        "--hdims", help="prepare fa2: keep these head dims' kernels (128,256) [all]"
    )
    parser.add_argument("--dtypes", help="prepare fa2: keep these dtypes' kernels (bf16) [both]")
    parser.add_argument("--python", help="the Python whose torch the builds use [this one]")
    parser.add_argument("--jobs", type=int, help="setup.py's MAX_JOBS [the cores]")
    parser.add_argument(
        "--touch", help="run: the source the touch steps change [the cold build's cheapest .cu]"
    )
    parser.add_argument("--budget", type=float, help="seconds this call may run; then it stops")
    parser.add_argument(
        "--cpu-torch",
        action="store_true",
        help="run: setup.py under a CPU torch (the rehearsal): CUDA_HOME found for it",
    )
    parser.add_argument(
        "--no-import-check",
        action="store_true",
        help="run: wheelforge's import check off (a --subset build)",
    )
    parser.add_argument(
        "--tar", action="store_true", help="prepare: also write WORK/PROJECT.tar.gz"
    )
    args = parser.parse_args()
    if args.action == "table":
        print(table(args.work))
        return
    if args.project is None:
        parser.error("name the project: fa3 or fa2")
    if args.action == "prepare":
        if args.project == "fa3":
            prepare_fa3(args.work, args.subset)
        else:
            hdims = tuple(int(h) for h in args.hdims.split(",")) if args.hdims else ()
            dtypes = tuple(args.dtypes.split(",")) if args.dtypes else ()
            prepare_fa2(args.work, args.subset, hdims, dtypes)
        root = args.work / PROJECTS[args.project].root
        pristine = args.work / "pristine" / PROJECTS[args.project].root
        _copy_project(root, pristine)
        if args.tar:
            with tarfile.open(args.work / f"{args.project}.tar.gz", "w:gz") as tar:
                tar.add(root, arcname=PROJECTS[args.project].root)
        print(f"prepared {root}")
        return
    pristine = args.work / "pristine" / PROJECTS[args.project].root
    if (
        not (args.work / PROJECTS[args.project].root).is_dir()
        and (args.work / f"{args.project}.tar.gz").is_file()
    ):
        with tarfile.open(args.work / f"{args.project}.tar.gz") as tar:
            tar.extractall(args.work, filter="data")
        _copy_project(args.work / PROJECTS[args.project].root, pristine)
    run_steps(args)


if __name__ == "__main__":
    main()
