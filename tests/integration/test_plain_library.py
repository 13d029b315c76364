"""A CMake project whose shared library is loaded with ctypes (bitsandbytes' shape, issue 40
item 2): ``wheelforge init`` adopts it as ``kind: plain`` (no Python module invented, its C
exports kept, its link libraries kept, relocatable device code device-linked), and the wheel's
library exports what the project's own CMake build exports. The fixture links cuBLAS, which a
toolkit may lack: then cuBLAS comes from PyPI (nvidia-cublas) into a copy of the toolkit, as a
network step. The same on bitsandbytes itself, from a checkout named by
$WHEELFORGE_BITSANDBYTES, against its own wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from elftools.elf.elffile import ELFFile

from tests.integration.helpers import needs_nvcc, only_wheel, wheelforge

pytestmark = [
    needs_nvcc,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake"),
]

FIXTURE = {
    "CMakeLists.txt": """\
cmake_minimum_required(VERSION 3.18)
project(rdcdemo LANGUAGES CXX CUDA)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CUDA_STANDARD 17)
find_package(CUDAToolkit REQUIRED)
add_library(rdcdemo SHARED csrc/scale.cu csrc/kernels.cu csrc/api.cpp)
target_include_directories(rdcdemo PUBLIC csrc)
target_compile_definitions(rdcdemo PRIVATE RDC_FAST)
target_link_libraries(rdcdemo PUBLIC CUDA::cudart CUDA::cublas)
set_target_properties(rdcdemo PROPERTIES
  CUDA_SEPARABLE_COMPILATION ON
  VISIBILITY_INLINES_HIDDEN ON
  OUTPUT_NAME rdcdemo_cuda
  LIBRARY_OUTPUT_DIRECTORY "${PROJECT_SOURCE_DIR}/rdcpkg")
""",
    # a __device__ function defined in one source and called from another: only relocatable
    # device code and its device link make that work
    "csrc/scale.cu": "__device__ float rdc_scale(float x) { return 2.0f * x; }\n",
    "csrc/kernels.cu": """\
#include <cuda_runtime.h>
extern __device__ float rdc_scale(float x);
__global__ void scale_kernel(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = rdc_scale(p[i]);
}
extern "C" int rdc_scale_all(float* p, int n) {
  scale_kernel<<<(n + 255) / 256, 256>>>(p, n);
  return (int)cudaGetLastError();
}
""",
    "csrc/api.cpp": """\
#include <cublas_v2.h>
#include "api.h"
extern "C" int rdc_version(void) { return RDC_VERSION; }
extern "C" int rdc_blas_handle(void) {
  cublasHandle_t handle;
  int status = (int)cublasCreate(&handle);
  if (status == 0) cublasDestroy(handle);
  return status;
}
""",
    "csrc/api.h": "#define RDC_VERSION 3\n",
    "rdcpkg/__init__.py": """\
import ctypes
import pathlib

import torch  # noqa: F401

_lib = ctypes.CDLL(str(next(pathlib.Path(__file__).parent.glob("librdcdemo_cuda*.so"))))
version = _lib.rdc_version
""",
    "pyproject.toml": '[project]\nname = "rdcdemo"\nversion = "0.1.0"\n',
}


def _toolkit() -> Path:
    nvcc = Path(shutil.which("nvcc") or "nvcc")
    dry = subprocess.run(
        [nvcc, "--dryrun", "-x", "cu", "-E", os.devnull], capture_output=True, text=True
    ).stderr
    top = next((line.split("=", 1)[1] for line in dry.splitlines() if "TOP=" in line), None)
    return Path(top).resolve() if top else nvcc.resolve().parent.parent


def _has_cublas(root: Path) -> bool:
    return any((root / d / "libcublas.so").exists() for d in ("lib64", "lib"))


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _with_cublas(root: Path, folder: Path) -> Path:
    """A copy of the toolkit at *root* with cuBLAS in it, from PyPI's nvidia-cublas of the
    toolkit's major release (its headers and libraries where a toolkit keeps them). nvcc finds
    its own files from its real folder, so bin/ is files, not links."""
    version = subprocess.run(
        [root / "bin" / "nvcc", "--version"], capture_output=True, text=True, check=True
    ).stdout
    major = version.split("release ", 1)[1].split(".", 1)[0]
    wheels = folder / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", wheels,
         f"nvidia-cublas=={major}.*" if int(major) >= 13 else f"nvidia-cublas-cu{major}"],
        check=True,
    )  # fmt: skip
    unpacked = folder / "cublas"
    with zipfile.ZipFile(only_wheel(wheels)) as zf:
        zf.extractall(unpacked)
    cublas = next(unpacked.glob("nvidia/*/lib")).parent
    toolkit = folder / "cuda"
    shutil.copytree(root / "bin", toolkit / "bin", copy_function=_link_or_copy)
    for name in ("nvvm", "dist-info", "version.json"):
        if (root / name).exists():
            (toolkit / name).symlink_to(root / name)
    for part in ("include", "lib"):
        own = root / part if (root / part).is_dir() else root / f"{part}64"
        (toolkit / part).mkdir()
        for entry in own.iterdir():
            (toolkit / part / entry.name).symlink_to(entry)
        for entry in (cublas / part).iterdir():
            (toolkit / part / entry.name).unlink(missing_ok=True)
            _link_or_copy(entry, toolkit / part / entry.name)
    for name in ("cublas", "cublasLt"):
        (toolkit / "lib" / f"lib{name}.so").symlink_to(f"lib{name}.so.{major}")
    (toolkit / "lib64").symlink_to("lib")
    (toolkit / "targets" / "x86_64-linux").mkdir(parents=True)
    for part in ("include", "lib"):
        (toolkit / "targets" / "x86_64-linux" / part).symlink_to(f"../../{part}")
    return toolkit


@pytest.fixture(scope="module")
def cuda_with_cublas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _toolkit()
    if _has_cublas(root):
        return root
    return _with_cublas(root, tmp_path_factory.mktemp("toolkit"))


# nvcc's names for a relocatable object's registration (one per .cu): the hex module id in
# them is a hash of the compile (its paths, flags), so two builds of one source differ there.
_MODULE_ID_RE = re.compile(
    r"^(__cudaRegisterLinkedBinary|__fatbinwrap)_[0-9a-f]+_\d+_(\w+?)_cu_.*$"
)


def exports(path: Path) -> set[str]:
    """The symbols a shared object defines in its dynamic symbol table, global or weak (nvcc's
    per-source registration names without their module id)."""
    with path.open("rb") as f:
        table = ELFFile(f).get_section_by_name(".dynsym")
        return {
            _MODULE_ID_RE.sub(r"\1 \2.cu", s.name)
            for s in table.iter_symbols()
            if s.name
            and s["st_shndx"] != "SHN_UNDEF"
            and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
        }


def needed(path: Path) -> list[str]:
    with path.open("rb") as f:
        dynamic = ELFFile(f).get_section_by_name(".dynamic")
        return [t.needed for t in dynamic.iter_tags() if t.entry.d_tag == "DT_NEEDED"]


def section_size(path: Path, name: str) -> int:
    with path.open("rb") as f:
        section = ELFFile(f).get_section_by_name(name)
        return 0 if section is None else int(section["sh_size"])


def _environment(toolkit: Path) -> dict[str, str]:
    # cuBLAS where the import check's ctypes.CDLL finds it (a CUDA torch brings its own)
    return {
        "CUDA_HOME": str(toolkit),
        "PATH": f"{toolkit / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "LD_LIBRARY_PATH": str(toolkit / "lib"),
    }


def cmake_build(project: Path, toolkit: Path, *args: str) -> None:
    """The project's own build: CMake configure and build, in a copy's build/."""
    env = {**os.environ, **_environment(toolkit)}
    nvcc = toolkit / "bin" / "nvcc"
    subprocess.run(
        ["cmake", "-S", project, "-B", project / "build", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DCUDAToolkit_ROOT={toolkit}", *args],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["cmake", "--build", project / "build", "-j", "2"], check=True, env=env, capture_output=True
    )


@pytest.mark.network
def test_a_ctypes_library_with_relocatable_device_code_is_adopted_as_it_is(
    tmp_path: Path, cuda_with_cublas: Path
) -> None:
    project = tmp_path / "rdcdemo"
    for name, text in FIXTURE.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    own = tmp_path / "own"
    shutil.copytree(project, own)
    cmake_build(own, cuda_with_cublas, "-DCMAKE_CUDA_ARCHITECTURES=80")
    theirs = own / "rdcpkg" / "librdcdemo_cuda.so"

    env = _environment(cuda_with_cublas)
    run = wheelforge("init", "--from", "cmake", "--archs", "8.0", cwd=project, env=env)
    assert run.code == 0, run.err
    ext = yaml.safe_load((project / "matrix.yaml").read_text())["extension"]
    assert ext["name"] == "rdcpkg.librdcdemo_cuda"  # where CMake writes it, not a module
    assert ext["kind"] == "plain"
    assert "module-init" not in ext
    # CUDA::cublas as CMake links it: cuBLAS, its cublasLt and culibos
    assert ext["libraries"][:2] == ["cublas", "cublasLt"]
    assert "-rdc=true" in ext["nvcc-flags"]
    assert "-fvisibility-inlines-hidden" in ext["cxx-flags"]  # its exports are its own

    build = wheelforge("build", cwd=project, env=env)
    assert build.code == 0, build.err
    assert "ctypes.CDLL('rdcpkg/librdcdemo_cuda.so') ok" in build.out + build.err
    wheel = only_wheel(project / "dist")
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if ".dist-info/" not in n and n[-1] != "/")
        zf.extract("rdcpkg/librdcdemo_cuda.so", tmp_path / "unpacked")
    assert names == ["rdcpkg/__init__.py", "rdcpkg/librdcdemo_cuda.so"]
    ours = tmp_path / "unpacked" / "rdcpkg" / "librdcdemo_cuda.so"
    assert exports(ours) == exports(theirs)
    assert {"rdc_version", "rdc_blas_handle", "rdc_scale_all"} <= exports(ours)
    assert any(n.startswith("libcublas.so") for n in needed(ours))
    assert not any(n.startswith(("libtorch", "libc10")) for n in needed(ours))
    assert "__cudaRegisterLinkedBinary kernels.cu" in exports(ours)  # device-linked


SETUP_VERSION = {
    "CMakeLists.txt": """\
cmake_minimum_required(VERSION 3.18)
project(verdemo LANGUAGES CXX CUDA)
add_library(verdemo SHARED csrc/ver.cu)
set_target_properties(verdemo PROPERTIES
  OUTPUT_NAME verdemo_cuda
  LIBRARY_OUTPUT_DIRECTORY "${PROJECT_SOURCE_DIR}/verpkg")
""",
    "csrc/ver.cu": 'extern "C" int ver_answer(void) { return 42; }\n',
    "verpkg/__init__.py": "",
    # the version only setup() knows: computed, no attr for pyproject.toml to read
    "setup.py": """\
from setuptools import setup

MAJOR, MINOR = 1, 4
setup(version=f"{MAJOR}.{MINOR}.{MAJOR + MINOR}")
""",
    "pyproject.toml": """\
[project]
name = "verdemo"
dynamic = ["version"]
dependencies = ["torch>=2.4,<3", "numpy"]
""",
}


def test_the_cmake_door_takes_the_version_setup_py_computes(tmp_path: Path) -> None:
    """``init --from cmake`` beside a setup.py whose setup() computes the version: setup.py
    runs in init's sandbox for its metadata, as the setup.py door runs it, so nothing falls
    back to 0.0.0; the library uses no torch, so the project's own torch range is the
    matrix's, and the matrix reads (a torch below the stable ABI's 2.9)."""
    project = tmp_path / "verdemo"
    for name, text in SETUP_VERSION.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    run = wheelforge("init", "--from", "cmake", "--archs", "8.0", cwd=project)
    assert run.code == 0, run.err
    assert "nothing needs a hand" in run.out + run.err
    written = yaml.safe_load((project / "matrix.yaml").read_text())
    assert written["package"]["version"] == "1.4.5"
    assert written["extension"]["kind"] == "plain"
    assert written["torch"] == "<3,>=2.4"
    check = wheelforge("matrix", cwd=project)
    assert check.code == 0, check.out + check.err


def own_wheel(project: Path, toolkit: Path, out: Path, *cmake_args: str) -> Path:
    """The project's own wheel: ``pip wheel`` through its build backend (isolated, from PyPI),
    its CMake given *cmake_args* as CMAKE_ARGS, as its docs build it."""
    env = {**os.environ, **_environment(toolkit)}
    env["CMAKE_ARGS"] = " ".join([f"-DCMAKE_CUDA_COMPILER={toolkit / 'bin' / 'nvcc'}", *cmake_args])
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = "2"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, project],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    return only_wheel(out)


def members(wheel: Path) -> list[str]:
    """A wheel's files outside its .dist-info."""
    with zipfile.ZipFile(wheel) as zf:
        return sorted(n for n in zf.namelist() if ".dist-info/" not in n and n[-1] != "/")


def metadata(wheel: Path) -> dict[str, set[str]]:
    """The METADATA headers that say what the wheel is and needs, each as the set of its values."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode()
    fields = ("Name", "Version", "Requires-Python", "Requires-Dist", "Provides-Extra")
    out: dict[str, set[str]] = {f: set() for f in fields}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        if key in out:
            out[key].add(value)
    return out


@pytest.mark.network
@pytest.mark.slow
def test_bitsandbytes_is_adopted_as_its_ctypes_library(
    tmp_path: Path, cuda_with_cublas: Path
) -> None:
    """bitsandbytes (scikit-build-core's setuptools plugin + CMake, libbitsandbytes_cuda<ver>.so
    loaded with ctypes; its version dynamic, [tool.setuptools.dynamic] and setup.py): init for
    one arch through the CMake door, and through setup.py, which hands over to it; the wheel
    carries the files, the metadata and the library's exports of the project's own wheel
    (``pip wheel``) for the same arch, and ``wheelforge check`` passes it. Its releases since
    0.43 publish no sdist, so the checkout comes from $WHEELFORGE_BITSANDBYTES (a git checkout
    of github.com/bitsandbytes-foundation/bitsandbytes)."""
    given = os.environ.get("WHEELFORGE_BITSANDBYTES")
    if not given or not (Path(given) / "CMakeLists.txt").is_file():
        pytest.skip("set WHEELFORGE_BITSANDBYTES to a bitsandbytes checkout")
    project = tmp_path / "bitsandbytes"
    shutil.copytree(given, project, ignore=shutil.ignore_patterns(".git", "build", "*.so"))
    own = tmp_path / "own"
    shutil.copytree(project, own)
    args = ("-DCOMPUTE_BACKEND=cuda", "-DCOMPUTE_CAPABILITY=80")
    theirs_wheel = own_wheel(own, cuda_with_cublas, tmp_path / "own-wheel", *args)
    [library] = [n for n in members(theirs_wheel) if n.endswith(".so")]
    with zipfile.ZipFile(theirs_wheel) as zf:
        theirs = Path(zf.extract(library, tmp_path / "theirs"))

    env = _environment(cuda_with_cublas)
    cmake_args = [f"--cmake-arg={a}" for a in args]
    run = wheelforge("init", "--from", "cmake", "--archs", "8.0", *cmake_args, cwd=project, env=env)
    assert run.code == 0, run.err
    assert "nothing needs a hand" in run.out + run.err  # the version too: pyproject.toml gives it
    written = yaml.safe_load((project / "matrix.yaml").read_text())
    ext, ext_torch = written["extension"], written["torch"]
    assert "no binary uses torch (every extension is kind: plain)" in run.out + run.err
    assert ext["name"] == f"bitsandbytes.{theirs.stem}"
    assert ext["kind"] == "plain"
    assert "module-init" not in ext
    assert {"cublas", "cublasLt"} <= set(ext["libraries"])
    assert "-rdc=true" in ext["nvcc-flags"]  # CUDA_SEPARABLE_COMPILATION

    # plain init: setup.py builds no extension, and hands over to the CMake door
    door = tmp_path / "through-setup-py"
    shutil.copytree(given, door, ignore=shutil.ignore_patterns(".git", "build", "*.so"))
    run = wheelforge("init", "--archs", "8.0", *cmake_args, cwd=door, env=env)
    assert run.code == 0, run.err
    assert "setup.py builds no extension" in run.err
    assert yaml.safe_load((door / "matrix.yaml").read_text())["extension"] == ext

    dry = wheelforge("build", "--dry-run", cwd=project, env=env)
    assert dry.code == 0, dry.err
    assert "requires: torch<3,>=2.4, the matrix's torch as written" in dry.out
    build = wheelforge("build", cwd=project, env=env)
    assert build.code == 0, build.err
    wheel = only_wheel(project / "dist")
    assert members(wheel) == members(theirs_wheel)
    # torch too: its library uses none of torch (kind: plain), so the wheel requires the
    # project's own torch<3,>=2.4, not a stable-ABI floor
    assert ext_torch == "<3,>=2.4"
    ours_meta, theirs_meta = metadata(wheel), metadata(theirs_wheel)
    assert {r for r in theirs_meta["Requires-Dist"] if r.startswith("torch")} == {"torch<3,>=2.4"}
    assert ours_meta == theirs_meta
    with zipfile.ZipFile(wheel) as zf:
        ours = Path(zf.extract(library, tmp_path / "ours"))
    assert exports(ours) == exports(theirs)
    assert "__cudaRegisterLinkedBinary kernels.cu" in exports(ours)  # device-linked
    # the device-linked image packed as its flags ask (--compress-mode=size), as its own is
    linked = section_size(ours, ".nv_fatbin")
    assert 0.9 < linked / section_size(theirs, ".nv_fatbin") < 1.1
    # its link libraries kept; the CUDA runtime linked statically, as wheelforge links it
    # (its own CMake links libcudart.so.13)
    assert {n for n in needed(theirs) if not n.startswith("libcudart")} <= set(needed(ours))
    assert not any(n.startswith(("libcudart", "libtorch", "libc10")) for n in needed(ours))
    check = wheelforge("check", wheel, cwd=tmp_path, env=env)
    assert check.code == 0, check.out + check.err
