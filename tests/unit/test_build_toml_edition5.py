"""kernel-builder's build.toml as it is now (edition 5, huggingface/kernels
docs/source/builder/writing-kernels.md): stable-abi as a string or a table per backend, several
[kernel.*] sections of several backends, pyext data files, python-depends, the metadata.json
kernel-builder writes beside the package files, and [torch-noarch] named in one line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from wheelforge.adoption.doors import buildtoml
from wheelforge.adoption.writer.matrixfile import InitChoices, render
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError

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


def test_torch_noarch_is_one_line_saying_why(tmp_path: Path) -> None:
    (tmp_path / "build.toml").write_text(
        '[general]\nname = "gemm-triton"\nversion = 1\nedition = 5\nbackends = ["cuda"]\n\n'
        '[torch-noarch]\npyext = ["json", "py"]\n'
    )
    with pytest.raises(ConfigError, match=r"\[torch-noarch\]: a kernel with nothing to compile"):
        buildtoml.read_build_toml(tmp_path)
