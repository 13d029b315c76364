"""Header libraries in a real git superproject (issue 19): the commit its gitlink pins for a
submodule, asked of git, named when the checkout is at another one."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
    second = headerlibs.git_commit(checkout)
    assert second is not None and second != first
    url, pinned = headerlibs._superproject_facts(checkout, top, second, "header-libraries[0]")
    assert pinned == first and url == str(sub)
