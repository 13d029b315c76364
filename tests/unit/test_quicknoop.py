"""cli/quicknoop.py on runs made up by the test: what is recorded, what a record holds
for, and that anything it cannot vouch for is the full path's (tests/integration/
test_quick_noop.py has the real builds)."""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.cli import filetrace, quicknoop
from wheelforge.foundation.cachehome import RECORDS

ARGV = ["build", "--archs", "8.0"]


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "wheelforge" / RECORDS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    (root / "src").mkdir(parents=True)
    (root / "matrix.yaml").write_text("package: {name: x}\n")
    (root / "src" / "a.cu").write_text("// a\n")
    (root / "build").mkdir()
    (root / "build" / ".lock").touch()
    return root


def full_run(project: Path, *, also: Callable[[], None] = lambda: None, code: int = 0) -> None:
    """What a full no-op does, in small: reads the matrix, stats a source and a missing
    header, lists the source folder, holds the build lock, prints its screen."""
    with quicknoop.recording(ARGV) as run:
        (project / "matrix.yaml").read_text()
        (project / "src" / "a.cu").stat()
        os.path.realpath(project / "src" / "a.cu")  # lstat of every folder on the way
        (project / "src" / "missing.h").exists()
        list((project / "src").iterdir())
        with (project / "build" / ".lock").open("r+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            also()
        print("  nothing to compile: up to date", file=sys.stderr)
        print("the wheel")
        run.done(code)


def replayed(capsys: pytest.CaptureFixture[str]) -> tuple[bool, str, str]:
    capsys.readouterr()
    answered = quicknoop.replay(ARGV)
    out, err = capsys.readouterr()
    return answered, out, err


def test_which_commands_may_be_answered() -> None:
    assert quicknoop.replayable(["build"])
    assert quicknoop.replayable(["build", "--archs", "8.0", "-q", "--out", "dist-x"])
    for argv in (
        [],
        ["check", "x.whl"],
        ["build", "-v"],
        ["build", "-qv"],
        ["build", "--verbose"],
        ["build", "--report", "r.json"],
        ["build", "--report=-"],
        ["build", "--dry-run"],
        ["build", "--verify-reproducible"],
        ["build", "--cache-dir", "/c"],
        ["build", "--help"],
        ["build", "-h"],
        ["build", "--", "x"],
    ):
        assert not quicknoop.replayable(argv), argv


def test_a_pure_noop_is_replayed_with_its_screen(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    full_run(project)
    _, full_err = capsys.readouterr()
    assert replayed(capsys) == (True, "the wheel\n", "  nothing to compile: up to date\n")
    assert "nothing to compile" in full_err


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda p: (p / "matrix.yaml").write_text("package: {name: y}\n"), id="matrix edited"),
        pytest.param(lambda p: os.utime(p / "src" / "a.cu", ns=(1, 1)), id="source touched"),
        pytest.param(lambda p: (p / "src" / "missing.h").write_text(""), id="absent file appears"),
        pytest.param(lambda p: (p / "src" / "b.cu").write_text(""), id="listed folder gains a file"),
        pytest.param(lambda p: os.environ.__setitem__("WHEELFORGE_X", "1"), id="environment"),
        pytest.param(lambda p: (p / "src" / "a.cu").unlink(), id="source removed"),
    ],
)  # fmt: skip
def test_any_change_is_the_full_path(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Path], object],
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.delenv("WHEELFORGE_X", raising=False)
    full_run(project)
    change(project)
    try:
        assert replayed(capsys) == (False, "", "")
    finally:
        os.environ.pop("WHEELFORGE_X", None)


def test_a_flag_added_is_another_record(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    full_run(project)
    capsys.readouterr()
    assert not quicknoop.replay([*ARGV, "--no-import-check"])


def test_a_file_only_read_and_rewritten_with_its_bytes_still_holds(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout that rewrote matrix.yaml unchanged: its stat changed, its sha256 did not."""
    monkeypatch.chdir(project)
    with quicknoop.recording(ARGV) as run:
        (project / "matrix.yaml").open().read()  # read only, never stat'ed
        run.done(0)
    matrix = project / "matrix.yaml"
    matrix.write_text(matrix.read_text())
    os.utime(matrix, ns=(2, 2))
    assert replayed(capsys)[0]


def test_a_run_that_wrote_started_a_process_or_failed_is_not_recorded(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    monkeypatch.chdir(project)
    full_run(project)
    assert list(cache.iterdir())
    full_run(project, also=lambda: (project / "build" / "stamp.json").write_text("{}"))
    assert not list(cache.iterdir()), "a stale record was left behind"
    full_run(project, also=lambda: sys.audit("subprocess.Popen", "ninja", ["ninja"], None, None))
    assert not list(cache.iterdir())
    full_run(project, code=3)
    assert not list(cache.iterdir())
    assert replayed(capsys) == (False, "", "")


def test_a_file_made_and_removed_by_the_run_is_no_write(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writability probe every build makes in its folders."""
    monkeypatch.chdir(project)

    def probe() -> None:
        made = project / "build" / ".wheelforge-probe-x"
        made.write_text("")
        made.unlink()

    full_run(project, also=probe)
    assert replayed(capsys)[0]


def test_a_held_build_lock_is_the_full_path(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    full_run(project)
    with (project / "build" / ".lock").open() as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # another wheelforge building here
        assert replayed(capsys) == (False, "", "")
    assert replayed(capsys)[0]


def test_a_damaged_record_is_the_full_path(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    monkeypatch.chdir(project)
    full_run(project)
    (record,) = cache.iterdir()
    record.write_text('{"format": 1, "stat": [')
    assert replayed(capsys) == (False, "", "")


def test_the_record_names_this_runs_modules(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    """wheelforge's own files are watched: an edit of an editable install is seen."""
    monkeypatch.chdir(project)
    full_run(project)
    (record,) = cache.iterdir()
    assert str(Path(quicknoop.__file__).absolute()) in record.read_text()


def test_records_are_probe_results_for_the_cache_command() -> None:
    from wheelforge.toolchain.probecache import PROBES

    assert RECORDS.parts[0] == PROBES


def test_the_newest_records_are_kept(
    project: Path, monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    monkeypatch.chdir(project)
    monkeypatch.setattr(quicknoop, "_KEPT", 2)
    for n in range(4):
        monkeypatch.setenv("WHEELFORGE_N", str(n))  # another environment: another record
        full_run(project)
    assert len(list(cache.glob("*.json"))) == 2


def test_a_fifo_in_place_of_a_record_or_a_watched_file_is_never_waited_on(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cache: Path
) -> None:
    monkeypatch.chdir(project)
    full_run(project)
    matrix = project / "matrix.yaml"
    matrix.unlink()
    os.mkfifo(matrix)  # nobody writes it: opening it to read would wait forever
    assert replayed(capsys) == (False, "", "")
    (record,) = cache.iterdir()
    record.unlink()
    os.mkfifo(record)
    assert replayed(capsys) == (False, "", "")


def test_another_programs_file_beside_the_project_is_not_a_change(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders the run only lstat'ed (realpath's walk) are watched for what they are, not for
    their entries: a file made in /tmp or beside the project is none of the build's facts."""
    monkeypatch.chdir(project)
    full_run(project)
    (project.parent / "elsewhere.txt").write_text("another program's\n")
    assert replayed(capsys)[0]
    (project / "src").rename(project / "src-moved")
    (project / "src").symlink_to(project / "src-moved")  # a folder on the way became a link
    assert replayed(capsys) == (False, "", "")


def test_a_change_made_through_an_open_file_names_the_file(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """filelock 3 (torch's environments have it) os.fchmod's the lock file it opens: that is
    the lock's file, not an unknown write; a change through a descriptor of another file is
    still a write, by its name."""
    monkeypatch.chdir(project)

    def fchmod_lock() -> None:
        fd = os.open(project / "build" / ".lock", os.O_RDWR)
        try:
            os.fchmod(fd, 0o644)
        finally:
            os.close(fd)

    full_run(project, also=fchmod_lock)
    assert replayed(capsys)[0]

    def truncate_source() -> None:
        with (project / "src" / "a.cu").open("r+") as f:
            os.ftruncate(f.fileno(), 0)

    with filetrace.traced() as trace:
        truncate_source()
    assert str(project / "src" / "a.cu") in trace.written


def test_a_folder_made_listed_and_removed_by_the_run_is_its_own(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary folder made, walked and removed in the run (shutil.rmtree lists it): on the
    H200 every no-op was 'changed while the run listed it' for such a /tmp/tmpXXXX. A folder
    that was there before and is listed still counts."""
    import shutil
    import tempfile

    monkeypatch.chdir(project)

    def scratch() -> None:
        made = Path(tempfile.mkdtemp(dir=project / "build"))
        (made / "sub").mkdir()
        (made / "sub" / "f").write_text("x")
        shutil.rmtree(made)

    full_run(project, also=scratch)
    assert replayed(capsys)[0]
    (project / "src" / "b.cu").write_text("// b\n")  # the listed source folder changed
    assert replayed(capsys) == (False, "", "")
