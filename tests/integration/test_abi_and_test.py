"""The stable-ABI check on real builds that break the rules, and `wheelforge test` end to end."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest

from tests.integration.helpers import REPO, Run, needs_local_torch_wheel, needs_nvcc, wheelforge

pytestmark = needs_nvcc

CPU_SOURCES = ("ops.cpp", "activation_cpu.cpp", "norm_cpu.cpp")


def cpu_project(root: Path, *, extension_extra: str = "", torch: str = ">=2.10") -> Path:
    """The kernels' CPU half only: compiles in seconds, same stable-ABI code paths."""
    shutil.copytree(REPO / "kernels" / "wheelforge_kernels", root / "pkg" / "wheelforge_kernels")
    csrc = root / "csrc"
    csrc.mkdir()
    for name in (*CPU_SOURCES, "common.h", "activation.h", "norm.h"):
        shutil.copy(REPO / "kernels" / "csrc" / name, csrc / name)
    (root / "matrix.yaml").write_text(
        "package: {name: wheelforge-kernels, version: '0.1.0', packages: [pkg/wheelforge_kernels]}\n"
        "extension:\n"
        "  name: wheelforge_kernels._C\n"
        "  sources: [csrc/*.cpp]\n"
        "  include-dirs: [csrc]\n" + extension_extra + f"torch: '{torch}'\n"
        "arch-sets: '8.0'\n"
        "tests: {path: tests, torch: ['2.13.0']}\n"
    )
    shutil.copytree(REPO / "kernels" / "tests", root / "tests")
    return root


def torch_include() -> Path:
    torch = pytest.importorskip("torch")
    return Path(torch.__file__).parent / "include"


def test_raised_target_version_fails_the_check(tmp_path: Path) -> None:
    """Flags that raise the target above the matrix's lowest torch pull in newer shims."""
    extra = "  cxx-flags: [-UTORCH_TARGET_VERSION, '-DTORCH_TARGET_VERSION=0x020d000000000000']\n"  # 2.13
    root = cpu_project(tmp_path, extension_extra=extra)
    run = wheelforge("build", cwd=root)
    assert run.code == 4, run.err  # a verification failure
    assert "uses the shim function torch_" in run.err
    assert "which torch 2.10 lacks: it arrived in torch 2.1" in run.err
    assert not (root / "dist").exists() or not list((root / "dist").iterdir())


def test_torch_extension_h_fails_the_check(tmp_path: Path) -> None:
    root = tmp_path
    shutil.copytree(REPO / "kernels" / "wheelforge_kernels", root / "pkg" / "wheelforge_kernels")
    (root / "csrc").mkdir()
    (root / "csrc" / "legacy.cpp").write_text(
        "#include <torch/extension.h>\n"
        "at::Tensor twice(const at::Tensor& x) { return x * 2; }\n"
        'TORCH_LIBRARY(legacy_ops, m) { m.def("twice(Tensor x) -> Tensor", &twice); }\n'
    )
    api = torch_include() / "torch" / "csrc" / "api" / "include"
    (root / "matrix.yaml").write_text(
        "package: {name: legacy, version: '1.0', packages: [pkg/wheelforge_kernels]}\n"
        # torch >= 2.13 refuses torch/extension.h under TORCH_TARGET_VERSION, and pybind11 needs
        # the full Python API: a project mixing the two APIs ends up undefining both.
        f"extension: {{name: wheelforge_kernels._C, sources: [csrc/legacy.cpp], include-dirs: ['{api}'],"
        f" cxx-flags: [-UTORCH_TARGET_VERSION, -UPy_LIMITED_API, '-I{sysconfig.get_paths()['include']}']}}\n"
        "torch: '>=2.10'\narch-sets: '8.0'\n"
    )
    run = wheelforge("build", cwd=root)
    assert run.code == 4, run.err  # a verification failure
    # One symbol: its own line; several: one line with their count (issue 33).
    assert "a C++ symbol of libtorch" in run.err or "C++ symbols of libtorch (" in run.err
    assert "torch::Library" in run.err or "at::Tensor" in run.err or "c10::" in run.err


def test_check_command_on_a_wheel_built_for_a_newer_target(tmp_path: Path) -> None:
    """A wheel built for torch >= 2.13 passes as such, and fails when asked about 2.10."""
    root = cpu_project(tmp_path, torch=">=2.13")
    built = wheelforge("build", cwd=root)
    assert built.code == 0, built.err
    wheel = next((root / "dist").glob("*.whl"))
    ok = wheelforge("check", wheel, "--json", cwd=root)
    assert ok.code == 0, ok.err
    report = json.loads(ok.out)
    assert report["binaries"][0]["violations"] == []
    assert report["binaries"][0]["newest_shim"] == "2.13"
    bad = wheelforge("check", wheel, "--target", "2.10", cwd=root)
    assert bad.code == 4
    # The verdict is the last line, its other violations above it (log.error).
    assert bad.err.splitlines()[-1].startswith("error: ") and "which torch 2.10 lacks" in bad.err


@pytest.mark.slow  # creates a torch 2.13 environment: a minute or more of pip, ~1 GB
@needs_local_torch_wheel
def test_wheelforge_test_runs_the_suite_in_an_isolated_env(
    tmp_path: Path, shared_cache: Path
) -> None:
    root = cpu_project(tmp_path / "p")
    assert wheelforge("build", cwd=root).code == 0
    run = wheelforge("test", "--json", "--cache-dir", shared_cache, cwd=root)
    assert run.code == 0, run.err
    [outcome] = json.loads(run.out)["runs"]
    assert outcome["status"] == "passed" and outcome["torch"].startswith("2.13.0")
    # CPU tests pass; CUDA tests are reported as skipped, not passed, without a GPU.
    assert outcome["passed"] >= 70 and outcome["skipped"] >= 70 and outcome["failed"] == 0
    # A second run reuses the environment; a broken wheel makes the command fail.
    (root / "tests" / "test_ops.py").write_text(
        (root / "tests" / "test_ops.py").read_text()
        + "\n\ndef test_planted_failure():\n    assert False\n"
    )
    again: Run = wheelforge("test", "--cache-dir", shared_cache, cwd=root)
    assert again.code == 4
    assert "create the torch" not in again.err
    assert "1 failed" in again.out
