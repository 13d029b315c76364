"""The fence's command lines (foundation/fence.py): what bubblewrap and the unshare fallback are
told, in which order, and how init chooses between them or refuses. The real fences are
tests/integration/test_init_sandbox.py's."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import pytest

from wheelforge.cli.app import main
from wheelforge.foundation import fence, fence_init
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem


def _fence(kind: fence.Kind) -> fence.Fence:
    return fence.Fence(
        kind=kind,
        writable=(Path("/work/proj"), Path("/tmp/wheelforge-init-x")),
        readable=(
            Path("/tmp/venv"),
            Path("/usr/local/cuda"),  # under /usr: already in the view
            Path("/run/user/1/py"),
            Path("/work"),  # the project's repository: the project is bound writable over it
            Path("/work/proj/.venv"),  # under the writable project: already in the view
        ),
        gpus=("/dev/nvidia0", "/dev/nvidiactl"),
        hidden=("/tmp", "/var/tmp", "/run", "/dev/shm"),
        system=(("/usr", None), ("/lib", "usr/lib"), ("/etc", None)),
        masked=(("/etc/shadow", False), ("/etc/ssl/private", True)),
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
    # fence_init.py installs the seccomp filter, then execs the command (still PID 1).
    tail = argv[argv.index("--") + 1 :]
    assert tail[:4] == [sys.executable, "-I", "-S", str(fence.INIT)]
    assert json.loads(tail[4]) == {"only": "seccomp"}
    assert tail[5:] == ["--", "python", "child.py"]
    assert _pairs(head, "--chdir") == ["/work/proj"]
    assert _pairs(head, "--dev-bind-try") == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_bwrap_builds_the_view_from_what_is_needed_parents_first() -> None:
    argv = _fence("bwrap").argv(["true"], cwd=Path("/"))
    head = argv[: argv.index("--")]
    # No "--ro-bind / /": only the system's folders and those given are in the view.
    assert _pairs(head, "--ro-bind") == [
        "/etc",
        "/dev/null",  # over /etc/shadow: what others may not read is shown empty
        "/run/user/1/py",
        "/tmp/venv",
        "/usr",
        "/work",
    ]
    assert head[head.index("/dev/null") + 1] == "/etc/shadow"
    assert _pairs(head, "--bind") == ["/tmp/wheelforge-init-x", "/work/proj"]
    assert _pairs(head, "--tmpfs") == ["/dev/shm", "/etc/ssl/private", "/run", "/tmp", "/var/tmp"]
    assert _pairs(head, "--remount-ro") == ["/etc/ssl/private", "/"]
    assert _pairs(head, "--symlink") == ["usr/lib"]  # /lib -> usr/lib, made again
    mounts = [
        (a, argv[i + 1]) for i, a in enumerate(head) if a in ("--ro-bind", "--bind", "--tmpfs")
    ]
    assert mounts.index(("--tmpfs", "/tmp")) < mounts.index(("--ro-bind", "/tmp/venv"))
    assert mounts.index(("--ro-bind", "/work")) < mounts.index(("--bind", "/work/proj"))
    assert head[-4:] == ["--remount-ro", "/", "--chdir", "/"]  # the root tmpfs: read-only


def test_the_view_leaves_out_what_is_already_in_it_and_binds_writable_over_read_only() -> None:
    steps = _fence("unshare").view()
    shown = [(how, path) for how, path, _ in steps]
    assert ("ro", "/usr/local/cuda") not in shown and ("ro", "/work/proj/.venv") not in shown
    assert shown.index(("ro", "/work")) < shown.index(("rw", "/work/proj"))
    assert ("link", "/lib", "usr/lib") in steps
    assert [p for how, p in shown if how in ("proc", "dev")] == ["/dev", "/proc"]
    # A readable folder under a hidden one is bound again into its empty tmpfs.
    assert ("ro", "/run/user/1/py") in shown
    assert shown.index(("tmpfs", "/run")) < shown.index(("ro", "/run/user/1/py"))


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
    assert [tuple(step) for step in given["steps"]] == _fence("unshare").view()
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


def test_the_environment_is_cut_to_what_a_build_reads(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "CUDA_HOME": "/usr/local/cuda",
        "TORCH_CUDA_ARCH_LIST": "9.0a",
        "MAX_JOBS": "4",
        "CC": "gcc",
        "HOME": "/home/me",
        "GITHUB_TOKEN": "ghp_secret",
        "SSH_AUTH_SOCK": "/run/user/1/ssh.sock",
        "AWS_SECRET_ACCESS_KEY": "x",
        "DOCKER_HOST": "unix:///var/run/docker.sock",
        "FLASH_ATTENTION_DISABLE_SM80": "TRUE",
        "CUDA_API_TOKEN": "looks like ours, is a secret",
        "EDITOR": "vim",
    }
    cut = fence.environment(
        base, named=("FLASH_ATTENTION_DISABLE_SM80", "GITHUB_TOKEN"), home=tmp_path
    )
    assert cut.kept == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "CUDA_HOME": "/usr/local/cuda",
        "TORCH_CUDA_ARCH_LIST": "9.0a",
        "MAX_JOBS": "4",
        "CC": "gcc",
        "FLASH_ATTENTION_DISABLE_SM80": "TRUE",  # the project's own knob: its setup.py names it
        "HOME": str(tmp_path),  # the scratch folder: the user's home is not in the fence
    }
    # A secret's name is never kept, not even when the project's setup.py names it.
    assert cut.left_out == (
        "AWS_SECRET_ACCESS_KEY",
        "CUDA_API_TOKEN",
        "DOCKER_HOST",
        "EDITOR",
        "GITHUB_TOKEN",
        "SSH_AUTH_SOCK",
    )


def test_the_names_a_build_file_reads_are_its_quoted_upper_case_names(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        'import os\nA = os.getenv("FLASH_ATTENTION_FORCE_BUILD", "FALSE")\n'
        "B = os.environ['BUILD_TARGET']\nC = 'lower_case'\n"
    )
    (tmp_path / "CMakeLists.txt").write_text("set(X $ENV{CUTLASS_DIR})\n")
    assert fence.named_in(tmp_path / "setup.py", tmp_path / "CMakeLists.txt", tmp_path / "no") == (
        "FLASH_ATTENTION_FORCE_BUILD",
        "FALSE",
        "BUILD_TARGET",
        "CUTLASS_DIR",
    )


def test_the_project_s_repository_is_its_git_top_level_wherever_it_lies(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "hopper").mkdir()
    assert fence.repository(tmp_path / "repo" / "hopper") == (tmp_path / "repo",)
    # A worktree's .git file names its git folder, and that its common one.
    (tmp_path / "store" / "worktrees" / "wt").mkdir(parents=True)
    (tmp_path / "store" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (tmp_path / "wt" / "sub").mkdir(parents=True)
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {tmp_path}/store/worktrees/wt\n")
    assert fence.repository(tmp_path / "wt" / "sub") == (
        tmp_path / "wt",
        tmp_path / "store" / "worktrees" / "wt",
        tmp_path / "store",
    )


def test_without_git_the_folders_above_that_setup_py_opens_are_shown(tmp_path: Path) -> None:
    project = tmp_path / "a" / "b" / "hopper"
    project.mkdir(parents=True)
    setup = project / "setup.py"
    setup.write_text('open("../README.md")\n')
    assert fence.repository(project, setup) == (tmp_path / "a" / "b",)
    setup.write_text("x = '../../csrc/cutlass'\ny = '..'\n")
    assert fence.repository(project, setup) == (tmp_path / "a",)
    setup.write_text("print('no climbing: a..b, ./x')\n")
    assert fence.repository(project, setup) == ()


def test_the_home_folder_and_the_root_are_never_shown_as_a_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".git").mkdir()  # a home folder kept in git (dotfiles)
    (tmp_path / "proj").mkdir()
    assert fence.repository(tmp_path / "proj") == ()
    (tmp_path / "proj" / "setup.py").write_text('open("../.netrc")\n')
    (tmp_path / ".git").rmdir()
    assert fence.repository(tmp_path / "proj", tmp_path / "proj" / "setup.py") == ()


# A classic-BPF interpreter of the instructions the filter uses, over struct seccomp_data.
def _seccomp(nr: int, arch: int, *args: int) -> tuple[str, int]:
    program = fence_init.seccomp_filter()
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = struct.unpack_from("=HBBI", program, pc * 8)
        pc += 1
        if code == fence_init.LD_ABS:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == fence_init.AND:
            acc &= k
        elif code == fence_init.JEQ:
            pc += jt if acc == k else jf
        elif code == fence_init.RET:
            if k == fence_init.RET_ALLOW:
                return "allow", 0
            assert k & 0xFFFF0000 == fence_init.RET_ERRNO
            return "errno", k & 0xFFFF
        else:
            raise AssertionError(f"an instruction the filter should not hold: {code:#x}")


X86_64, I386, AARCH64, ARM = 0xC000003E, 0x40000003, 0xC00000B7, 0x40000028
EACCES, ENOSYS, AF_INET, AF_INET6, AF_NETLINK = 13, 38, 2, 10, 16
STREAM, DGRAM, CLOEXEC = 1, 2, 0o2000000


def test_the_seccomp_filter_refuses_unix_sockets_on_every_abi() -> None:
    # socket(AF_UNIX, ...): x86_64, its x32 ABI, i386 (int 0x80 on x86_64), aarch64, arm.
    for nr, arch in (
        (41, X86_64),
        (0x40000000 | 41, X86_64),
        (359, I386),
        (198, AARCH64),
        (281, ARM),
    ):
        assert _seccomp(nr, arch, 1, STREAM) == ("errno", EACCES), (nr, arch)
        assert _seccomp(nr, arch, 1, DGRAM | CLOEXEC) == ("errno", EACCES)
        # The int the kernel reads is the argument's low 32 bits.
        assert _seccomp(nr, arch, (1 << 32) | 1, STREAM) == ("errno", EACCES)
        for domain in (AF_INET, AF_INET6, AF_NETLINK):
            assert _seccomp(nr, arch, domain, STREAM) == ("allow", 0)


def test_the_seccomp_filter_lets_stream_socketpairs_through_and_refuses_the_rest() -> None:
    for nr, arch in ((53, X86_64), (360, I386), (199, AARCH64), (282, ARM)):
        assert _seccomp(nr, arch, 1, STREAM | CLOEXEC) == ("allow", 0)
        assert _seccomp(nr, arch, 1, DGRAM | CLOEXEC) == ("errno", EACCES)  # could sendto a path
    # socketcall (i386, arm): its arguments lie behind a pointer BPF cannot read.
    assert _seccomp(102, I386, 1) == ("errno", EACCES)
    assert _seccomp(102, ARM, 1) == ("errno", EACCES)
    for arch in (X86_64, I386, AARCH64, ARM):
        for nr in (425, 426, 427):  # io_uring's IORING_OP_SOCKET / _CONNECT bypass seccomp
            assert _seccomp(nr, arch) == ("errno", EACCES)
    assert _seccomp(0x40000000 | 425, X86_64) == ("errno", EACCES)


def test_the_seccomp_filter_allows_everything_else_and_knows_no_other_arch() -> None:
    for nr in (0, 1, 2, 42, 59, 102, 257):  # read, write, open, connect, execve, getuid, openat
        assert _seccomp(nr, X86_64, 1) == ("allow", 0)
    assert _seccomp(42, AARCH64, 1) == ("allow", 0)
    assert _seccomp(41, 0xC0000015, 1) == ("errno", ENOSYS)  # ppc64: a call it cannot read


def test_fence_init_refuses_a_plan_that_is_not_an_object(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fence_init.main(["fence_init.py", "[1]", "--", "true"]) == 125
    assert "not a JSON object" in capsys.readouterr().err


def test_what_others_may_not_read_in_etc_is_masked(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text("root:x:0:0\n")
    (tmp_path / "shadow").write_text("root:$6$secret\n")
    (tmp_path / "shadow").chmod(0o640)
    (tmp_path / "ssl" / "private").mkdir(parents=True)
    (tmp_path / "ssl" / "private" / "key.pem").write_text("KEY\n")
    (tmp_path / "ssl" / "private").chmod(0o700)
    (tmp_path / "ssl" / "certs").mkdir()
    (tmp_path / "link").symlink_to("shadow")
    try:
        masked = fence.masked_in(str(tmp_path))
    finally:
        (tmp_path / "ssl" / "private").chmod(0o755)
    # The folder is masked whole (not walked into); a link is left (its target is masked).
    assert sorted(masked) == [(f"{tmp_path}/shadow", False), (f"{tmp_path}/ssl/private", True)]
    steps = _fence("unshare").view()
    assert ("mask", "/etc/shadow", "file") in steps and ("mask", "/etc/ssl/private", "dir") in steps
    assert steps.index(("ro", "/etc", "")) < steps.index(("mask", "/etc/shadow", "file"))


def test_a_file_the_fence_hides_is_named_with_where_it_lies(tmp_path: Path) -> None:
    from wheelforge.adoption.doors.setupcapture import _hidden_path

    (tmp_path / "README.md").write_text("x")
    (tmp_path / "hopper").mkdir()
    said = "FileNotFoundError: [Errno 2] No such file or directory: '../README.md'"
    assert _hidden_path(said, tmp_path / "hopper") == str(tmp_path / "README.md")
    said = f"No such file or directory: '{tmp_path}/README.md'"
    assert _hidden_path(said, tmp_path / "hopper") == str(tmp_path / "README.md")
    assert _hidden_path("No such file or directory: 'nowhere.txt'", tmp_path) is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_project_of_another_user_is_named_before_root_runs_it_fenced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An sdist extracted by root with tar keeps uid 1000: root in the fence, without
    CAP_DAC_OVERRIDE, cannot write it (vLLM's Marlin generator, NATTEN's autogen failed)."""
    (tmp_path / "csrc").mkdir()
    fence.say_foreign_owner(tmp_path, what="setup.py")
    assert capsys.readouterr().err == ""  # root's own
    os.chown(tmp_path / "csrc", 1000, 1000)
    fence.say_foreign_owner(tmp_path, what="setup.py")
    err = capsys.readouterr().err
    assert "folders owned by uid 1000, not by root" in err
    assert "setup.py cannot write into them" in err and "tar --no-same-owner" in err
