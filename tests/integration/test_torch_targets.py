"""extensions[].torch-target (issue 32) on real tools: a wheel of two shared objects compiled for
torch 2.10 and 2.11, each with its own -DTORCH_TARGET_VERSION (a static_assert in each source
fails the compile otherwise), the 2.11 one calling a shim its headers declare only from 2.11
(aoti_torch_cpu_nonzero_static, behind TORCH_FEATURE_VERSION >= TORCH_VERSION_2_11_0); the wheel
requires torch>=2.11 and `wheelforge check` passes it. init on a setup.py whose two extensions
pass different -DTORCH_TARGET_VERSION writes both."""

from __future__ import annotations

import email.parser
import zipfile
from pathlib import Path

import yaml

from tests.integration.helpers import needs_nvcc, only_wheel, wheelforge

MATRIX = """\
package:
  name: targets-demo
  version: 0.1.0
  packages: [targets_demo]
torch: ">=2.10"
arch-sets:
  default: "8.0"
extensions:
  - name: targets_demo._low
    sources: [csrc/low.cpp]
    torch-target: "2.10"
  - name: targets_demo._high
    sources: [csrc/high.cpp]
    torch-target: "2.11"
"""

SOURCE = """\
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h>

static_assert(TORCH_TARGET_VERSION == {macro}ULL, "compiled for another torch target");

static torch::stable::Tensor op(torch::stable::Tensor x) {{
{body}
}}

STABLE_TORCH_LIBRARY(targets_{leaf}, m) {{ m.def("op(Tensor x) -> Tensor"); }}
STABLE_TORCH_LIBRARY_IMPL(targets_{leaf}, CPU, m) {{ m.impl("op", TORCH_BOX(&op)); }}
"""
LOW_BODY = "  return x;"
# A shim of torch 2.11: declared only when the target is 2.11 or newer.
HIGH_BODY = """\
  AtenTensorHandle out = nullptr;
  aoti_torch_cpu_nonzero_static(x.get(), 4, -1, &out);
  return torch::stable::Tensor(out);"""


def project(root: Path) -> Path:
    files = {
        "matrix.yaml": MATRIX,
        "targets_demo/__init__.py": "import torch\nfrom . import _high, _low\n",
        "csrc/low.cpp": SOURCE.format(macro="0x020a000000000000", body=LOW_BODY, leaf="low"),
        "csrc/high.cpp": SOURCE.format(macro="0x020b000000000000", body=HIGH_BODY, leaf="high"),
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@needs_nvcc
def test_two_extensions_with_two_targets_build_each_with_its_own_define(tmp_path: Path) -> None:
    root = project(tmp_path / "demo")
    dry = wheelforge("build", "--dry-run", cwd=root)
    assert dry.code == 0, dry.err
    shown = " ".join((dry.out + dry.err).split())
    assert "-DTORCH_TARGET_VERSION=0x020a000000000000" in shown, shown
    assert "-DTORCH_TARGET_VERSION=0x020b000000000000" in shown, shown
    build = wheelforge("build", cwd=root)
    assert build.code == 0, build.err
    wheel = only_wheel(root / "dist")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        message = email.parser.Parser().parsestr(zf.read(meta).decode())
    assert {"targets_demo/_low.abi3.so", "targets_demo/_high.abi3.so"} <= set(names)
    torch = [r for r in message.get_all("Requires-Dist") or [] if r.startswith("torch")]
    assert torch == ["torch>=2.11"], torch
    check = wheelforge("check", wheel, cwd=root)
    assert check.code == 0, check.out + check.err
    # the 2.11 shim within a wheel that claims torch 2.10 is what check exists to refuse
    forged = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(forged, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == meta:
                data = data.replace(b"torch>=2.11", b"torch>=2.10")
            dst.writestr(item, data)
    refused = wheelforge("check", forged, cwd=root)
    assert refused.code != 0
    assert "aoti_torch_cpu_nonzero_static" in refused.out + refused.err


TWO_TARGETS_SETUP = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

def target(minor):
    return ["-O3", f"-DTORCH_TARGET_VERSION=0x020{minor:x}000000000000", "-DPy_LIMITED_API=0x030a0000"]

setup(
    name="targets-demo",
    version="0.1.0",
    packages=["targets_demo"],
    ext_modules=[
        CppExtension("targets_demo._low", ["csrc/low.cpp"], extra_compile_args={"cxx": target(10)}, py_limited_api=True),
        CppExtension("targets_demo._high", ["csrc/high.cpp"], extra_compile_args={"cxx": target(11)}, py_limited_api=True),
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""


def test_init_keeps_each_extensions_target(tmp_path: Path) -> None:
    root = project(tmp_path / "demo")
    (root / "matrix.yaml").unlink()
    (root / "setup.py").write_text(TWO_TARGETS_SETUP)
    run = wheelforge("init", "--archs", "8.0", cwd=root)
    assert run.code == 0, run.err
    written = yaml.safe_load((root / "matrix.yaml").read_text())
    assert [e.get("torch-target") for e in written["extensions"]] == ["2.10", "2.11"]
    assert (written["abi"], written["torch"]) == ("stable", ">=2.10")
    assert "each keeps its own (extensions[].torch-target)" in " ".join(run.err.split())
