"""Provisioning a CUDA release from PyPI's nvidia-* packages, without the network: the test
builds a package index (a PEP 503 folder) of small stand-in wheels of the packages the release
table names for CUDA 13.1, and points pip at it the way a user points pip at a mirror
(``PIP_INDEX_URL``; the machine's pip configuration is left out). Everything else is real:
``wheelforge toolkit install`` runs pip download, unpacks the wheels, records each one's
sha256 in toolkit.json and probes the nvcc it found (a stand-in that answers --version and
--list-gpu-code as 13.1's does and compiles nothing).

The real packages (110 MB) and a real CUDA 13.1 build are test_toolkits.py's
``test_two_toolkits_two_arch_sets_make_four_distinct_wheels``, marked ``network``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import zipfile
from pathlib import Path

from tests.integration.helpers import wheelforge
from wheelforge.configuration.releases import PypiSource
from wheelforge.toolchain import provision

RELEASE = "13.1"
RECIPE = provision.recipe_for(RELEASE)
assert RECIPE is not None and isinstance(RECIPE.how, PypiSource)
HOW: PypiSource = RECIPE.how
FOLDER = f"toolkits/{RECIPE.folder}"

# What 13.1's nvcc says (nvidia-cuda-nvcc 13.1.115), and the archs of the release table's entry.
STANDIN_NVCC = """\
#!/bin/sh
case "$1" in
  --version) printf 'nvcc: NVIDIA (R) Cuda compiler driver\\nCuda compilation tools, release 13.1, V13.1.115\\nBuild cuda_13.1.r13.1/compiler.0_0\\n' ;;
  --list-gpu-code) echo sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_103 sm_110 sm_120 sm_121 ;;
  --dryrun) ;;
  *) echo "a test's stand-in nvcc: it compiles nothing" >&2; exit 1 ;;
esac
"""


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def standin_wheel(folder: Path, project: str, version: str, members: dict[str, bytes]) -> Path:
    """A wheel of *project* holding *members*, with its METADATA, WHEEL and RECORD."""
    dist = f"{project.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    files = {
        **members,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def package_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 index of *wheels* under *root*/simple: one page per project, each link with its
    sha256 (as pip checks it). Returns the index's URL."""
    for wheel in wheels:
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        link = f'<a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n'
        with (page / "index.html").open("a") as html:
            html.write(link)
    return (root / "simple").as_uri()


def release_wheels(files: Path, *, without: str = "", nvcc: bool = True) -> list[Path]:
    """Stand-ins of the packages the release table names for 13.1, each at the exact version
    data/cuda-pypi.json pins (and a 13.2 nvcc beside, which the pin must pass over); *without*
    leaves one package out."""
    files.mkdir(parents=True, exist_ok=True)
    wheels = []
    versions = dict(pin.split("==") for pin in RECIPE.pins)
    for project in HOW.packages:
        if project == without:
            continue
        members = {f"nvidia/cu13/share/{project}.txt": f"{project}\n".encode()}
        if project == "nvidia-cuda-nvcc" and nvcc:
            members[HOW.nvcc] = STANDIN_NVCC.encode()
        wheels.append(standin_wheel(files, project, versions[project], members))
    wheels.append(standin_wheel(files, "nvidia-cuda-nvcc", "13.2.86", {HOW.nvcc: b"#!/bin/sh\n"}))
    return wheels


def offline_pip(index: str) -> dict[str, str]:
    """pip asks *index* only: no configuration file (this machine's names more indexes), no
    find-links, no extra index."""
    return {
        "PIP_INDEX_URL": index,
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        "PIP_NO_CACHE_DIR": "1",
    }


def test_toolkit_install_provisions_the_release_from_a_package_index(tmp_path: Path) -> None:
    wheels = release_wheels(tmp_path / "index" / "files")
    env = offline_pip(package_index(tmp_path / "index", wheels))
    cache = tmp_path / "cache"

    run = wheelforge("toolkit", "install", RELEASE, "--cache-dir", cache, cwd=tmp_path, env=env)
    assert run.code == 0, run.err
    assert f"download {len(HOW.packages)} packages from PyPI" in run.err
    assert "CUDA 13.1.115" in run.err, run.err  # the probe of the nvcc it unpacked

    folder = cache / FOLDER
    info = json.loads((folder / "toolkit.json").read_text())
    assert info["release"] == RELEASE and info["source"] == "pypi"
    expected = {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels[:-1]}
    assert {f["file"]: f["sha256"] for f in info["files"]} == expected  # 13.1.*, not 13.2
    nvcc = folder / HOW.nvcc
    assert nvcc.is_file() and os.access(nvcc, os.X_OK)  # wheels keep no executable bit
    assert not (folder / ".downloads").exists()
    assert all((folder / f"nvidia/cu13/share/{p}.txt").is_file() for p in HOW.packages)

    listed = wheelforge("toolkit", "list", "--cache-dir", cache, cwd=tmp_path, env=env)
    assert listed.code == 0, listed.err
    assert any("13.1" in line and "provisioned" in line for line in listed.out.splitlines())

    # Once there, it is reused: no index needed.
    gone = offline_pip((tmp_path / "nowhere").as_uri())
    again = wheelforge("toolkit", "install", RELEASE, "--cache-dir", cache, cwd=tmp_path, env=gone)
    assert again.code == 0, again.err
    assert "download" not in again.err


def _left_in(cache: Path) -> list[str]:
    toolkits = cache / "toolkits"
    if not toolkits.is_dir():
        return []
    return sorted(p.name for p in toolkits.iterdir() if not p.name.endswith(".lock"))


def test_a_package_the_index_lacks_fails_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    wheels = release_wheels(tmp_path / "index" / "files", without="nvidia-nvvm")
    env = offline_pip(package_index(tmp_path / "index", wheels))
    cache = tmp_path / "cache"
    run = wheelforge("toolkit", "install", RELEASE, "--cache-dir", cache, cwd=tmp_path, env=env)
    assert run.code == 3, run.err  # ToolError
    assert f"pip download of CUDA {RELEASE} failed" in run.err
    assert "nvidia-nvvm" in run.err  # pip's own line, in the tail shown
    assert _left_in(cache) == []


def test_wheels_without_nvcc_fail_in_one_line_and_leave_nothing(tmp_path: Path) -> None:
    wheels = release_wheels(tmp_path / "index" / "files", nvcc=False)
    env = offline_pip(package_index(tmp_path / "index", wheels))
    cache = tmp_path / "cache"
    run = wheelforge("toolkit", "install", RELEASE, "--cache-dir", cache, cwd=tmp_path, env=env)
    assert run.code == 3, run.err
    assert f"the PyPI packages of CUDA {RELEASE} hold no nvcc at" in run.err
    assert _left_in(cache) == []
