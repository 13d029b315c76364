"""Issue 40 item 7 on kernels-community (huggingface/kernels-community, one commit), at init
level (nothing compiles): activation (build.toml edition 5, a ``[torch.stable-abi]`` table,
kernels of four backends) adopted as its CUDA extension with kernel-builder's torch floor; einops
(``[torch-noarch]``) adopted and built as the py3-none-any wheel kernel-builder's noarch
pyproject.toml makes.

`network`: downloads the GitHub tarball; $WHEELFORGE_KERNELS_COMMUNITY_TARBALL may name a local
copy (`git archive --prefix=kernels-community/ COMMIT | gzip`), where GitHub can't be reached.
"""

from __future__ import annotations

import os
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import wheelforge
from wheelforge.configuration.matrix.load import load_matrix

pytestmark = pytest.mark.network

COMMIT = "40d4194f48b6775c4be4776ed08035fabb0e758f"
URL = f"https://github.com/huggingface/kernels-community/archive/{COMMIT}.tar.gz"


@pytest.fixture(scope="module")
def community(tmp_path_factory: pytest.TempPathFactory) -> Path:
    local = os.environ.get("WHEELFORGE_KERNELS_COMMUNITY_TARBALL")
    dest = tmp_path_factory.mktemp("kc")
    if local:
        data = Path(local).read_bytes()
    else:
        try:
            with urllib.request.urlopen(URL, timeout=120) as response:
                data = response.read()
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            pytest.skip(f"{URL} can't be downloaded here (offline?): {exc}")
    (dest / "kc.tar.gz").write_bytes(data)
    with tarfile.open(dest / "kc.tar.gz") as tar:
        wanted = [
            m for m in tar.getmembers() if m.name.split("/")[1:2] in (["activation"], ["einops"])
        ]
        tar.extractall(dest / "src", members=wanted, filter="data")
    [root] = (dest / "src").iterdir()
    return root


def test_activation_edition_5_keeps_its_stable_abi_floor(community: Path) -> None:
    root = community / "activation"
    run = wheelforge("init", "--archs", "8.0", cwd=root)
    assert run.code == 0, run.err + run.out
    matrix = load_matrix(root / "matrix.yaml")
    assert [e.name for e in matrix.extensions] == ["activation._activation_cuda"]
    assert matrix.abi == "stable" and matrix.torch.requirement == "torch>=2.10"
    assert (
        matrix.package.version == "0.1.0"
    )  # kernel-builder's setup.py stub; version 1 is the Hub's
    assert (root / "torch-ext/activation/metadata.json").is_file()
    dry = wheelforge("build", "--dry-run", cwd=root)
    assert dry.code == 0, dry.err + dry.out
    assert "-DTORCH_TARGET_VERSION=0x020a000000000000" in dry.out + dry.err


def test_einops_torch_noarch_is_one_pure_wheel(community: Path, tmp_path: Path) -> None:
    root = community / "einops"
    run = wheelforge("init", cwd=root)
    assert run.code == 0, run.err + run.out
    assert load_matrix(root / "matrix.yaml").extensions == ()
    built = wheelforge("build", "--out", str(tmp_path), cwd=root)
    assert built.code == 0, built.err + built.out
    [wheel] = tmp_path.glob("*.whl")
    assert wheel.name == "einops-0.0.1-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "einops/__init__.py",
        "einops/_ops.py",
        "einops/py.typed",
        "einops/layers/torch.py",
    } <= names
    metadata = zipfile.ZipFile(wheel).read("einops-0.0.1.dist-info/METADATA").decode()
    assert "Requires-Dist: torch>=2.8\n" in metadata and "License: MIT\n" in metadata
