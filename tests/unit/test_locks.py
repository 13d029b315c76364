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
