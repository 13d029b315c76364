"""Issue 32, item 6: hostile inputs that each ended in a traceback or unbounded memory, as
unit tests where no real process or binary is needed (tests/integration/test_hostile_inputs.py
runs them through the command line, measuring memory)."""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.adoption.doors.setuppy import scan_setup_py
from wheelforge.adoption.doors.setuprecord import read_record
from wheelforge.adoption.record import childdocument
from wheelforge.binaries import bounded
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import proc
from wheelforge.foundation.document import iter_json, to_document
from wheelforge.foundation.errors import BinaryFormatError, ConfigError, EnvironmentProblem
from wheelforge.toolchain import torchprobe, warmtorch

from .conftest import GOOD_MATRIX
from .fakes import built_contents, plan_for

Project = Callable[..., Path]


def _record(**ext: object) -> dict[str, object]:
    base = {"name": "demo._C", "kind": "CUDAExtension", "where": "setup.py:4", "sources": ["k.cu"]}
    return {"setup_calls": [], "extensions": [{**base, **ext}]}


@pytest.mark.parametrize(
    ("ext", "needle"),
    [
        ({"extra_compile_args": 42}, "extra_compile_args is 42, where setuptools takes a list"),
        ({"extra_compile_args": {"cxx": ["-O3"], "nvcc": 7}}, "extra_compile_args['nvcc'] is 7"),
        ({"extra_compile_args": {"repr": "<generator object f at 0x1>"}}, "<generator object"),
        ({"define_macros": 5}, "define_macros is 5"),
        ({"include_dirs": 3.5}, "include_dirs is 3.5"),
        ({"libraries": True}, "libraries is True"),
    ],
)
def test_an_extension_argument_of_the_wrong_type_is_one_line(
    ext: dict[str, object], needle: str, tmp_path: Path
) -> None:
    """Before: TypeError: 'int' object is not iterable, from setuprecord's reading."""
    with pytest.raises(ConfigError) as caught:
        read_record(tmp_path, childdocument.parse(_record(**ext)), front_door="setup.py")
    message = caught.value.message
    assert message.startswith("CUDAExtension demo._C (setup.py:4): ") and needle in message
    assert "fix setup.py" in message and "\n" not in message


def test_the_static_reading_refuses_extra_compile_args_42(tmp_path: Path) -> None:
    """`init --no-run` wrote cxx-flags: ['42'] before."""
    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CUDAExtension\nfrom setuptools import setup\n"
        "setup(name='demo', ext_modules=[CUDAExtension('demo._C', ['k.cu'], "
        "extra_compile_args=42)])\n"
    )
    with pytest.raises(ConfigError, match="extra_compile_args is 42, where setuptools takes"):
        scan_setup_py(tmp_path / "setup.py")


def _answer(**changes: object) -> proc.Result:
    info = {
        "version": "2.13.0+cpu",
        "cuda": None,
        "include_dirs": ["/t/include"],
        "library_dirs": ["/t/lib"],
        "python_include": "/usr/include/python3.11",
        "python_version": "3.11",
        "ext_suffix": ".so",
        "cxx11_abi": 1,
        "torch_file": "/t/__init__.py",
        "sys_path": [],
    }
    text = json.dumps({**info, **changes})
    return proc.Result(args=("python",), returncode=0, stdout=text + "\n", stderr="")


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"include_dirs": []}, "answered include_dirs: [] (torch.utils.cpp_extension.include_"),
        ({"library_dirs": "/t/lib"}, 'answered library_dirs: "/t/lib" (not what torch answers'),
        ({"ext_suffix": None}, "answered ext_suffix: null"),
    ],
)
def test_a_borrowed_torch_answering_out_of_shape_is_named(
    changes: dict[str, object], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--torch-from whose torch answers include_dirs: [] was an IndexError in torchprobe._env."""
    monkeypatch.setattr(warmtorch, "probe", lambda _python: _answer(**changes))
    with pytest.raises(EnvironmentProblem) as caught:
        torchprobe.probe_torch(Path("/opt/py/bin/python"))
    assert needle in caught.value.message and "/opt/py/bin/python's torch" in caught.value.message


def test_a_package_file_whose_name_is_not_utf8_is_refused(project: Project, tmp_path: Path) -> None:
    """Before: UnicodeEncodeError (surrogates not allowed) while hashing the wheel's contents."""
    matrix = load_matrix(project(GOOD_MATRIX))
    (tmp_path / "demo_ops" / os.fsdecode(b"\xff\xfe.py")).write_text("x = 1\n")
    with pytest.raises(ConfigError) as caught:  # when the build is planned
        plan_for(matrix, tmp_path)
    assert caught.value.message.startswith(f"{tmp_path}/demo_ops/\\xff\\xfe.py: the file's name")
    caught.value.message.encode("utf-8")  # printable: no surrogate reaches the terminal
    excluded = GOOD_MATRIX.replace(
        "  packages: [demo_ops]", "  packages: [demo_ops]\n  exclude: ['*.py']"
    )
    plan = plan_for(load_matrix(project(excluded)), tmp_path)
    assert not any(name.endswith(".py") for name, _ in built_contents(plan, "x").files)


def test_a_source_whose_name_is_not_utf8_is_a_matrix_error(
    project: Project, tmp_path: Path
) -> None:
    """Before: UnicodeEncodeError in planning/jobcosts.py (the compile cost's key)."""
    (tmp_path / "csrc" / os.fsdecode(b"k\xff.cu")).write_text("// k\n")
    with pytest.raises(ConfigError, match=r"matches .*/csrc/k\\xff\.cu, whose name is not UTF-8"):
        load_matrix(project(GOOD_MATRIX))


def _zip(metadata: bytes, *, method: int = zipfile.ZIP_STORED) -> zipfile.ZipFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        zf.writestr("demo-1.0.dist-info/METADATA", metadata)
    return zipfile.ZipFile(buffer)


def test_metadata_headers_are_read_without_the_long_description() -> None:
    headers = b"Metadata-Version: 2.1\nName: demo\nRequires-Dist: torch>=2.10\n"
    zf = _zip(headers + b"\n" + b"x" * (40 << 20))
    read = bounded.member_headers(zf, zf.infolist()[0], "w.whl!METADATA")
    assert read == headers
    crlf = _zip(headers.replace(b"\n", b"\r\n") + b"\r\n" + b"body\r\n")
    assert bounded.member_headers(crlf, crlf.infolist()[0], "m").endswith(b"torch>=2.10\r\n")
    whole = _zip(headers)
    assert bounded.member_headers(whole, whole.infolist()[0], "m") == headers


def test_metadata_headers_beyond_the_cap_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "METADATA_HEADERS_CAP", 2 << 20)
    zf = _zip(b"Requires-Dist: torch\n" * 200_000)
    with pytest.raises(BinaryFormatError, match="its headers run past 2 MiB without the blank"):
        bounded.member_headers(zf, zf.infolist()[0], "w.whl!METADATA")


def _entry(i: int) -> FatbinEntry:
    return FatbinEntry(kind="sass", arch="sm_90", sm=90, variant="", container=0, offset=i,
                       stored_size=0, size=0, compression="none", version=None)  # fmt: skip


@pytest.mark.parametrize(
    "value",
    [
        [],
        {},
        (_entry(1), _entry(2)),
        {"files": [{"path": "é\u2028\x1b", "fatbins": [_entry(3)], "loads_on": None}], "x": {}},
        {"n": [1, 2.5, True, None, float("inf")], "deep": {"a": {"b": []}}, 3: Path("/x")},
        "text",
        None,
    ],
)
def test_the_streamed_json_is_json_dumps_text(value: object) -> None:
    """inspect --json of a million fatbin entries took 2.7 GB as one dict tree and one text."""
    assert "".join(iter_json(value)) == json.dumps(to_document(value), indent=2)
