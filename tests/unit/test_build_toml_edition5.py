"""kernel-builder's build.toml as it is now (edition 5, huggingface/kernels
docs/source/builder/writing-kernels.md): stable-abi as a string or a table per backend, several
[kernel.*] sections of several backends, pyext data files, python-depends, the metadata.json
kernel-builder writes beside the package files, and [torch-noarch] as the pure-Python wheel
kernel-builder's noarch pyproject.toml makes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from wheelforge.adoption.doors import buildtoml
from wheelforge.adoption.writer.matrixfile import InitChoices, render
from wheelforge.configuration.matrix.load import load_matrix

# The shape of kernel-builder's own examples (relu-torch-stable-abi, extra-data): every backend
# listed, a kernel per backend, the stable ABI per backend.
EDITION_5 = """\
[general]
name = "relu-stable"
version = 2
edition = 5
license = "Apache-2.0"
upstream = "https://github.com/example/relu"
backends = ["cpu", "cuda", "metal", "rocm", "xpu"]
python-depends = ["einops"]

[general.hub]
repo-id = "kernels-test/relu-stable"

[torch]
pyext = ["json", "py"]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

{stable}

[kernel.relu_xpu]
backend = "xpu"
depends = ["torch"]
src = ["relu_xpu/relu.cpp"]

[kernel.relu_rocm]
backend = "rocm"
depends = ["torch"]
rocm-archs = ["gfx90a", "gfx942"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu_cpu.cpp"]

[kernel.relu]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0"]
src = ["relu_cuda/relu.cu"]
"""
TABLE = '[torch.stable-abi]\ncpu = "2.11"\ncuda = "2.11"\nrocm = "2.11"'


def _project(root: Path, stable: str = TABLE) -> Path:
    files = {
        "build.toml": EDITION_5.format(stable=stable),
        "torch-ext/torch_binding.cpp": "// binding\n",
        "torch-ext/torch_binding.h": "#pragma once\n",
        "relu_cuda/relu.cu": "// relu\n",
        "relu_cpu/relu_cpu.cpp": "// cpu\n",
        "relu_xpu/relu.cpp": "// xpu\n",
        "torch-ext/relu_stable/__init__.py": "from ._ops import ops\n",
        "torch-ext/relu_stable/configs/tuned.json": "{}\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


@pytest.mark.parametrize(
    ("stable", "target"),
    [
        (TABLE, "2.11"),
        ('[torch.stable-abi]\ncpu = "2.11"', None),  # cuda not listed: built on the full ABI
        ('[torch]\nstable-abi = "2.12"'.replace("[torch]\n", ""), "2.12"),
        ("", None),
    ],
)
def test_stable_abi_as_a_string_or_a_table_per_backend(
    tmp_path: Path, stable: str, target: str | None
) -> None:
    text = EDITION_5.format(stable="")
    if stable.startswith("stable-abi"):  # a string goes inside [torch]
        text = text.replace('pyext = ["json", "py"]', f'pyext = ["json", "py"]\n{stable}')
        stable = ""
    root = _project(tmp_path)
    (root / "build.toml").write_text(text.replace("\n\n\n", f"\n\n{stable}\n\n", 1))
    [ext] = buildtoml.read_build_toml(root).extensions
    assert ext.torch_target == target
    assert ext.stable is (target is not None)


def test_the_cuda_kernel_of_several_is_the_extension_and_the_others_are_named(
    tmp_path: Path,
) -> None:
    build = buildtoml.read_build_toml(_project(tmp_path))
    [ext] = build.extensions
    assert {s.path for s in ext.sources} == {"torch-ext/torch_binding.cpp", "relu_cuda/relu.cu"}
    assert any("relu_cpu (cpu)" in d and "relu_xpu (xpu)" in d for d in build.done)


def test_metadata_json_python_depends_and_pyext_reach_the_matrix(tmp_path: Path) -> None:
    root = _project(tmp_path)
    build = buildtoml.read_build_toml(root)
    metadata = next(g for g in build.generated if g.path.endswith("metadata.json"))
    assert metadata.path == "torch-ext/relu_stable/metadata.json"
    document = json.loads(metadata.text)
    assert document == {
        "name": "relu-stable",
        "id": "_relu_stable_cuda",
        "version": 2,
        "license": "Apache-2.0",
        "upstream": "https://github.com/example/relu",
        "python-depends": ["einops"],
        "kernel-depends": [],
        "backend": {"type": "cuda", "archs": ["8.0", "9.0"]},
    }
    written = yaml.safe_load(render(build, InitChoices()).text)
    assert written["package"]["package-data"] == ["metadata.json", "**/*.json"]
    assert written["package"]["dependencies"] == ["einops"]
    assert written["torch"] == ">=2.11"


def test_init_writes_metadata_json_and_the_matrix_reads(tmp_path: Path) -> None:
    import sys

    from wheelforge.adoption import adopt as init

    root = _project(tmp_path)
    init.init_project(init.InitRequest(root=root, python=Path(sys.executable)))
    assert json.loads((root / "torch-ext/relu_stable/metadata.json").read_text())["id"]
    package = load_matrix(root / "matrix.yaml").package
    assert "metadata.json" in package.package_data and package.license == "Apache-2.0"


NOARCH = """\
[general]
name = "gemm-triton"
version = 1
edition = 5
license = "MIT"
upstream = "https://github.com/example/gemm"
backends = ["cuda", "rocm"]
python-depends = ["tvm-ffi"]

[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]

[torch-noarch]
pyext = ["json", "py"]
cuda-capabilities = ["9.0", "10.0"]

[kernel]
"""


def _noarch(root: Path) -> Path:
    (root / "build.toml").write_text(NOARCH)
    package = root / "torch-ext/gemm_triton"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from ._ops import ops\n")
    (package / "configs.json").write_text("{}\n")
    (package / "py.typed").write_text("")
    return root


def test_torch_noarch_is_adopted_as_kernel_builders_pure_wheel(tmp_path: Path) -> None:
    # kernel-builder's templates/torch/noarch/pyproject.toml: version 0.0.1, torch>=2.8,
    # Python >=3.9, python-depends through kernels-data's table, a backend's as an extra
    build = buildtoml.read_build_toml(_noarch(tmp_path))
    assert build.pure and build.extensions == ()
    written = yaml.safe_load(render(build, InitChoices()).text)
    assert written["package"] == {
        "name": "gemm-triton",
        "version": "0.0.1",
        "license": "MIT",
        "requires-python": ">=3.9",
        "home-page": "https://github.com/example/gemm",
        "dependencies": ["apache-tvm-ffi"],
        "optional-dependencies": {"cuda": ["nvidia-cutlass-dsl"]},
        "packages": ["torch-ext/gemm_triton"],
        "package-data": ["metadata.json", "**/*.json", "py.typed"],
    }
    assert written["torch"] == ">=2.8" and "extension" not in written
    files = {g.path: g.text for g in build.generated}
    assert 'f"_gemm_triton_{get_backend()}"' in files["torch-ext/gemm_triton/_ops.py"]
    metadata = json.loads(files["torch-ext/gemm_triton/metadata.json"])
    assert metadata["backend"] == {"type": "cuda", "archs": ["10.0", "9.0"]}
    assert metadata["python-depends"] == ["apache-tvm-ffi", "nvidia-cutlass-dsl"]


def test_torch_noarch_builds_one_py3_none_any_wheel(tmp_path: Path) -> None:
    import sys
    import zipfile

    from wheelforge.adoption import adopt as init
    from wheelforge.build import purewheel
    from wheelforge.packaging import wheel

    root = _noarch(tmp_path)
    init.init_project(init.InitRequest(root=root, python=Path(sys.executable)))
    matrix = load_matrix(root / "matrix.yaml")
    contents = purewheel.contents(matrix)
    assert contents.filename == "gemm_triton-0.0.1-py3-none-any.whl"
    path = wheel.pack(contents, tmp_path / "dist")
    names = set(zipfile.ZipFile(path).namelist())
    assert {
        "gemm_triton/__init__.py",
        "gemm_triton/_ops.py",
        "gemm_triton/configs.json",
        "gemm_triton/metadata.json",
        "gemm_triton/py.typed",
    } <= names
    assert "Root-Is-Purelib: true" in contents.wheel
    assert "Requires-Dist: torch>=2.8\n" in contents.metadata
    assert 'Requires-Dist: nvidia-cutlass-dsl; extra == "cuda"' in contents.metadata
    # --dry-run says the same requirement (it said "torch pinned to the torch it builds against")
    from wheelforge.build.dryrun import dry_run
    from wheelforge.configuration.settings import Flags, resolve

    [planned] = dry_run(resolve(Flags(matrix=root / "matrix.yaml")))
    assert (planned.torch_requirement, planned.torch_free) == ("torch>=2.8", True)


def test_torch_above_the_stable_abi_floor_is_said(tmp_path: Path) -> None:
    build = buildtoml.read_build_toml(_project(tmp_path))
    kept = render(build, InitChoices())
    assert yaml.safe_load(kept.text)["torch"] == ">=2.11"
    raised = render(build, InitChoices(torch=("2.13.0",)))
    assert yaml.safe_load(raised.text)["torch"] == "2.13.0"
    assert any("raises the project's stable-ABI floor (2.11)" in h for h in raised.hand)
