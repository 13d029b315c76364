"""The fence's command lines (foundation/fence.py): what bubblewrap and the unshare fallback are
told, in which order, and how init chooses between them or refuses. The real fences are
tests/integration/test_init_sandbox.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wheelforge.foundation import fence, fence_init
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.interface.cli import main


def _fence(kind: fence.Kind) -> fence.Fence:
    return fence.Fence(
        kind=kind,
        writable=(Path("/work/proj"), Path("/tmp/wheelforge-init-x")),
        readable=(Path("/tmp/venv"), Path("/usr/local/cuda"), Path("/run/user/1/py")),
        gpus=("/dev/nvidia0", "/dev/nvidiactl"),
        hidden=("/tmp", "/var/tmp", "/run", "/dev/shm"),
    )


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_bwrap_is_told_every_namespace_no_capabilities_and_to_end_with_its_command() -> None:
    argv = _fence("bwrap").argv(["python", "child.py"], cwd=Path("/work/proj"))
    head = argv[: argv.index("--")]
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"):
        assert flag in head
    # Run as root, bwrap keeps the capabilities unless told, and CAP_SYS_ADMIN remounts / rw.
    assert _pairs(head, "--cap-drop") == ["ALL"]
    assert "--as-pid-1" in head  # the command is the PID namespace's init
    assert argv[argv.index("--") + 1 :] == ["python", "child.py"]
    assert _pairs(head, "--chdir") == ["/work/proj"]
    assert _pairs(head, "--dev-bind-try") == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_bwrap_mounts_read_only_root_then_hidden_then_the_folders_shown_and_writable() -> None:
    argv = _fence("bwrap").argv(["true"], cwd=Path("/"))
    mounts = [
        (a, argv[i + 1])
        for i, a in enumerate(argv)
        if a.startswith(("--ro-bind", "--bind", "--tmpfs", "--dev", "--proc"))
    ]
    assert mounts[0] == ("--ro-bind", "/")
    assert mounts.index(("--tmpfs", "/tmp")) < mounts.index(("--ro-bind", "/tmp/venv"))
    assert mounts.index(("--ro-bind", "/tmp/venv")) < mounts.index(
        ("--bind", "/tmp/wheelforge-init-x")
    )
    # Only what a hidden folder holds is shown again; the rest is visible in the read-only /.
    assert _pairs(argv, "--ro-bind") == ["/", "/tmp/venv", "/run/user/1/py"]
    assert _pairs(argv, "--bind") == ["/work/proj", "/tmp/wheelforge-init-x"]
    assert _pairs(argv, "--tmpfs") == ["/tmp", "/var/tmp", "/run", "/dev/shm"]


def test_the_unshare_fallback_sets_up_in_its_namespaces_and_hands_fence_init_the_plan() -> None:
    argv = _fence("unshare").argv(["python", "child.py"], cwd=Path("/work/proj"))
    argv, wrapper = argv[4:], argv[:4]
    assert wrapper == ["setpriv", "--pdeathsig", "KILL", "--"]  # wheelforge's end ends unshare
    first = argv.index("--")
    assert argv[0] == "unshare"
    for flag in (
        "--user",
        "--map-root-user",
        "--mount",
        "--pid",
        "--net",
        "--ipc",
        "--fork",
        "--kill-child",
    ):
        assert flag in argv[:first]
    _python, isolated, no_site, init, plan, sep, *command = argv[first + 1 :]
    assert (isolated, no_site, Path(init), sep) == ("-I", "-S", fence.INIT, "--")
    assert command == ["python", "child.py"]
    given = json.loads(plan)
    assert given["writable"] == ["/work/proj", "/tmp/wheelforge-init-x"]
    assert given["readable"] == ["/tmp/venv", "/run/user/1/py"]
    assert given["hidden"] == ["/tmp", "/var/tmp", "/run", "/dev/shm"]
    assert given["gpus"] == ["/dev/nvidia0", "/dev/nvidiactl"]
    assert "/dev/null" in given["devices"] and given["cwd"] == "/work/proj"


def test_off_runs_the_command_as_it_is_and_the_screen_says_unfenced() -> None:
    assert fence.wrap(None, ["python", Path("x.py")], cwd=Path("/"), writable=()) == [
        "python",
        "x.py",
    ]
    assert "UNFENCED" in fence.describe(None)
    assert "bubblewrap" in fence.describe("bwrap")


@pytest.fixture
def works(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """What each fence answers when asked whether it runs here (no process starts)."""
    answers: dict[str, str | None] = {"bwrap": None, "unshare": None}
    monkeypatch.setattr(fence, "_works", lambda kind: answers[kind])
    return answers


def test_auto_takes_bwrap_else_unshare(works: dict[str, str | None]) -> None:
    assert fence.choose("auto", what="setup.py") == "bwrap"
    works["bwrap"] = "bwrap is not installed"
    assert fence.choose("auto", what="setup.py") == "unshare"
    assert fence.choose("off", what="setup.py") is None


def test_neither_fence_is_a_refusal_naming_both_causes_and_the_fixes(
    works: dict[str, str | None],
) -> None:
    works["bwrap"] = "bwrap is not installed"
    works["unshare"] = "unshare fails here (unshare: unshare failed: Operation not permitted)"
    with pytest.raises(EnvironmentProblem) as caught:
        fence.choose("auto", what="/p/setup.py")
    message = caught.value.message
    assert caught.value.exit_code == 5
    assert "/p/setup.py" in message and "Operation not permitted" in message
    assert "install bubblewrap" in message and "wheelforge init --no-run" in message
    with pytest.raises(EnvironmentProblem, match="use --sandbox auto"):
        fence.choose("bwrap", what="setup.py")
    with pytest.raises(ConfigError, match="--sandbox chroot"):
        fence.choose("chroot", what="setup.py")  # type: ignore[arg-type]


def test_init_refuses_before_any_process_starts_when_no_fence_works(
    works: dict[str, str | None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Unit tests refuse every process (tests/conftest.py): the refusal comes first.
    works["bwrap"] = "bwrap is not installed"
    works["unshare"] = "unshare is not installed"
    (tmp_path / "setup.py").write_text("import os\nos.remove('/etc/passwd')\n")
    code = main(["init", str(tmp_path)])
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 5 and len(errors) == 1, err
    assert "only inside a sandbox" in errors[0] and "--no-run" in errors[0]
    assert not (tmp_path / "matrix.yaml").exists()


def test_the_fences_own_failure_is_named() -> None:
    output = "some setup.py line\nbwrap: Can't mkdir /x: Read-only file system\n"
    assert fence.failure(output) == "bwrap: Can't mkdir /x: Read-only file system"
    assert fence.failure("wheelforge fence: mount /proc on /proc: Permission denied") is not None
    assert fence.failure("Traceback ... error: no") is None


def test_fence_init_reads_mountinfos_escaped_paths() -> None:
    assert fence_init._unescape(r"/mnt/a\040b\011c\134d") == "/mnt/a b\tc\\d"
    assert fence_init._unescape("/plain") == "/plain"
    assert fence_init._unescape("/end\\04") == "/end\\04"


def test_fence_init_refuses_a_command_line_without_its_plan(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fence_init.main(["fence_init.py", "{}"]) == 125
    assert capsys.readouterr().err.startswith("wheelforge fence: usage")


def test_the_build_pythons_folders_include_a_venvs_base_interpreter(tmp_path: Path) -> None:
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /opt/py3.12/bin\nversion = 3.12.1\n")
    folders = fence.python_folders(tmp_path / "venv" / "bin" / "python")
    assert tmp_path / "venv" in folders and Path("/opt/py3.12") in folders
