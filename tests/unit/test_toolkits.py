"""Toolkit recipes and discovery on fake trees: no nvcc runs (the probe is replaced)."""

from __future__ import annotations

import os
from pathlib import Path

from wheelforge.toolchain import provision


def test_the_12_4_recipe_pins_trixie_and_uses_the_system_gcc() -> None:
    recipe = provision.recipe_for("12.4")
    assert recipe is not None and recipe.source == "debian" and recipe.folder == "cuda-12.4-debian"
    assert "Debian trixie non-free" in recipe.describe() and "sm_50 to sm_90" in recipe.describe()
    debian = provision._DEBIAN["12.4"]
    assert debian.suite == "trixie" and debian.host_cxx is None
    pins = dict(p.split("=", 1) for p in debian.packages)
    assert pins["nvidia-cuda-toolkit"] == "12.4.131~12.4.1-2"
    assert pins["libcub-dev"] == "2.3.2-2"  # CCCL 2.3: CUB's debug_synchronous overloads
    assert provision._DEBIAN["11.8"].host_cxx == "usr/bin/g++-11"


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
    assert provision.relocate_debian(prefix) == {"nvcc": "usr/lib/nvidia-cuda-toolkit/bin/nvcc"}
    assert not etc.exists() and not os.path.islink(bin_dir / "nvcc.profile")
    assert "$(_HERE_)" in (bin_dir / "nvcc.profile").read_text()
    assert sorted(p.name for p in bin_dir.iterdir()) == ["nvcc", "nvcc.profile"]
    assert [p.name for p in libs.iterdir()] == ["libcudart_static.a"]
