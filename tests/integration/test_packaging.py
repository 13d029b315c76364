"""The bundled kernels as a PEP 517 project (pip wheel, python -m build --sdist), and PEP 825
variant wheels built from them, with the real nvcc, ninja, auditwheel and pip.

One arch (sm_75) keeps the compile short; the variant build reuses the objects of the pip build
(same variant id, same build folder), so it only packs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from variantlib.variant_dist_info import VariantDistInfo

from tests.integration.helpers import REPO, needs_nvcc
from wheelforge import build_meta

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


@pytest.mark.network
@pytest.mark.slow
def test_pip_wheel_with_build_isolation(kernels: Path, tmp_path: Path) -> None:
    """Build isolation: wheelforge from a local wheel (--find-links), torch from the index, as
    get_requires_for_build_wheel asks for it."""
    links = tmp_path / "links"
    made = run([*PIP, "wheel", "--no-deps", "-w", links, REPO], cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proc = run([*PIP, "wheel", "--no-deps", "--find-links", links, "-w", tmp_path / "out", kernels],
               cwd=tmp_path, TORCH_CUDA_ARCH_LIST=ARCHS)  # fmt: skip
    if proc.returncode != 0 and "Could not find a version" in proc.stdout + proc.stderr:
        pytest.skip("no package index reachable")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    [wheel] = (tmp_path / "out").glob("*.whl")
    assert wheel.name.startswith("wheelforge_kernels-0.1.0-cp310-abi3-")
