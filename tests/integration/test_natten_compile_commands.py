"""NATTEN 0.21.6 from its PyPI sdist (issue 40 item 3): a setup.py whose build_ext runs its
autogen scripts, then configures CMake in csrc/. ``wheelforge init`` goes through the CMake door
for csrc/ with the -D arguments setup.py passes; its matrix's ``build --dry-run`` compile commands
equal those NATTEN's own CMake writes to compile_commands.json, source by source, but for what
wheelforge adds to every CUDA torch build (below, each with its reason)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import needs_local_torch_wheel, needs_nvcc, wheelforge

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import compile_commands_diff as diff

pytestmark = [needs_nvcc, needs_local_torch_wheel, pytest.mark.network, pytest.mark.slow]

_OFFLINE = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution")
# What wheelforge adds to every build against a CUDA torch and NATTEN's CMake, which names
# torch's include folders itself rather than linking torch's CMake target, does not:
# USE_CUDA (torch's CUDA-only declarations; torch's CMake target defines it too), the CUDA
# headers of torch's pip wheels (nvidia/*/include, as torch's cpp_extension names them) and, in
# its one C++ source, the toolkit's include folders (as CUDAExtension adds them). And init
# configures CMake as Release where setup.py names no build type (it does only on Windows): its
# C++ source gets CMake's Release -O3 -DNDEBUG, which NATTEN's pip build on Linux leaves out.
REASONED = {
    ("define", "", "-DUSE_CUDA"),
    ("include", "", "pip-cuda"),
    ("include", "", "toolkit pip-cuda"),
    ("define", "", "-DNDEBUG"),
    ("flag", "", "-O3"),
}


def _short(row: tuple[str, ...], toolkit: Path) -> tuple[str, str, str]:
    def kind(word: str) -> str:
        if "/nvidia/" in word:
            return "pip-cuda"
        return "toolkit" if word.startswith(str(toolkit)) else word

    def words(text: str) -> str:
        return " ".join(dict.fromkeys(kind(w) for w in text.split()))

    return (row[1], words(row[2]), words(row[3]))


def test_natten_is_adopted_through_its_cmake_and_compiles_as_it_does(tmp_path: Path) -> None:
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake and ninja")
    download = tmp_path / "sdist"
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "--no-build-isolation", "--disable-pip-version-check", "-d", download, "natten==0.21.6"],
        capture_output=True, text=True,
    )  # fmt: skip
    if got.returncode != 0:
        if any(m in got.stdout + got.stderr for m in _OFFLINE):
            pytest.skip("natten==0.21.6 can't be downloaded here (offline?)")
        pytest.fail(got.stdout[-2000:] + got.stderr[-2000:])
    [sdist] = download.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    project = tmp_path / "natten-0.21.6"
    env = {"NATTEN_CUDA_ARCH": "8.0"}  # what its setup.py reads without a GPU

    run = wheelforge("init", "--torch", "2.13.0", cwd=project, env=env)
    assert run.code == 0, run.err
    configure = re.search(r"command cmake (\S+) (.*) \(setup\.py:\d+\)", run.err)
    assert configure is not None and configure[1] == str(project / "csrc"), run.err
    matrix = yaml.safe_load((project / "matrix.yaml").read_text())
    ext = matrix["extension"]
    assert ext["name"] == "natten.libnatten"
    sources = [s["files"] if isinstance(s, dict) else s for s in ext["sources"]]
    assert len(sources) == 87
    assert sum(1 for s in sources if s.startswith("csrc/autogen/")) == 72  # its scripts wrote
    assert matrix["package"]["packages"] == ["src/natten"]  # packages.find where = ["src/"]
    assert matrix["header-libraries"][0]["path"] == "third_party/cutlass"
    assert matrix["arch-sets"] == {"default": "8.0"}

    # NATTEN's own CMake, configured as its setup.py does (the autogen files init's run wrote)
    own = tmp_path / "own"
    shutil.copytree(project, own)
    (own / "matrix.yaml").unlink()
    args = [a.replace(str(project), str(own)) for a in shlex.split(configure[2])]
    configured = subprocess.run(
        ["cmake", "-S", own / "csrc", "-B", own / "build", "-G", "Ninja",
         "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *args],
        capture_output=True, text=True, env={**os.environ, **env},
    )  # fmt: skip
    assert configured.returncode == 0, configured.stdout[-3000:] + configured.stderr[-3000:]
    commands = tmp_path / "compile_commands.json"
    commands.write_text(
        (own / "build" / "compile_commands.json").read_text().replace(str(own), str(project))
    )
    theirs = diff.cmake_compiles(commands, project.resolve(), ["natten"])
    ours = diff.wheelforge_compiles(project.resolve(), sys.executable)
    assert len(theirs) == 87 and set(theirs) == set(ours)
    nvcc = Path(shutil.which("nvcc") or "nvcc").resolve()
    toolkit = Path(os.path.realpath(nvcc)).parent.parent
    found = diff.differences(theirs, ours)
    rows = {_short(r, toolkit) for r in found}
    assert rows <= REASONED, rows - REASONED
    release = {r[0] for r in found if r[3] in ("-O3", "-DNDEBUG")}
    assert release <= {"csrc/natten.cpp"}, release  # its CUDA flags name -O3 themselves
