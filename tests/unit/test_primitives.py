"""The primitives that close issue 21's classes (docs/robustness.md): the bounded reader, the
writer that never reads its target, the deletion guard, the integer parser."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from wheelforge.foundation import numbers, readers, removal, writers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem


# --- readers ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (os.mkfifo, "it is a FIFO (named pipe), not a regular file"),
        (lambda p: p.mkdir(), "it is a folder, not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "it is a character device"),
        (lambda p: p.symlink_to(p), "Too many levels of symbolic links"),
        (lambda p: p.write_bytes(b"a\n\xff"), "it is not UTF-8 text (byte 0xff on line 2)"),
        (lambda p: p.open("wb").truncate(3 << 20), "it is 3 MiB, above the cap of 2 MiB"),
    ],
)
def test_the_reader_refuses_what_is_not_a_small_regular_file(
    tmp_path: Path, make: object, needle: str
) -> None:
    path = tmp_path / "f"
    make(path)  # type: ignore[operator]
    with pytest.raises(readers.FileRefused, match="f could not be read: ") as caught:
        readers.read_text(path, cap=2 << 20)
    assert needle in caught.value.message
    assert isinstance(caught.value, ConfigError)


def test_the_reader_reads_kernel_files_within_the_cap() -> None:
    assert readers.read_text(Path("/proc/self/status"), cap=1 << 20).startswith("Name:")
    with pytest.raises(readers.FileRefused, match="holds more than the cap of 10 bytes"):
        readers.read_bytes(Path("/proc/self/status"), cap=10)


def test_the_reader_says_missing_as_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        readers.read_text(tmp_path / "nope", cap=10)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileNotFoundError):  # below a file: ENOTDIR is "not there" too
        readers.read_text(tmp_path / "file" / "nope", cap=10)


# --- writers ---------------------------------------------------------------------------------
def test_the_writer_replaces_a_linked_file_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert writers.write_output(link, "new", what="--report") == real
    assert link.is_symlink() and real.read_text() == "new"


@pytest.mark.parametrize("target", ["/dev/full", "/proc/version"])
def test_the_writer_refuses_devices_and_kernel_files(target: str) -> None:
    with pytest.raises(writers.TargetRefused, match=f"--report {target} is a"):
        writers.open_output(Path(target), what=f"--report {target}")


def test_a_fifo_without_a_reader_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(writers.TargetRefused, match="FIFO \\(named pipe\\) that nobody reads"):
        writers.open_output(fifo, what="--report")


def test_a_fifo_with_a_reader_is_written_through_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        out = writers.open_output(fifo, what="--report")
        assert out.write("report\n") is None
        assert os.read(reader, 100) == b"report\n"
        assert os.read(reader, 100) == b""  # the writer closed: the reader sees the end
    finally:
        os.close(reader)
    assert fifo.is_fifo()


def test_a_link_to_a_pipe_through_proc_is_written_through(tmp_path: Path) -> None:
    """As /dev/stdout -> /proc/self/fd/1 is: the link is never renamed over (as root that
    replaced /dev/stdout with a regular file)."""
    r, w = os.pipe()
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{w}")
    try:
        assert writers.write_output(link, "{}\n", what="--report") is None
        assert os.read(r, 100) == b"{}\n"
    finally:
        os.close(r)
        os.close(w)
    assert link.is_symlink()


def test_this_process_stdout_under_another_name_is_written_to_the_descriptor(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "stdout"
    link.symlink_to("/proc/self/fd/1")
    assert writers.classify(link, what="--report") == "fd1"
    writers.write_output(link, "to stdout\n", what="--report")
    assert capfd.readouterr().out == "to stdout\n"
    assert link.is_symlink()


def test_the_atomic_writer_never_reads_and_refuses_non_regular_targets(tmp_path: Path) -> None:
    fifo = tmp_path / "build.ninja"
    os.mkfifo(fifo)
    with pytest.raises(writers.TargetRefused, match="is a FIFO"):
        writers.write_atomic(fifo, "x")
    target = tmp_path / "t"
    target.write_text("old")
    target.chmod(0o200)  # write-only: a writer that read it would fail as root does not
    writers.write_atomic(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build.ninja", "t"]


# --- removal ---------------------------------------------------------------------------------
def test_removal_is_confined_after_following_links(tmp_path: Path) -> None:
    owner, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    (owner / "probes").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep")
    (owner / "probes" / "nvcc").symlink_to(elsewhere)
    with pytest.raises(removal.RemovalRefused, match="lies outside"):
        removal.remove(owner / "probes" / "nvcc" / "precious.txt", within=owner)
    assert (elsewhere / "precious.txt").read_text() == "keep"
    # The link itself is inside: it is unlinked, never followed.
    assert removal.remove(owner / "probes" / "nvcc", within=owner)
    assert (elsewhere / "precious.txt").exists()
    with pytest.raises(removal.RemovalRefused):
        removal.remove(owner, within=owner)
    with pytest.raises(removal.RemovalRefused):
        removal.remove(owner / "probes" / "..", within=owner)


def test_sweep_removes_leftovers_of_dead_processes_only(tmp_path: Path) -> None:
    dead = 2**22 + 7  # above pid_max: no such process
    mine = os.getpid()
    for name in (f".x.whl.{dead}-abc.part", f"stage-{dead}-q1w2", ".x.whl.old.part"):
        (tmp_path / name).mkdir() if name.startswith("stage") else (tmp_path / name).touch()
    for name in (f".x.whl.{mine}-abc.part", f"stage-{mine}-q1w2", "x.whl", "stage.txt"):
        (tmp_path / name).touch()
    old = tmp_path / ".x.whl.old.part"
    os.utime(old, (0, 0))  # an old-style name is stale only once it is old
    removed = {p.name for p in removal.sweep(tmp_path, within=tmp_path)}
    assert removed == {f".x.whl.{dead}-abc.part", f"stage-{dead}-q1w2", ".x.whl.old.part"}


# --- numbers ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", 8),
        ("0008", 8),
        ("4096", 4096),
        ("4097", None),
        ("²", None),
        ("٤", None),
        ("８", None),
        ("-1", None),
        ("1.5", None),
        ("", None),
        ("9" * 5000, None),
        ("0" * 5000 + "7", 7),
    ],
)
def test_whole_numbers_are_ascii_and_bounded(text: str, expected: int | None) -> None:
    assert numbers.whole(text, low=1, high=4096) == expected


def test_versions_with_huge_components_are_invalid_not_a_traceback() -> None:
    assert str(numbers.version("2.10")) == "2.10"
    with pytest.raises(ValueError, match="Invalid version"):
        numbers.version("2." + "1" * 5000)
    with pytest.raises(ValueError, match="Invalid version"):
        numbers.version("２.10")


def test_environment_problem_is_the_class_of_write_failures(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem, match="cannot write there"):
        writers.open_output(tmp_path / "no" / "r.json", what="--report")


# --- the classes are closed: no file I/O, removal or process outside the primitives -------------
SRC = Path(__file__).resolve().parents[2] / "src" / "wheelforge"
PRIMITIVES = {
    "foundation/readers.py",
    "foundation/writers.py",
    "foundation/removal.py",
    "foundation/proc.py",
}
_IO_RE = re.compile(
    r"(?<!readers)\.read_text\(|(?<!readers)\.read_bytes\(|(?:^|[^.\w])open\(|\.open\(|rmtree"
    r"|Popen\(|\.write_text\(|\.write_bytes\(|\.unlink\(|os\.(?:remove|unlink|rmdir)\(|\.rmdir\("
    r"|shutil\.(?:copy|copy2|copyfile|move|copytree)\(|mkstemp|mkdtemp|\.rename\("
    r"|subprocess\.(?:run|call|check_output|check_call)\(|os\.system\(|TemporaryDirectory\("
)
# Each exception, by module and the text of its line, with the reason it is not a primitive's.
ALLOWED = {
    ("binaries/reader.py", "wheel.read_text("): "a wheel member, inflated within bounded.py's caps",
    (
        "packaging/wheel_variants.py",
        "reader.read_text(",
    ): "a wheel member, within bounded.py's caps",
    ("binaries/bounded.py", "zf.open(info)"): "the bounded reader of wheel members itself",
    (
        "packaging/sdist.py",
        'target.open("wb")',
    ): "the sdist streamed into its own temporary folder, then writers.publish",
    ("packaging/sdist.py", "tarfile.open(fileobj"): "a tar over that stream, no file opened",
    (
        "packaging/sdist.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    (
        "packaging/testwheels.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    (
        "build/importcheck.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    (
        "build/pep517.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    (
        "build/dryrun.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    (
        "build/reproduce.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    (
        "build/caches.py",
        "path.rename(aside)",
    ): "renamed aside inside the cache, removal.confined checked first",
    (
        "build/variant.py",
        'tempfile.mkdtemp(prefix=f"stage-',
    ): "the staging folder, named for removal.sweep",
    (
        "toolchain/compilecache.py",
        'tempfile.mkdtemp(prefix="wf-sccache-")',
    ): "a short folder for sccache's socket",
    (
        "toolchain/warmtorch.py",
        'tempfile.mkdtemp(prefix="wheelforge-torch-")',
    ): "the warm child's empty working folder",
    (
        "toolchain/warmtorch.py",
        '(folder / "stderr").open(',
    ): "the warm child's stderr, in that folder",
    (
        "toolchain/torchprobe.py",
        'with open(os.path.join(root, "version.py")',
    ): "code the build Python runs (a string), not wheelforge's",
    (
        "foundation/fsutil.py",
        "Path(folder).rmdir()",
    ): "only empty folders a refused build made (rmdir removes nothing else)",
    ("foundation/locks.py", "fd = os.open(path,"): "the lock file itself, O_NOFOLLOW",
    ("foundation/locks.py", "fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY"): (
        "the --out folder itself, opened read-only to flock it"
    ),
    ("adoption/child/capture_packagedata.py", "tempfile.TemporaryDirectory("): (
        "runs inside the capture child: egg_info's folder, made and removed by the stdlib"
    ),
    (
        "documents/kinds.py",
        "data.read_text(encoding",
    ): "package data shipped with wheelforge (importlib.resources)",
    (
        "configuration/matrix/schema.py",
        ".joinpath(SCHEMA_FILE).read_text(",
    ): "package data (importlib.resources)",
    (
        "configuration/releases.py",
        '.joinpath(f"data/{DATA_FILE}").read_text(',
    ): "package data (importlib.resources)",
    (
        "toolchain/shims.py",
        '.joinpath("data/shim_exports.json").read_text(',
    ): "package data (importlib.resources)",
    (
        "binaries/systemlibs.py",
        '.joinpath("data/system-exports.json").read_text(',
    ): "package data (importlib.resources)",
    (
        "binaries/systemlibs.py",
        '.read_text(encoding="utf-8")',
    ): "auditwheel's manylinux policy, package data of that dependency (importlib.resources)",
    (
        "binaries/torchcuda.py",
        '.joinpath("data/torch-cuda.toml").read_text(',
    ): "package data (importlib.resources)",
    (
        "binaries/loadcheck.py",
        "tempfile.TemporaryDirectory(",
    ): "a temporary folder the stdlib makes and removes",
    ("adoption/child/capture_guards.py", "class GuardedPopen("): (
        "runs inside the capture child that runs setup.py, guarding what it starts"
    ),
    ("foundation/fence_init.py", 'open("/proc/self/mountinfo")'): (
        "runs inside the fence's namespaces before the command (stdlib only): the mount table"
    ),
    ("foundation/fence_init.py", 'open(target, "w")'): (
        "runs inside the fence's namespaces: an empty file in its own tmpfs /dev, a mount point"
    ),
    ("foundation/fence_init.py", "os.open(path, os.O_PATH"): (
        "runs inside the fence's namespaces: O_PATH, a folder held (not read) to bind it back"
    ),
    ("adoption/child/setup_child.py", "tempfile.mkdtemp("): (
        "runs inside the capture child, in its own temporary folder"
    ),
    ("adoption/doors/cmake.py", "tempfile.TemporaryDirectory("): (
        "a temporary folder the stdlib makes and removes (CMake's build folder)"
    ),
    ("adoption/doors/setupcapture.py", "tempfile.TemporaryDirectory("): (
        "a temporary folder the stdlib makes and removes (the capture's context)"
    ),
    ("toolchain/envs.py", "tempfile.TemporaryDirectory("): (
        "a temporary folder the stdlib makes and removes (pip's constraint file)"
    ),
    ("toolchain/headerlibs.py", "tempfile.TemporaryDirectory("): (
        "a temporary folder the stdlib makes and removes (a header library's download)"
    ),
    ("toolchain/headerlibs.py", "staged.rename(folder)"): (
        "a complete download renamed into its place in the cache (the folder removed first)"
    ),
    ("toolchain/downloads.py", "tempfile.mkdtemp("): (
        "pip's TMPDIR for one download, removed by removal.remove"
    ),
    ("foundation/proctree.py", '(entry / "stat").read_text()'): (
        "the kernel's /proc/<pid>/stat, read as proc.session_members reads it"
    ),
    ("foundation/proctree.py", '(entry / "cmdline").open("rb")'): (
        "the kernel's /proc/<pid>/cmdline of a process wheelforge started"
    ),
    ("foundation/resources.py", 'return path.read_text(encoding="ascii"'): (
        "the kernel's /proc and cgroup files (meminfo, cpu.max, memory.max), a few bytes each"
    ),
    ("foundation/jobcost.py", "fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT"): (
        "the compile wrapper's one line appended to its run's costs file (stdlib only: it runs "
        "before anything of wheelforge's is imported)"
    ),
    ("build/jobwatch.py", 'Path(entry.path, "stat").read_text('): (
        "the kernel's /proc/<pid>/stat, read as proctree reads it"
    ),
    ("build/jobwatch.py", '(proc / str(pid) / "cmdline").open("rb")'): (
        "the kernel's /proc/<pid>/cmdline, read within 1 MiB"
    ),
    ("cli/quicknoop.py", "fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK"): (
        "the quick no-op imports nothing of wheelforge's: a record or a watched file read as "
        "readers.py reads (regular files only, from fstat, never waited on, within a cap), and "
        "the recorded run's locks held shared while its screen is replayed"
    ),
    ("cli/filetrace.py", '"shutil.copyfile", "shutil.rmtree"}'): (
        "the names of audit events the trace counts as writes, not a call"
    ),
    ("build/jobserver.py", "tempfile.mkdtemp("): (
        "the jobserver's folder (its FIFO), removed by removal.remove when the build ends"
    ),
    ("build/jobserver.py", "os.open(fifo, os.O_RDWR | os.O_NONBLOCK)"): (
        "the jobserver's own FIFO, made just before (mkfifo): its tokens, never a user's file"
    ),
    ("build/jobserver.py", "self._folder_fd = os.open(self._folder"): (
        "the jobserver's own folder, opened to flock it while in use (read-only, no file made)"
    ),
    ("build/jobserver.py", "fd = os.open(child, os.O_RDONLY | os.O_DIRECTORY"): (
        "a jobserver folder in TMPDIR, opened (read-only, no link followed) to tell by its "
        "flock whether a build still uses it"
    ),
    ("build/genstep.py", "subprocess.Popen(command"): (
        "the generate step's wrapper, ninja's command: its own deadline, stopped by proc.stop"
    ),
}


def test_no_file_io_removal_or_process_outside_the_primitives() -> None:
    """Issue 21's classes, closed: every file read goes through readers.py, every write through
    writers.py, every removal through removal.py, every process through proc.py; what is left is
    listed in ALLOWED with its reason."""
    found: set[tuple[str, str]] = set()
    unlisted = []
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        if module in PRIMITIVES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not _IO_RE.search(line):
                continue
            key = next((k for k in ALLOWED if k[0] == module and k[1] in line), None)
            if key is None:
                unlisted.append(f"{module}:{number}: {line.strip()}")
            else:
                found.add(key)
    assert not unlisted, "\n".join(unlisted)
    assert found == set(ALLOWED), f"exceptions no longer needed: {set(ALLOWED) - found}"
