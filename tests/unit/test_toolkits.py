"""Toolkit recipes and discovery on fake trees: no nvcc runs (the probe is replaced)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.configuration.releases import DebianSource
from wheelforge.toolchain import provision
from wheelforge.toolchain import toolkits as toolkit
from wheelforge.toolchain.toolkits import Toolkit


def test_the_12_4_recipe_pins_trixie_and_uses_the_system_gcc() -> None:
    recipe = provision.recipe_for("12.4")
    assert recipe is not None and recipe.source == "debian" and recipe.folder == "cuda-12.4-debian"
    assert "Debian trixie non-free" in recipe.describe() and "sm_50 to sm_90" in recipe.describe()
    how = recipe.how
    assert isinstance(how, DebianSource) and how.suite == "trixie" and how.host_cxx is None
    pins = dict(p.split("=", 1) for p in how.packages)
    assert pins["nvidia-cuda-toolkit"] == "12.4.131~12.4.1-2"
    assert pins["libcub-dev"] == "2.3.2-2"  # CCCL 2.3: CUB's debug_synchronous overloads
    assert "non-free" in provision.apt_sources(how) and " trixie " in provision.apt_sources(how)
    old = provision.recipe_for("11.8")
    assert old is not None and isinstance(old.how, DebianSource)
    assert old.how.host_cxx == "usr/bin/g++-11"


def test_relocating_a_debian_tree_never_writes_through_its_etc_link(tmp_path: Path) -> None:
    """Debian's nvcc.profile is a link to /etc/nvcc.profile: writing it in place would write
    outside the cache (here a file standing in for /etc/nvcc.profile)."""
    prefix = tmp_path / "prefix"
    bin_dir = prefix / "usr" / "lib" / "nvidia-cuda-toolkit" / "bin"
    libs = prefix / "usr" / "lib" / "x86_64-linux-gnu"
    bin_dir.mkdir(parents=True)
    libs.mkdir(parents=True)
    etc = tmp_path / "etc-nvcc.profile"
    (bin_dir / "nvcc.profile").symlink_to(etc)
    for name in ("nvcc", "g++", "gcc"):
        (bin_dir / name).write_text("#!/bin/sh\n")
    for name in ("libcudart_static.a", "libcublasLt_static.a", "libnvJitLink.so.12"):
        (libs / name).write_text("")
    nvcc = provision.relocate_debian(prefix, ("libcublas", "libnvJitLink"))
    assert nvcc == {"nvcc": "usr/lib/nvidia-cuda-toolkit/bin/nvcc"}
    assert not etc.exists() and not (bin_dir / "nvcc.profile").is_symlink()
    assert "$(_HERE_)" in (bin_dir / "nvcc.profile").read_text()
    assert sorted(p.name for p in bin_dir.iterdir()) == ["nvcc", "nvcc.profile"]
    assert [p.name for p in libs.iterdir()] == ["libcudart_static.a"]


def _nvcc(path: Path, release: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n# fake nvcc {release}\n")
    path.chmod(0o755)
    return path


def _fake_probe(nvcc: Path, *, origin: str = "", host_cxx: Path | None = None, cache: Path | None = None) -> Toolkit:  # fmt: skip
    release = nvcc.read_text().split()[-1]
    return Toolkit(nvcc=nvcc, root=nvcc.parent.parent, version=Version(release), sass=frozenset({80}),
                   cudart_static=None, host_cxx=host_cxx, origin=origin)  # fmt: skip


def test_discovery_finds_every_12x_and_13x_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """/usr/local/cuda-12.*, $CUDA_HOME, a conda prefix ($CONDA_PREFIX: bin/nvcc, the files under
    targets/x86_64-linux) and NVIDIA's PyPI layout in the build Python's site-packages."""
    monkeypatch.setattr(toolkit, "probe_toolkit", _fake_probe)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "none" / "bin" / "python"))
    _nvcc(tmp_path / "usr/local/cuda-12.4/bin/nvcc", "12.4.131")
    _nvcc(tmp_path / "usr/local/cuda-12.8/bin/nvcc", "12.8.93")
    home = _nvcc(tmp_path / "sdk/cuda-12.6/bin/nvcc", "12.6.85").parent.parent
    conda = _nvcc(tmp_path / "conda/envs/cu129/bin/nvcc", "12.9.86").parent.parent
    (conda / "targets" / "x86_64-linux" / "include").mkdir(parents=True)
    venv = tmp_path / "venv"
    _nvcc(venv / "lib/python3.12/site-packages/nvidia/cu13/bin/nvcc", "13.0.88")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")  # a venv's python: never resolved
    env = {"CUDA_HOME": str(home), "CONDA_PREFIX": str(conda), "PATH": ""}
    found = toolkit.discover(env, pythons=[venv / "bin" / "python"],
                             globs=[str(tmp_path / "usr/local/cuda-*/bin/nvcc")])  # fmt: skip
    assert [(str(t.version), t.origin) for t in found] == [
        ("13.0.88", f"PyPI ({venv / 'lib/python3.12/site-packages'})"),
        ("12.9.86", "$CONDA_PREFIX"),
        ("12.8.93", str(tmp_path / "usr/local/cuda-*/bin/nvcc")),
        ("12.6.85", "$CUDA_HOME"),
        ("12.4.131", str(tmp_path / "usr/local/cuda-*/bin/nvcc")),
    ]


def test_discovery_keeps_one_entry_per_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The same toolkit through $CUDA_HOME, the PATH and a glob is one toolkit, named by the
    first way it was found; an unset $CONDA_PREFIX or one without nvcc is no error."""
    monkeypatch.setattr(toolkit, "probe_toolkit", _fake_probe)
    nvcc = _nvcc(tmp_path / "usr/local/cuda-12.4/bin/nvcc", "12.4.131")
    env = {
        "CUDA_HOME": str(nvcc.parent.parent),
        "PATH": str(nvcc.parent),
        "CONDA_PREFIX": str(tmp_path),
    }
    found = toolkit.discover(env, globs=[str(tmp_path / "usr/local/cuda-*/bin/nvcc")])
    assert [(str(t.version), t.origin) for t in found] == [("12.4.131", "$CUDA_HOME")]


def test_site_packages_from_the_interpreter_path_alone(tmp_path: Path) -> None:
    (tmp_path / "lib/python3.11/site-packages").mkdir(parents=True)
    (tmp_path / "lib/python3/dist-packages").mkdir(parents=True)
    assert toolkit.site_packages(tmp_path / "bin" / "python3") == [
        tmp_path / "lib/python3.11/site-packages",
        tmp_path / "lib/python3/dist-packages",
    ]


def test_nvcc_options_are_read_from_its_help() -> None:
    """--split-compile and --jobserver as `nvcc --help` (13.0) lists them; --split-compile-extended
    alone is not --split-compile."""
    from wheelforge.toolchain.toolkits import _OPTION_RE

    help_text = (
        "--split-compile <number>                            (-split-compile)\n"
        "        Specify the maximum amount of concurrent threads ...\n"
        "--jobserver                                         (-jobserver)\n"
    )
    assert _OPTION_RE["--split-compile"].search(help_text)
    assert _OPTION_RE["--jobserver"].search(help_text)
    extended_only = "--split-compile-extended <number>       (-split-compile-extended)\n"
    assert not _OPTION_RE["--split-compile"].search(extended_only)
    assert not _OPTION_RE["--jobserver"].search("        Enable --jobserver support\n")
