"""init adopts a project faithfully (issue 32): folders a setup.py names as absolute paths
(``-I{this_dir}/csrc``, ``include_dirs=[Path(this_dir) / "csrc"]``, as causal-conv1d and
pytorch_cluster write them) become folders relative to the project, so a copy in another folder
builds; two extensions whose ``-gencode`` flags differ keep their own archs in matrix.yaml and
in the wheel's fatbins; a failing setup.py is reported in its own words; init never reports
success for a matrix its validator rejects; an op library with an undefined symbol fails the
build and check, naming it. The fixtures are written by the tests in those projects' shapes."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import needs_nvcc, only_wheel, wheelforge
from wheelforge.adoption.doors.setupcapture import CaptureContext, capture_setup
from wheelforge.foundation.errors import ToolError

# causal-conv1d's shape: this_dir absolute, include_dirs as Path objects, a -gencode list made
# from a loop over archs; exllamav2's extra_compile_args dict; the toolkit's include folder
# named by hand (-I CUDA_HOME/include), which wheelforge passes itself.
TWIN_SETUP = """\
import os
from pathlib import Path
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

this_dir = os.path.dirname(os.path.abspath(__file__))
cc_flag = []
for arch in os.environ.get("TWIN_LOW_ARCHS", "80").split():
    cc_flag += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
common = ["-O3", "-I" + os.path.join(this_dir, "csrc", "common"), "-I", os.path.join(CUDA_HOME, "include")]
setup(
    name="twin",
    version="0.1.0",
    packages=["twin"],
    ext_modules=[
        CUDAExtension(
            "twin._low", ["csrc/low/low.cu"],
            include_dirs=[Path(this_dir) / "csrc" / "low"],
            extra_compile_args={"cxx": ["-O3"], "nvcc": common + cc_flag},
        ),
        CUDAExtension(
            "twin._high", [os.path.join(this_dir, "csrc", "high", "high.cu")],
            include_dirs=[os.path.join(this_dir, "csrc", "high")],
            extra_compile_args={"cxx": ["-O3"], "nvcc": common + ["-gencode=arch=compute_90,code=sm_90"]},
            extra_link_args=["-L" + os.path.join(this_dir, "lib")],
        ),
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""

OP = """\
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include "common.h"
#include "{leaf}.h"

__global__ void {leaf}_kernel(float* x) {{ x[threadIdx.x] *= TWIN_SCALE * {leaf}_FACTOR; }}

static torch::stable::Tensor twice(torch::stable::Tensor x) {{ return torch::stable::empty_like(x); }}

STABLE_TORCH_LIBRARY(twin_{leaf}, m) {{ m.def("twice(Tensor x) -> Tensor"); }}
STABLE_TORCH_LIBRARY_IMPL(twin_{leaf}, CPU, m) {{ m.impl("twice", TORCH_BOX(&twice)); }}
"""


def twin_project(root: Path) -> Path:
    files = {
        "setup.py": TWIN_SETUP,
        "twin/__init__.py": "import torch\nfrom . import _high, _low\n",
        "csrc/common/common.h": "#pragma once\n#define TWIN_SCALE 2.0f\n",
        "csrc/low/low.h": "#pragma once\n#define low_FACTOR 1.0f\n",
        "csrc/high/high.h": "#pragma once\n#define high_FACTOR 3.0f\n",
        "csrc/low/low.cu": OP.format(leaf="low"),
        "csrc/high/high.cu": OP.format(leaf="high"),
        "lib/README": "link-time libraries would go here\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_absolute_folders_become_relative_and_each_extension_keeps_its_archs(
    tmp_path: Path,
) -> None:
    root = twin_project(tmp_path / "twin")
    run = wheelforge("init", cwd=root)
    assert run.code == 0, run.err
    text = (root / "matrix.yaml").read_text()
    assert str(tmp_path) not in text and "cuda/include" not in text, text
    low, high = yaml.safe_load(text)["extensions"]
    assert (low["name"], low["include-dirs"], low["archs"]) == (
        "twin._low",
        ["csrc/low", "csrc/common"],
        "8.0",
    )
    assert (high["sources"], high["include-dirs"], high["archs"]) == (
        ["csrc/high/high.cu"],
        ["csrc/high", "csrc/common"],
        "9.0",
    )
    assert high["library-dirs"] == ["lib"] and "link-flags" not in high
    assert yaml.safe_load(text)["arch-sets"] == {"default": "8.0 9.0"}
    err = " ".join(run.err.split())
    assert (
        "left out '/usr/local/cuda" in err
        and "the CUDA toolkit's include folder" in err
        and "each keeps its own" in err
    )


@needs_nvcc
def test_a_copy_of_an_adopted_project_in_another_folder_builds_with_per_extension_fatbins(
    tmp_path: Path,
) -> None:
    first = twin_project(tmp_path / "first")
    assert (run := wheelforge("init", cwd=first)).code == 0, run.err
    copy = tmp_path / "elsewhere" / "twin"
    shutil.copytree(first, copy)
    shutil.rmtree(first)  # nothing may still point at the folder init ran in
    build = wheelforge("build", cwd=copy)
    assert build.code == 0, build.err
    wheel = only_wheel(copy / "dist")
    inspect = wheelforge("inspect", "--json", wheel, cwd=copy)
    assert inspect.code == 0, inspect.err
    sass = {
        f["path"].rsplit("!", 1)[-1]: sorted(
            {e["arch"] for e in f["fatbins"] if e["kind"] == "sass"}
        )
        for f in json.loads(inspect.out)["files"]
    }
    assert sass == {"twin/_low.abi3.so": ["sm_80"], "twin/_high.abi3.so": ["sm_90"]}
    assert wheelforge("check", wheel, cwd=copy).code == 0


def _context() -> CaptureContext:
    return CaptureContext(
        python=Path(sys.executable),
        cuda_home=Path("/usr/local/cuda"),
        cuda_version="13.0",
        torch_version="2.13.0",
        stand_in=True,
    )


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (  # a bare sys.exit(1) after printing why, to stderr (FlashAttention's CUDA_HOME check)
            'import sys\nprint("Error: CUTLASS not found; set CUTLASS_PATH", file=sys.stderr)\n'
            "sys.exit(1)\n",
            "failed at line 3: sys.exit(1) after printing: Error: CUTLASS not found; set CUTLASS_PATH",
        ),
        (  # an exception with no message after a line on stdout
            'print("nvcc 11.7 is too old for this project")\nraise RuntimeError()\n',
            "RuntimeError (it printed: nvcc 11.7 is too old for this project)",
        ),
        (  # SystemExit with the message itself
            'import sys\nsys.exit("CUDA_HOME is not set")\n',
            "failed at line 2: SystemExit: CUDA_HOME is not set",
        ),
        (  # the process gone without a record (os._exit): its last line still shown
            'import os\nprint("fatal: submodule csrc/cutlass missing", flush=True)\nos._exit(3)\n',
            "(exit code 3): fatal: submodule csrc/cutlass missing",
        ),
    ],
)
def test_a_failing_setup_py_is_reported_in_its_own_words(
    tmp_path: Path, script: str, said: str
) -> None:
    (tmp_path / "setup.py").write_text(script)
    with pytest.raises(ToolError) as err:
        capture_setup(tmp_path, _context())
    assert said in err.value.message


def test_init_never_reports_a_matrix_its_validator_rejects(tmp_path: Path) -> None:
    # include_dirs names a submodule that is not checked out: matrix.yaml would name a folder
    # that is not there, which 'build' refuses; init refuses it first and writes nothing.
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cu").write_text("// ops\n")
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        'setup(name="demo", version="0.1", ext_modules=[CUDAExtension("demo_ops", ["csrc/ops.cu"],'
        ' include_dirs=["third_party/cutlass/include"])], cmdclass={"build_ext": BuildExtension})\n'
    )
    run = wheelforge("init", "--archs", "9.0", cwd=tmp_path)
    assert run.code == 2, run.err
    err = " ".join(run.err.split())
    assert "the matrix.yaml it would write is not valid, so nothing was written" in err
    assert "extension.include-dirs: 'third_party/cutlass/include' is not a folder" in err
    assert "git submodule update --init" in err  # what needs a hand, under the validator's line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["csrc", "setup.py"]


LIBRARY_MATRIX = """\
package:
  name: scaler
  version: 0.1.0
  packages: [scaler]
extensions:
  - name: scaler._ops
    kind: library
    sources: [csrc/ops.cpp]
torch: ">=2.10"
arch-sets: "9.0"
"""

LIBRARY_OP = """\
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

void scale_rows(torch::stable::Tensor& x);  // defined in a source the matrix leaves out

static torch::stable::Tensor scale(torch::stable::Tensor x) { scale_rows(x); return x; }

STABLE_TORCH_LIBRARY(scaler, m) { m.def("scale(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(scaler, CPU, m) { m.impl("scale", TORCH_BOX(&scale)); }
"""


@needs_nvcc
def test_an_op_library_with_an_undefined_symbol_fails_the_build_and_check_naming_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text(LIBRARY_OP)
    (tmp_path / "scaler").mkdir()
    (tmp_path / "scaler" / "__init__.py").write_text(
        "import os\nimport torch\ntorch.ops.load_library(os.path.join(os.path.dirname(__file__), '_ops.so'))\n"
    )
    (tmp_path / "matrix.yaml").write_text(LIBRARY_MATRIX)
    build = wheelforge("build", cwd=tmp_path)
    assert build.code == 4, build.err
    err = " ".join(build.err.split())
    assert "scale_rows(torch::stable::Tensor&)" in err and "undefined symbol" in err, err
    assert not list((tmp_path / "dist").glob("*.whl"))
    # check reads the same op library, as a wheel of it: the build left it in its build folder.
    [built] = [p for p in (tmp_path / "build").rglob("_ops.so") if p.is_file()][:1]
    wheel = tmp_path / "scaler-0.1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(built, "scaler/_ops.so")
        zf.writestr(
            "scaler-0.1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: scaler\nVersion: 0.1.0\nRequires-Dist: torch>=2.10\n",
        )
    check = wheelforge("check", wheel, cwd=tmp_path)
    assert check.code == 4, check.err
    said = " ".join(check.err.split())
    assert "scaler/_ops.so needs scale_rows(torch::stable::Tensor&)" in said, said
