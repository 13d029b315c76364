from __future__ import annotations

import os

from wheelforge.foundation import proc


def test_session_members_are_read_from_proc() -> None:
    mine = proc.session_members(os.getsid(0))
    assert os.getpid() in mine
    assert proc.session_members(2**22 + 12345) == []  # above pid_max: no such session
