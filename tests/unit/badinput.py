"""The bad-input table's harness (test_bad_inputs.py, test_hostile_round.py): a case is a
command line, the error class (or exit code) it must end in, a needle its one ``error:`` line
must hold, and the files, environment and matrix.yaml it runs with; run_case runs it through
the CLI in-process."""

from __future__ import annotations

import os
import re
import socket
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.unit import fakes
from tests.unit.conftest import GOOD_MATRIX
from wheelforge.cli.app import EXIT_USAGE, main
from wheelforge.foundation.errors import (
    WheelforgeError,
)
from wheelforge.toolchain import toolkits as toolkit

DATA = Path(__file__).resolve().parent.parent / "data"
ELF = (DATA / "abicheck" / "ext.so").read_bytes()
USAGE = EXIT_USAGE
WHEEL = "demo-1.0-cp310-abi3-linux_x86_64.whl"
METADATA = ("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\nRequires-Dist: torch>=2.10\n")


def wheel(*members: tuple[str, bytes | str], compress: bool = True) -> bytes:
    """A wheel's bytes, built in memory."""
    path = Path(os.environ["WF_CORPUS_TMP"]) / "w.zip"
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return path.read_bytes()


def recorded(*members: tuple[str, bytes | str], record: str | None = None) -> bytes:
    """A wheel with a RECORD: the true one (fakes.with_record), or *record* as given."""
    path = Path(os.environ["WF_CORPUS_TMP"]) / "w.zip"
    path.write_bytes(wheel(*members))
    fakes.with_record(path)
    if record is not None:
        with zipfile.ZipFile(path) as zf:
            kept = [
                (i.filename, zf.read(i))
                for i in zf.infolist()
                if not i.filename.endswith("/RECORD")
            ]
        path.write_bytes(wheel(*kept, ("demo-1.0.dist-info/RECORD", record)))
    return path.read_bytes()


def quietly(make: Callable[..., bytes], *members: tuple[str, bytes | str]) -> bytes:
    """*make* without zipfile's warning about the duplicate member names it is asked for."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return make(*members)


def record_row(member: tuple[str, bytes | str]) -> str:
    import base64
    import hashlib

    name, data = member
    blob = data.encode() if isinstance(data, str) else data
    digest = base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(blob)}\n"


def tampered() -> bytes:
    """A true RECORD, then a member replaced by other bytes (the zip keeps the old RECORD)."""
    recorded(METADATA, ("demo/x.py", "x = 1\n"))
    path = Path(os.environ["WF_CORPUS_TMP"]) / "w.zip"
    with zipfile.ZipFile(path) as zf:
        kept = [(i.filename, zf.read(i)) for i in zf.infolist() if i.filename != "demo/x.py"]
    return wheel(*kept, ("demo/x.py", "import os; os.system('evil')\n"))


def bomb() -> bytes:
    """An ELF header and 8 MiB of zeros: deflate packs it about 1000x."""
    return wheel(METADATA, ("demo/_C.abi3.so", ELF[:64] + b"\0" * (8 << 20)))


FIFO = object()  # a files entry: make a named pipe there
SOCKET = object()  # a files entry: a UNIX socket bound there (nobody listens)


@dataclass(frozen=True)
class Sparse:
    """A files entry: a sparse file of *size* bytes (its size is all that is real)."""

    size: int


@dataclass(frozen=True)
class Link:
    """A files entry: a symbolic link to *target* ({root} is the project folder)."""

    target: str


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    error: type[WheelforgeError] | int  # the error class, or an exit code
    needle: str  # in the error line; {root} is the project folder
    matrix: str = GOOD_MATRIX
    env: dict[str, str | None] = field(default_factory=dict)
    files: dict[str, object] = field(
        default_factory=dict
    )  # bytes, str, FIFO, Sparse, Link, a callable


def m(replace: str, by: str) -> str:
    assert replace in GOOD_MATRIX, replace
    return GOOD_MATRIX.replace(replace, by)


B = ("build", "--matrix", "{root}/matrix.yaml")
MX = ("matrix", "--matrix", "{root}/matrix.yaml")
UNSTABLE = m('torch: ">=2.10"', "abi: unstable\ntorch: ['2.13.0']")


def _materialize(root: Path, files: dict[str, object]) -> None:
    for rel, content in files.items():
        path = root / rel
        if rel.endswith("/"):
            path.mkdir(parents=True)
            assert isinstance(content, int)
            path.chmod(content)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is FIFO:
            os.mkfifo(path)
            continue
        if isinstance(content, Sparse):
            with path.open("wb") as file:
                file.truncate(content.size)
            continue
        if isinstance(content, Link):
            path.symlink_to(content.target.replace("{root}", str(root)))
            continue
        if content is SOCKET:
            # bound by its name from its folder: a socket's path is capped at 107 bytes, which a
            # long temporary root (PYTEST_DEBUG_TEMPROOT, TMPDIR) passes
            here = Path.cwd()
            os.chdir(path.parent)
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.bind(path.name)
            finally:
                os.chdir(here)
            continue
        data = content() if callable(content) else content
        if isinstance(data, str):
            path.write_text(data)
        else:
            assert isinstance(data, bytes)
            path.write_bytes(data)


_COUNTED_RE = re.compile(
    r": (\d+) problems, (?:above in line order|the first (\d+) above; fix these first)$"
)


def counted(errors: list[str]) -> bool:
    """Several problems of one file: an ``error:`` line each, then one that counts them."""
    m = _COUNTED_RE.search(errors[-1])
    return m is not None and len(errors) - 1 == int(m[2] or m[1])


def run_case(
    case: Case,
    project: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run *case* through the CLI in-process and hold it to the table's promise: exactly one
    ``error:`` line holding its needle, its class's exit code, no traceback."""
    root = tmp_path
    project("")  # type: ignore[operator]  # the demo package, csrc and their files
    (root / "matrix.yaml").write_text(case.matrix, errors="surrogateescape")
    monkeypatch.setenv("WF_CORPUS_TMP", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for var in ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "CUDA_HOME", "CUDA_PATH", "CXX", "CC"):
        monkeypatch.delenv(var, raising=False)
    for var, value in case.env.items():
        monkeypatch.setenv(
            var, value.replace("{root}", str(root))
        ) if value is not None else monkeypatch.delenv(var)
    _materialize(root, case.files)
    # nvcc answers from a fake: no process starts, and every toolkit found is CUDA 13.0.
    monkeypatch.setattr(toolkit, "probe_toolkit", lambda nvcc, **_: fakes.toolkit())
    argv = [a.replace("{root}", str(root)) for a in case.argv]
    try:
        code = main(argv)
    finally:
        for folder in root.rglob("*"):
            if folder.is_dir() and not os.access(folder, os.W_OK):
                folder.chmod(stat.S_IRWXU)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 or counted(errors), err
    assert any(case.needle.replace("{root}", str(root)) in line for line in errors), err
    expected = case.error if isinstance(case.error, int) else case.error.exit_code
    assert code == expected, err


def shown_member(
    command: str,
    member: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *,
    wheel_name: str = WHEEL,
    options: tuple[str, ...] = (),
) -> str:
    """What `inspect` or `check` (*command*, with *options*) prints for a wheel holding one
    extension named *member*: stdout and stderr together, with no traceback in them."""
    monkeypatch.setenv("WF_CORPUS_TMP", str(tmp_path))
    path = tmp_path / wheel_name
    path.write_bytes(wheel(METADATA, (member, ELF)))
    main([command, *options, str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return out + err
