"""The fan-out workflow of docs/toolkits.md on a machine with no CUDA toolkit (every
GitHub-hosted runner): the repository's own matrix goes from ``wheelforge matrix --github``
through ``wheelforge toolkit install ${{ matrix.cuda }}`` to a built wheel, each step run as
the workflow runs it (no --cache-dir: the default cache, here under $XDG_CACHE_HOME).

This machine has CUDA 13.0 installed (/usr/local/cuda-13.0, an nvcc on the PATH, maybe
$CUDA_HOME). The test hides every toolkit wheelforge finds: CUDA_HOME and CUDA_PATH are left
out of the environment, and each command runs in a mount namespace of its own (``unshare``)
where an empty tmpfs covers each toolkit's folder and /dev/null each nvcc outside one (a
wrapper script on the PATH), so nothing of it can be run or read."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import Run, copy_kernels
from wheelforge.toolchain import provision
from wheelforge.toolchain import toolkits as toolkit

pytestmark = [pytest.mark.network, pytest.mark.slow]


def _hidden_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
    env["COLUMNS"] = "200"
    return env


def _masks(env: dict[str, str]) -> tuple[list[Path], list[Path]]:
    """The folders (each toolkit's root) and files (an nvcc outside them: a PATH wrapper) that
    hide every toolkit discovery finds with *env*."""
    folders: set[Path] = set()
    files: set[Path] = set()
    for found in toolkit.discover(env):
        folders.add(found.root.resolve())
    for folder in env.get("PATH", "").split(os.pathsep):
        nvcc = Path(folder or ".") / "nvcc"
        if nvcc.is_file() and not any(nvcc.resolve().is_relative_to(f) for f in folders):
            files.add(nvcc.resolve())
    return sorted(folders), sorted(files)


def _hiding(env: dict[str, str]) -> list[str]:
    """The command prefix that runs a command with every toolkit hidden (none where there is
    none to hide: a GitHub-hosted runner)."""
    folders, files = _masks(env)
    if not folders and not files:
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare (util-linux) is not installed")
    mounts = [f"mount -t tmpfs none '{f}'" for f in folders]
    mounts += [f"mount --bind /dev/null '{f}'" for f in files]
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    script = " && ".join([*mounts, 'exec "$@"'])
    prefix = [unshare, "--mount", "--propagation", "private", *user, "sh", "-c", script, "sh"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here to hide the toolkits in: {probe.stderr.strip()}")
    return prefix


def _run(prefix: list[str], *args: str, cwd: Path, env: dict[str, str]) -> Run:
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "wheelforge", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return Run(done.returncode, done.stdout, done.stderr)


def test_the_repository_matrix_fans_out_and_builds_with_no_toolkit_installed(
    tmp_path: Path,
) -> None:
    project = copy_kernels(tmp_path / "project")
    env = _hidden_env(tmp_path)
    hide = _hiding(env)

    # Hidden: wheelforge finds no toolkit at all.
    listed = _run(hide, "toolkit", "list", cwd=project, env=env)
    assert listed.code == 0, listed.err
    assert "to provision" in listed.out and "PATH" not in listed.out, listed.out
    assert "CUDA_HOME" not in listed.out and "/usr/local" not in listed.out, listed.out
    offered = {r.release for r in provision.RECIPES}
    for line in listed.out.splitlines():
        if "to provision" in line:
            assert line.split("│")[1].strip() in offered, line

    # plan: `wheelforge matrix --github`, one line for $GITHUB_OUTPUT.
    planned = _run(hide, "matrix", "--github", cwd=project, env=env)
    assert planned.code == 0, planned.err
    jobs = json.loads(planned.out)["include"]
    assert jobs
    for job in jobs:
        # Every release it chooses is one wheelforge can provision from data it holds.
        assert provision.recipe_for(job["cuda"]) is not None, job

        # build: `wheelforge toolkit install ${{ matrix.cuda }}`, then the build of the variant.
        installed = _run(hide, "toolkit", "install", job["cuda"], cwd=project, env=env)
        assert installed.code == 0, installed.err
        assert f"provision CUDA {job['cuda']}" in installed.err, installed.err
        report = tmp_path / f"report-{job['variant']}.json"
        built = _run(
            hide,
            "build",
            "--only",
            job["variant"],
            "--size-budget",
            "100MiB",
            "--report",
            str(report),
            cwd=project,
            env=env,
        )
        assert built.code == 0, built.err
        assert "provision" not in built.err, built.err  # the installed one was used
        document = json.loads(report.read_text())
        [variant] = document["variants"]
        assert variant["status"] == "built", variant
        assert variant["toolkit"].startswith(f"{job['cuda']}."), variant["toolkit"]
        wheel = Path(variant["wheel"]["path"])
        assert wheel.is_file() and wheel.parent == project / "dist" / job["index"]
