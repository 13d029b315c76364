from __future__ import annotations

from pathlib import Path

import pytest

from wheelforge.foundation import locks
from wheelforge.foundation.errors import EnvironmentProblem


def test_a_held_lock_refuses_a_second_holder_that_will_not_wait(tmp_path: Path) -> None:
    path = tmp_path / "build" / locks.LOCK_NAME
    # flock locks belong to open file descriptions: a second one conflicts, even in-process.
    with (
        locks.hold(path, what="the build folder x"),
        pytest.raises(EnvironmentProblem, match=r"^the build folder x is in use by another"),
        locks.hold(path, what="the build folder x", wait=False),
    ):
        pass
    with locks.hold(path, what="the build folder x", wait=False):
        pass  # released: free again


@pytest.mark.parametrize("take", ["hold", "attempt", "share"])
def test_a_symlinked_lock_is_one_line_and_creates_nothing_elsewhere(
    tmp_path: Path, take: str
) -> None:
    """Issue 21: a symlinked .wheelforge.lock (refused safely by filelock) ended in an ELOOP
    traceback; the shared lock followed the link and created its target."""
    from wheelforge.foundation.errors import EnvironmentProblem

    target = tmp_path / "elsewhere" / "precious"
    target.parent.mkdir()
    lock = tmp_path / "build" / ".wheelforge.lock"
    lock.parent.mkdir()
    lock.symlink_to(target)
    with pytest.raises(
        EnvironmentProblem, match=r"\.wheelforge\.lock of .* cannot be taken \(a symbolic link\)"
    ):
        if take == "hold":
            with locks.hold(lock, what="the build folder"):
                pass
        elif take == "attempt":
            with locks.attempt(lock):
                pass
        else:
            with locks.share(lock, what="the env"):
                pass
    assert not target.exists()
