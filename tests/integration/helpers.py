"""What the integration tests share, in one place (cibuildwheel's test/utils.py is the model):
running wheelforge as a user runs it, the marks that skip a test when a tool it drives is
missing, the bundled payload copied out of the checkout, and the small example projects more
than one module builds. Import from here, never from a test module.

The integration tests run by path (``pytest tests/integration``; the default run is the unit
tests). Markers (pyproject.toml [tool.pytest.ini_options]; docs/testing.md says what each
costs): ``network`` (downloads: PyPI sdists, build isolation, CUDA 13.1 from PyPI, CUDA 11.8)
and ``slow`` (minutes each: torch environments) leave that run and run in CI by marker
(.ci/run); ``sweep`` tests (every torch release, multi-GB CUDA torches) run only when asked for. A session-wide
``--cache-dir`` for torch environments and toolkits is the ``shared_cache`` fixture
(tests/integration/conftest.py).
"""

from __future__ import annotations

import email.parser
import email.policy
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import REPO

__all__ = [
    "REPO",
    "TINY_ARCH_ENV",
    "TINY_MATRIX",
    "TINY_OP_CPP",
    "TINY_PYPROJECT",
    "Run",
    "copy_kernels",
    "metadata_differences",
    "needs_local_torch_wheel",
    "needs_nvcc",
    "only_wheel",
    "setuptools_metadata",
    "tiny",
    "wheelforge",
]

# Every integration module that compiles carries this mark (pytestmark): no nvcc, no run.
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
# Test environments with torch 2.13.0 come from this machine's disk (pip's find-links), where
# the wheel is cp311; elsewhere they would download a CUDA torch.
needs_local_torch_wheel = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="the torch 2.13.0 wheel on this machine's disk is cp311"
)


@dataclass(frozen=True)
class Run:
    """One finished ``wheelforge`` command: exit code, stdout, stderr."""

    code: int
    out: str
    err: str


def wheelforge(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> Run:
    """``python -m wheelforge ARGS`` in *cwd*, as a user runs it (wide columns, so messages are
    not folded); a traceback on stderr fails the test whatever the exit code."""
    proc = subprocess.run(
        [sys.executable, "-m", "wheelforge", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200", **(env or {})},
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    return Run(proc.returncode, proc.stdout, proc.stderr)


def only_wheel(folder: Path) -> Path:
    wheels = sorted(folder.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def copy_kernels(root: Path) -> Path:
    """The repository's payload (kernels/ and matrix.yaml) copied into *root*, so builds never
    touch the checkout; returns *root*."""
    shutil.copytree(
        REPO / "kernels",
        root / "kernels",
        ignore=shutil.ignore_patterns("__pycache__", "build", "dist"),
    )
    shutil.copy(REPO / "matrix.yaml", root / "matrix.yaml")
    return root


# ---------------------------------------------------------------------------------------------
# tinyext: the smallest stable-ABI project laid out as users do (sources inside the package,
# metadata in pyproject.toml, no package section, no arch-sets). C++ only: no nvcc job, a build
# takes seconds.

TINY_ARCH_ENV = {"TORCH_CUDA_ARCH_LIST": "9.0"}  # the matrix names no arch-sets

TINY_OP_CPP = """\
#include <Python.h>
#ifdef TINY_WITH_CUDA
#include <cuda_runtime.h>  // from the variant's toolkit, in a .cpp (defect 3)
#endif
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <cmath>

// The module init function, written by hand without PyMODINIT_FUNC (defect 1).
static struct PyModuleDef tiny_module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
extern "C" PyObject* PyInit__C(void) { return PyModule_Create(&tiny_module); }

#ifdef TINY_WITH_CUDA
extern "C" int tiny_cudart_version(void) { cudaStream_t s = nullptr; (void)s; return CUDART_VERSION; }
#endif

static torch::stable::Tensor cosine(torch::stable::Tensor x) {
  torch::stable::Tensor out = torch::stable::empty_like(x);
  const float* in = static_cast<const float*>(x.data_ptr());
  float* o = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) o[i] = std::cos(in[i]);
  return out;
}

STABLE_TORCH_LIBRARY(tinyext, m) { m.def("cosine(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(tinyext, CPU, m) { m.impl("cosine", TORCH_BOX(&cosine)); }
"""

TINY_PYPROJECT = """\
[project]
name = "tinyext"
version = "0.3.0"
description = "A tiny stable-ABI extension"
readme = "README.md"
license = "MIT"
authors = [{name = "A. Person", email = "a.person@example.org"}]
classifiers = ["Programming Language :: Python :: 3"]
dependencies = ["numpy>=1.26", "torch>=2.10"]

[project.optional-dependencies]
test = ["pytest"]

[project.urls]
Homepage = "https://example.org/tinyext"
"""

TINY_MATRIX = """\
extension:
  name: tinyext._C
  sources: [tinyext/csrc/*.cpp]
  module-init: false
  cxx-flags: [-DTINY_WITH_CUDA{extra_flags}]
  libraries: [m]
  link-flags: ["-Wl,-z,now"]  # quoted: a comma would split a YAML flow list
torch: ">=2.10"
"""


def tiny(
    root: Path,
    source: str = TINY_OP_CPP,
    *,
    matrix: str = TINY_MATRIX,
    extra_flags: str = "",
    pyproject: str = TINY_PYPROJECT,
) -> Path:
    """tinyext written into *root* (created); returns *root*."""
    pkg = root / "tinyext"
    (pkg / "csrc").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import torch\n\nfrom . import _C\n")
    (pkg / "csrc" / "op.cpp").write_text(source)
    (root / "README.md").write_text("# tinyext\n\nThe long description.\n")
    (root / "pyproject.toml").write_text(pyproject)
    (root / "matrix.yaml").write_text(matrix.format(extra_flags=extra_flags))
    return root


# The compile-cache tests' project (test_compile_cache.py, test_sccache_dist.py): one kernel,
# one C++ file, the module init.
ONE_KERNEL = """\
#include <cstdio>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""
ONE_KERNEL_MATRIX = """\
package: {name: tiny, version: '1.0', packages: [tiny]}
extension: {name: tiny._C, sources: [csrc/*.cpp, csrc/*.cu]}
torch: '>=2.10'
arch-sets: '8.0'
"""


def one_kernel_project(root: Path) -> Path:
    """A one-kernel project: a fresh clone of the same sources wherever it is written."""
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "scale.cu").write_text(ONE_KERNEL)
    (root / "csrc" / "ops.cpp").write_text("int tiny_answer() { return 42; }\n")
    (root / "matrix.yaml").write_text(ONE_KERNEL_MATRIX)
    return root


_BROUGHT_RE = re.compile(
    r"compiled (?P<compiled>\d+) of (?P<total>\d+) sources(?:, (?P<more>\d+) more from the "
    r"compile cache)?|(?P<cached>\d+) of (?P<all>\d+) sources from the compile cache"
)


def brought_up_to_date(err: str) -> tuple[int, int] | None:
    """(sources compiled or answered by the compile cache, sources) from the compile step's
    line (build/variant._compiled_words): a warm ~/.cache/ccache answers the same
    sources in another run of the suite, so a test counts both."""
    m = _BROUGHT_RE.search(err)
    if m is None:
        return None
    if m["cached"] is not None:
        return int(m["cached"]), int(m["all"])
    return int(m["compiled"]) + int(m["more"] or 0), int(m["total"])


# ---------------------------------------------------------------------------------------------
# METADATA against setuptools' own (tests/integration/test_dynamic_metadata.py and
# test_real_adoption.py): its PEP 517 metadata hook run in a child, no compiler started.

_OWN_HEADERS = {"metadata-version", "dynamic"}  # each tool's own bookkeeping


def setuptools_metadata(root: Path, out: Path, env: dict[str, str] | None = None) -> str:
    """The METADATA setuptools' prepare_metadata_for_build_wheel writes for *root*."""
    out.mkdir(parents=True)
    code = (
        "import sys; from setuptools import build_meta as b; "
        "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=root, env={**os.environ, **(env or {})},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return (out / done.stdout.strip().splitlines()[-1] / "METADATA").read_text()


def _fields(text: str) -> tuple[Counter[tuple[str, str]], str]:
    msg = email.parser.Parser(policy=email.policy.compat32).parsestr(text)
    headers = Counter(
        (k.lower(), " ".join(v.split())) for k, v in msg.items() if k.lower() not in _OWN_HEADERS
    )
    body = msg.get_payload()
    return headers, body.strip() if isinstance(body, str) else ""


def metadata_differences(theirs: str, ours: str) -> dict[str, object]:
    """Headers only one side writes (lower-case name, value), and whether the bodies differ."""
    their_headers, their_body = _fields(theirs)
    our_headers, our_body = _fields(ours)
    return {
        "ours only": sorted((our_headers - their_headers).elements()),
        "theirs only": sorted((their_headers - our_headers).elements()),
        "body differs": our_body != their_body,
    }
