"""The quick no-op (cli/quicknoop.py) on real builds of the bundled kernels: a build
that changed nothing is answered from the record of the last identical no-op, with the same
screen and without click, rich, PyYAML or the planning layer; every kind of change the full
path would see sends it down the full path. Whether a run took the quick path is read from the
modules it imported (no timing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.helpers import REPO, copy_kernels, needs_nvcc, only_wheel
from wheelforge.foundation.cachehome import RECORDS, default_cache

pytestmark = needs_nvcc

ARCHS = "8.0"
# None of these is imported by a quick no-op: the CLI's libraries and every layer above
# foundation.
HEAVY = (
    "click",
    "rich",
    "yaml",
    "packaging",
    "filelock",
    "wheelforge.cli.app",
    "wheelforge.configuration",
    "wheelforge.toolchain",
    "wheelforge.planning",
    "wheelforge.binaries",
    "wheelforge.packaging",
    "wheelforge.adoption",
    "wheelforge.build",
    "wheelforge.documents",
)


@dataclass(frozen=True)
class Outcome:
    code: int
    quick: bool  # answered by the record: nothing of HEAVY imported
    heavy: tuple[str, ...]
    out: str
    err: str


def build(root: Path, *args: str, env: dict[str, str] | None = None) -> Outcome:
    """``wheelforge build --archs ARCHS ARGS`` through the console script's entry, in a fresh
    interpreter whose wheelforge is *src* (PYTHONPATH), as a user runs it."""
    listed = root.parent / f"modules-{root.name}.json"
    code = (
        "import json, sys\n"
        "from wheelforge.cli.entry import main\n"
        f"status = main(['build', '--archs', {ARCHS!r}, *{list(args)!r}])\n"
        "sys.stdout.flush(); sys.stderr.flush()\n"
        f"open({str(listed)!r}, 'w').write(json.dumps([status, sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "120", **(env or {})})  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    status, modules = json.loads(listed.read_text())
    heavy = tuple(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))
    return Outcome(status, not heavy, heavy, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of wheelforge's own source, so a test can change it (an editable install)."""
    src = tmp_path_factory.mktemp("wheelforge-src")
    shutil.copytree(REPO / "src" / "wheelforge", src / "wheelforge",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    return src


@pytest.fixture(scope="module")
def env(source: Path) -> dict[str, str]:
    # No empty entry: one is the current folder, which the torch probe's answer would rest on
    # (its child's temporary folder: never the same twice).
    given = [str(source), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(given)}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    root = copy_kernels(tmp_path_factory.mktemp("quick") / "p")
    first = build(root, env=env)
    assert first.code == 0, first.err
    return root


def settled(root: Path, env: dict[str, str], *args: str) -> tuple[Outcome, Outcome]:
    """Full runs until one is recorded, then the quick one: (the last full no-op, the quick)."""
    full = build(root, *args, env=env)
    for _ in range(3):
        quick = build(root, *args, env=env)
        if quick.quick:
            return full, quick
        full = quick
    raise AssertionError(f"never answered quickly; imported {full.heavy[:5]}:\n{full.err}")


@pytest.fixture
def noop(project: Path, env: dict[str, str]) -> Iterator[Path]:
    settled(project, env)
    yield project


def test_a_noop_is_quick_and_prints_what_the_full_path_printed(
    project: Path, env: dict[str, str]
) -> None:
    full, quick = settled(project, env)
    assert full.code == quick.code == 0
    assert "nothing to compile: up to date" in full.err and "is up to date" in full.err
    assert (quick.out, quick.err) == (full.out, full.err)


def test_quiet_prints_what_the_full_path_printed(project: Path, env: dict[str, str]) -> None:
    full, quick = settled(project, env, "--quiet")
    assert quick.out == full.out and quick.err == full.err
    assert quick.out.strip() == str(only_wheel(project / "dist"))


def test_a_source_touched_is_built(noop: Path, env: dict[str, str]) -> None:
    source = noop / "kernels" / "csrc" / "ops.cpp"
    source.write_text(source.read_text() + "\n// touched by the quick no-op test\n")
    run = build(noop, env=env)
    assert not run.quick and run.code == 0, run.err
    assert "nothing to compile: up to date" not in run.err


def test_a_matrix_edit_is_seen(noop: Path, env: dict[str, str]) -> None:
    matrix = noop / "matrix.yaml"
    matrix.write_text(matrix.read_text() + "\n# edited\n")
    run = build(noop, env=env)
    assert not run.quick and run.code == 0, run.err


def test_an_environment_variable_is_seen(noop: Path, env: dict[str, str]) -> None:
    run = build(noop, env={**env, "WHEELFORGE_MEMORY_LIMIT": "64GiB"})
    assert not run.quick and run.code == 0, run.err


def test_a_flag_added_is_seen(noop: Path, env: dict[str, str]) -> None:
    run = build(noop, "--no-import-check", env=env)
    assert not run.quick and run.code == 0, run.err


@pytest.mark.parametrize("flag", ["--report=-", "-v", "--dry-run"])
def test_flags_whose_output_is_not_the_record_take_the_full_path(
    noop: Path, env: dict[str, str], flag: str
) -> None:
    for _ in range(2):
        run = build(noop, flag, env=env)
        assert not run.quick and run.code == 0, run.err


def test_a_deleted_wheel_is_built_again(noop: Path, env: dict[str, str]) -> None:
    only_wheel(noop / "dist").unlink()
    run = build(noop, env=env)
    assert not run.quick and run.code == 0, run.err
    assert only_wheel(noop / "dist").is_file()


def test_a_replaced_wheel_is_seen(noop: Path, env: dict[str, str]) -> None:
    wheel = only_wheel(noop / "dist")
    data = wheel.read_bytes()
    wheel.unlink()
    wheel.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # other bytes, same name and size
    run = build(noop, env=env)
    assert not run.quick, run.err
    assert only_wheel(noop / "dist").read_bytes() != data[:-1] + bytes([data[-1] ^ 1])


def test_wheelforge_changed_is_seen(noop: Path, env: dict[str, str], source: Path) -> None:
    module = source / "wheelforge" / "foundation" / "numbers.py"
    module.write_text(module.read_text() + "\n# an edit of an editable install\n")
    run = build(noop, env=env)
    assert not run.quick and run.code == 0, run.err


def test_the_record_watches_torch_and_the_toolkit(noop: Path, env: dict[str, str]) -> None:
    """What the probes' answers rest on is in the record: torch's version file and nvcc (a
    changed torch or toolkit changes their stat, and the full path asks again)."""
    # The newest record of a build of this project (the module's tests share it, each command
    # its own record; the user cache may hold other projects' too).
    files = sorted((default_cache() / RECORDS).glob("*.json"),
                   key=lambda p: p.stat().st_mtime)  # fmt: skip
    ours = [r for r in (json.loads(f.read_text()) for f in files)
            if any(p.startswith(str(noop)) for p in r["stat"])]  # fmt: skip
    assert ours, "no record of this project's builds"
    record = ours[-1]
    watched = set(record["stat"]) | set(record["read"])
    assert any(p.endswith("/torch/version.py") for p in watched), sorted(watched)[:20]
    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    assert os.path.realpath(nvcc) in watched or nvcc in watched
