"""Header libraries in a real git superproject (issue 19): the commit its gitlink pins for a
submodule, asked of git, named when the checkout is at another one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.model import HeaderLibraryConfig
from wheelforge.foundation import gitfiles
from wheelforge.toolchain import headerlibs


def test_the_gitlink_the_superproject_pins_is_named_when_it_differs(tmp_path: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"]
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "include").mkdir()
    (sub / "include" / "a.h").write_text("1\n")
    subprocess.run([*git, "init", "-q", "-b", "main", str(sub)], check=True)
    subprocess.run([*git, "-C", str(sub), "add", "."], check=True)
    subprocess.run([*git, "-C", str(sub), "commit", "-qm", "one"], check=True)
    first = subprocess.run(
        [*git, "-C", str(sub), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    top = tmp_path / "top"
    top.mkdir()
    subprocess.run([*git, "init", "-q", "-b", "main", str(top)], check=True)
    subprocess.run(
        [*git, "-C", str(top), "submodule", "add", "-q", str(sub), "csrc/sub"], check=True
    )
    subprocess.run([*git, "-C", str(top), "commit", "-qm", "pin"], check=True)
    checkout = top / "csrc" / "sub"
    (checkout / "include" / "a.h").write_text("2\n")
    subprocess.run([*git, "-C", str(checkout), "commit", "-qam", "two"], check=True)
    second = gitfiles.git_commit(checkout)
    assert second is not None and second != first
    url, pinned = headerlibs._superproject_facts(checkout, top, second, "header-libraries[0]")
    assert pinned == first and url == str(sub)


@pytest.mark.network
def test_a_pypi_library_is_downloaded_once_and_read_offline(tmp_path: Path) -> None:
    """nvidia-cutlass ships CUTLASS's headers under cutlass_library/source/."""
    config = HeaderLibraryConfig(
        name="cutlass",
        pypi="nvidia-cutlass==4.2.0.0",
        include=("cutlass_library/source/include",),
    )
    cache = tmp_path / "cache"
    [found] = headerlibs.resolve([config], root=tmp_path, cache=cache, download=True, offline=False)
    assert found.root == cache / "header-libraries" / "nvidia-cutlass-4.2.0.0"
    assert (found.include_dirs[0] / "cutlass" / "version.h").is_file()
    assert found.version == "4.2.0.0" and found.purl == "pkg:pypi/nvidia-cutlass@4.2.0.0"
    [again] = headerlibs.resolve([config], root=tmp_path, cache=cache, download=False, offline=True)
    assert again.digest == found.digest and again.digest is not None
