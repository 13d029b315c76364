"""Issue 39 item 2 with a real build: a project copied with its build folder (``cp -a``, a CI
cache restored elsewhere) gives the same wheel as the original, its SBOM naming every source
(the stamps of the copied folder named the old project's files, and the SBOM lost those); a
build folder's stored findings, edited, are only a reason to verify again."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from tests.integration.helpers import needs_nvcc, only_wheel, wheelforge
from tests.integration.helpers import one_kernel_project as tiny_project

pytestmark = needs_nvcc

ARGS = ("build", "--archs", "8.0", "--no-import-check", "--compile-cache", "none")


def _sbom_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        [name] = [n for n in zf.namelist() if n.endswith(".cdx.json")]
        sbom = json.loads(zf.read(name))
    return sorted(c["name"] for c in sbom["components"] if c.get("type") == "file")


def test_a_copied_build_folder_gives_the_same_wheel(tmp_path: Path, shared_cache: Path) -> None:
    first = tiny_project(tmp_path / "first")
    run = wheelforge(*ARGS, "--cache-dir", shared_cache, cwd=first)
    assert run.code == 0, run.err
    made = only_wheel(first / "dist")
    assert "csrc/ops.cpp" in _sbom_files(made) and "csrc/scale.cu" in _sbom_files(made)

    copy = tmp_path / "copy"
    shutil.copytree(first, copy, symlinks=True)  # cp -a: the stamps and mtimes come along
    run = wheelforge(*ARGS, "--cache-dir", shared_cache, "-v", cwd=copy)
    assert run.code == 0, run.err
    assert "ninja decides what is up to date" in run.out + run.err
    again = only_wheel(copy / "dist")
    assert _sbom_files(again) == _sbom_files(made)
    assert again.read_bytes() == made.read_bytes()
    for stamp in (copy / "build").rglob("up-to-date.json"):
        assert str(first) not in stamp.read_text(), stamp

    # The stored findings of the copy, tampered with: verified again, the same wheel.
    [verified] = (copy / "build").rglob("wheel-verified.json")
    verified.write_text(json.dumps({"found": "__import__('os').system('false')"}))
    run = wheelforge(*ARGS, "--cache-dir", shared_cache, cwd=copy)
    assert run.code == 0, run.err
    assert only_wheel(copy / "dist").read_bytes() == made.read_bytes()
