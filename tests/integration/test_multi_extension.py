"""A wheel with several shared objects (issue 19), built with the real nvcc, ninja and
auditwheel: two modules and a library of operators from one matrix, each with its own line in
the summary and the report, each loaded by the import check the way its user loads it, every
one held to the stable-ABI rules by ``check``; a no-op rebuild compiles nothing; one shared
object over its own budget fails the variant naming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import REPO, needs_nvcc

pytestmark = needs_nvcc
PROJECT = Path(__file__).parent / "projects" / "vllmlike"


def wheelforge(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "wheelforge", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("vllmlike")
    shutil.copytree(PROJECT, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "kernels" / "csrc", root / "csrc")
    return root, wheelforge("build", "--report", root / "report.json", cwd=root)


def test_one_wheel_carries_every_shared_object(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, run = built
    assert run.returncode == 0, run.stderr
    [wheel] = sorted((root / "dist").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    assert {"vllmlike/_C.abi3.so", "vllmlike/moe/_moe_C.abi3.so", "vllmlike/_ops.so"} <= names
    # The summary: one line per shared object, with its role, size, budget and import check.
    assert "3 shared objects:" in run.stdout
    assert "vllmlike/_C.abi3.so (module, " in run.stdout
    assert "import vllmlike._C ok under torch" in run.stdout
    assert "vllmlike/moe/_moe_C.abi3.so (module, " in run.stdout and " of 2.0 MiB)" in run.stdout
    assert "torch.ops.load_library('vllmlike/_ops.so') ok under torch" in run.stdout
    assert "MISSING" not in run.stdout  # the C++-only module owes no arch


def test_the_report_has_each_shared_object(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, run = built
    assert run.returncode == 0, run.stderr
    [variant] = json.loads((root / "report.json").read_text())["variants"]
    shared = {s["name"]: s for s in variant["shared_objects"]}
    assert [s["role"] for s in variant["shared_objects"]] == ["extension", "extension", "library"]
    assert shared["vllmlike.moe._moe_C"]["budget"] == 2 * 1024 * 1024
    assert shared["vllmlike._ops"]["loaded"].startswith("torch.ops.load_library(")
    assert all(s["size"] > 0 for s in variant["shared_objects"])
    sizes = {Path(s["binary"].split("!")[-1]).name for s in variant["size"]["shared_objects"]}
    assert sizes == {"_C.abi3.so", "_moe_C.abi3.so", "_ops.so"}


def test_check_holds_every_one_to_the_rules(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, _ = built
    [wheel] = sorted((root / "dist").glob("*.whl"))
    run = wheelforge("check", "--json", wheel, cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    binaries = {
        Path(b["path"].split("!")[-1]).as_posix() for b in json.loads(run.stdout)["binaries"]
    }
    assert binaries == {"vllmlike/_C.abi3.so", "vllmlike/moe/_moe_C.abi3.so", "vllmlike/_ops.so"}


def test_a_no_op_rebuild_compiles_nothing(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, first = built
    assert first.returncode == 0, first.stderr
    again = wheelforge("build", cwd=root)
    assert again.returncode == 0, again.stderr
    assert "nothing to compile: up to date" in again.stderr + again.stdout


def test_one_shared_object_over_its_own_budget_fails_naming_it(
    built: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, first = built
    assert first.returncode == 0, first.stderr
    matrix = root / "matrix.yaml"
    text = matrix.read_text()
    matrix.write_text(text.replace("size-budget: 2MiB", "size-budget: 1KiB"))
    try:
        run = wheelforge("build", "--out", root / "dist-over", cwd=root)
    finally:
        matrix.write_text(text)
    assert run.returncode == 4, run.stdout + run.stderr
    assert "vllmlike/moe/_moe_C.abi3.so is " in run.stderr
    assert "over its size budget of 1.0 KiB" in run.stderr
    assert "extensions[1].size-budget" in run.stderr
