"""The bundled kernels as a PEP 517 project (pip wheel, python -m build --sdist), PEP 825
variant wheels built from them, and a project taking the backend through build isolation by its
distribution name, with the real nvcc, ninja, auditwheel and pip.

One arch (sm_75) keeps the compile short; the variant build reuses the objects of the pip build
(same variant id, same build folder), so it only packs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from variantlib.variant_dist_info import VariantDistInfo

from tests.integration.helpers import (
    REPO,
    TINY_ARCH_ENV,
    TINY_PYPROJECT,
    needs_nvcc,
    only_wheel,
    tiny,
)
from wheelforge import DISTRIBUTION, __version__, build_meta

pytestmark = needs_nvcc

ARCHS = "7.5"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def run(args: list[str | Path], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True,
        env={**os.environ, "COLUMNS": "200", **env},
    )  # fmt: skip


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of kernels/, so builds never touch the checkout."""
    root = tmp_path_factory.mktemp("packaging") / "kernels"
    shutil.copytree(
        REPO / "kernels", root, ignore=shutil.ignore_patterns("__pycache__", "build", "dist")
    )
    return root


@pytest.fixture(scope="module")
def pip_wheel(kernels: Path) -> Path:
    out = kernels.parent / "wheelhouse"
    proc = run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-w", out, kernels],
               cwd=kernels.parent, TORCH_CUDA_ARCH_LIST=ARCHS)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [wheel] = out.glob("*.whl")
    return wheel


def test_pip_wheel_without_isolation_builds_a_working_wheel(pip_wheel: Path, kernels: Path) -> None:
    assert pip_wheel.name.startswith("wheelforge_kernels-0.1.0-cp310-abi3-manylinux_")
    inspected = run(
        [sys.executable, "-m", "wheelforge", "inspect", "--json", pip_wheel], cwd=kernels
    )
    archs = {e["arch"] for f in json.loads(inspected.stdout)["files"] for e in f["fatbins"]}
    assert archs == {"sm_75"}
    # Its CPU tests, against this venv's torch, with the wheel installed to a folder of its own.
    target = kernels.parent / "installed"
    proc = run([*PIP, "install", "--no-deps", "--target", target, pip_wheel], cwd=kernels.parent)
    assert proc.returncode == 0, proc.stderr
    # From an empty folder, so the sources beside the tests cannot shadow the installed wheel.
    empty = kernels.parent / "empty"
    empty.mkdir()
    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", kernels / "tests"],
                cwd=empty, PYTHONPATH=str(target))  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert " passed" in tests.stdout and " failed" not in tests.stdout


def test_prepared_metadata_is_the_wheels(
    pip_wheel: Path, kernels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(kernels)
    name = build_meta.prepare_metadata_for_build_wheel(str(tmp_path))
    with zipfile.ZipFile(pip_wheel) as zf:
        assert zf.read(f"{name}/METADATA") == (tmp_path / name / "METADATA").read_bytes()


def test_an_error_through_pip_is_one_line_without_traceback(kernels: Path) -> None:
    proc = run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-C", "arch=8.0", "-w",
                kernels.parent / "never", kernels], cwd=kernels.parent)  # fmt: skip
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "error: -C arch: wheelforge.build_meta has no such setting; it takes archs:" in output
    assert "Traceback" not in output


def test_sdist_is_reproducible(kernels: Path, tmp_path: Path) -> None:
    names = []
    for folder in ("a", "b"):
        proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o",
                    tmp_path / folder, kernels], cwd=kernels.parent)  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [made] = (tmp_path / folder).glob("*.tar.gz")
        names.append(made)
    assert names[0].name == "wheelforge_kernels-0.1.0.tar.gz"
    assert sha256(names[0]) == sha256(names[1])


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


@pytest.mark.slow
def test_a_wheel_from_the_sdist_equals_one_from_the_checkout(
    pip_wheel: Path, kernels: Path, tmp_path: Path
) -> None:
    """The sdist's wheel, built in another folder, is byte for byte the checkout's wheel: the
    builds are path-independent (docs/reproducibility.md), so nothing but the inputs counts."""
    proc = run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", tmp_path, kernels],
               cwd=kernels.parent)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [sdist] = tmp_path.glob("*.tar.gz")
    first = run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-w", tmp_path / "one", kernels],
                cwd=tmp_path, TORCH_CUDA_ARCH_LIST=ARCHS, WHEELFORGE_COMPILE_CACHE="none")  # fmt: skip
    assert first.returncode == 0, first.stderr
    shutil.unpack_archive(sdist, tmp_path / "unpacked" / "elsewhere")
    [tree] = (tmp_path / "unpacked" / "elsewhere").iterdir()
    second = run([*PIP, "wheel", "--no-build-isolation", "--no-deps", "-w", tmp_path / "two", tree],
                 cwd=tmp_path, TORCH_CUDA_ARCH_LIST=ARCHS, WHEELFORGE_COMPILE_CACHE="none")  # fmt: skip
    assert second.returncode == 0, second.stderr
    [one] = (tmp_path / "one").glob("*.whl")
    [two] = (tmp_path / "two").glob("*.whl")
    assert one.name == two.name
    a, b = _members(one), _members(two)
    assert list(a) == list(b)
    assert [n for n in a if a[n] != b[n]] == []
    assert sha256(one) == sha256(two)


def test_variant_wheels_from_binary_truth(pip_wheel: Path, kernels: Path) -> None:
    # Beside kernels/matrix.yaml, so the build folder (and the pip build's objects) is shared.
    matrix = kernels / "variants.yaml"
    matrix.write_text((kernels / "matrix.yaml").read_text() + "wheel-variants:\n  null: sm75\n")
    out = kernels.parent / "variants"
    proc = run([sys.executable, "-m", "wheelforge", "build", "--matrix", matrix, "--archs", ARCHS,
                "--out", out], cwd=kernels)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "nothing to compile: up to date" in proc.stderr  # the pip build's objects
    plat = pip_wheel.name.removeprefix("wheelforge_kernels-0.1.0-").removesuffix(".whl")
    variant_name = f"wheelforge_kernels-0.1.0-{plat}-sm75_cu130.whl"
    null_name = f"wheelforge_kernels-0.1.0-{plat}-null.whl"
    index_name = "wheelforge_kernels-0.1.0-variants.json"
    assert sorted(p.name for p in out.iterdir()) == sorted([variant_name, null_name, index_name])
    variant = out / variant_name
    with zipfile.ZipFile(variant) as zf:
        text = zf.read("wheelforge_kernels-0.1.0.dist-info/variant.json").decode()
    desc = VariantDistInfo(text, "sm75_cu130").variant_desc  # variantlib validates it
    declared = sorted(p.value for p in desc.properties if p.feature == "sm_arch")
    inspected = run([sys.executable, "-m", "wheelforge", "inspect", "--json", variant], cwd=kernels)
    assert inspected.returncode == 0, inspected.stderr
    [check] = json.loads(inspected.stdout)["variants"]
    assert declared == check["derived_sm_arch"] == ["75_real"]
    for wheel in (variant, out / null_name):  # the ABI check reads the tags past the label
        checked = run([sys.executable, "-m", "wheelforge", "check", wheel], cwd=kernels)
        assert checked.returncode == 0, checked.stderr
        assert "wheelforge_kernels/_C.abi3.so" in checked.stdout, checked.stdout
    index = json.loads((out / index_name).read_text())
    assert sorted(index["variants"]) == ["null", "sm75_cu130"]

    # A released installer (uv, preview) picks by GPU from the folder and its variants.json:
    # the sm_75 build for an sm_75 GPU, the null variant for an sm_90 one (no code for it) or
    # for a driver older than the toolkit.
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv is not None, "uv is in the test extras"

    def chosen(sm: str, driver: str = "13.0") -> str:
        proc = run([uv, "-v", "pip", "install", "--preview-features", "wheel-variants", "--dry-run",
                    "--no-deps", "--no-index", "--find-links", out, "--python", sys.executable,
                    "wheelforge-kernels"], cwd=kernels.parent, NV_VARIANT_PROVIDER_FORCE_SM_ARCH=sm,
                   NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION=driver)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stderr.split("Selecting: ", 1)[1].split("(", 1)[1].split(")", 1)[0]

    assert chosen("7.5") == variant_name
    assert chosen("9.0") == null_name
    assert chosen("7.5", driver="12.8") == null_name

    # Tampered: one more arch than the binary has.
    tampered = kernels.parent / variant.name
    data = json.loads(text)
    data["variants"]["sm75_cu130"]["nvidia"]["sm_arch"].append("90_real")
    with zipfile.ZipFile(variant) as src, zipfile.ZipFile(tampered, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename.endswith("/variant.json"):
                body = json.dumps(data).encode()
            dst.writestr(info, body)
    flagged = run([sys.executable, "-m", "wheelforge", "inspect", tampered], cwd=kernels)
    assert flagged.returncode == 4  # a verification failure
    assert (
        "declares nvidia :: sm_arch :: 90_real, but no binary carries that code" in flagged.stderr
    )
    assert "Traceback" not in flagged.stderr


def _wheelforge_dists(folder: Path) -> Path:
    """wheelforge's own sdist and wheel, built from a copy of the checkout (the build writes
    egg-info and build/ beside the sources), into *folder*: what an index would serve."""
    source = folder.parent / "wheelforge-source"
    shutil.copytree(REPO / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    made = run([sys.executable, "-m", "build", "--outdir", folder, source], cwd=folder.parent)
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
    return folder


@pytest.mark.network  # wheelforge's own dependencies come from the package index
def test_pip_wheel_with_build_isolation(tmp_path: Path) -> None:
    """A project naming the backend by its distribution, ``requires = ["wheelforge-cuda"]``,
    built by pip with build isolation: wheelforge from its own sdist and wheel in a folder
    (--find-links), torch (which get_requires_for_build_wheel asks for) pinned to this suite's,
    as a user pins a build dependency (PIP_CONSTRAINT), so the isolated environment installs the
    torch on disk rather than the newest CUDA one."""
    links = _wheelforge_dists(tmp_path / "links")
    assert sorted(p.name for p in links.iterdir()) == [
        f"{DISTRIBUTION.replace('-', '_')}-{__version__}-py3-none-any.whl",
        f"{DISTRIBUTION.replace('-', '_')}-{__version__}.tar.gz",
    ]
    backend = f'[build-system]\nrequires = ["{DISTRIBUTION}"]\nbuild-backend = "wheelforge.build_meta"\n\n'
    root = tiny(tmp_path / "tinyext", pyproject=backend + TINY_PYPROJECT)
    pin = tmp_path / "constraints.txt"
    pin.write_text(f"torch=={importlib.metadata.version('torch').split('+')[0]}\n")
    proc = run([*PIP, "wheel", "-v", "--no-deps", "--find-links", links, "-w", tmp_path / "out", root],
               cwd=tmp_path, PIP_CONSTRAINT=str(pin), XDG_CACHE_HOME=str(tmp_path / "cache"),
               **TINY_ARCH_ENV)  # fmt: skip
    output = proc.stdout + proc.stderr
    if proc.returncode != 0 and "Could not find a version" in output:
        pytest.skip("no package index reachable")
    assert proc.returncode == 0, output[-4000:]
    # ours, not an index's (pip shows the path relative to its working folder)
    assert re.search(
        rf"Processing \S*links/{DISTRIBUTION.replace('-', '_')}-{__version__}-", output
    )
    wheel = only_wheel(tmp_path / "out")
    assert wheel.name.startswith("tinyext-0.3.0-cp310-abi3-manylinux_"), wheel.name
    with zipfile.ZipFile(wheel) as zf:
        info = json.loads(zf.read("tinyext-0.3.0.dist-info/wheelforge-build.json"))
    torch_version = importlib.metadata.version("torch")
    assert info["torch"] == {"headers_of": torch_version, "requirement": "torch>=2.10"}
    checked = run([sys.executable, "-m", "wheelforge", "check", wheel], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
