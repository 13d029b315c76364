"""Issue 32, item 6, through the command line as a user runs it: each hostile input (built here)
ends in one clear line or a real answer, with its class's exit code, no traceback, and a peak
memory under PEAK_KIB (measured: the command runs as the only child of a small wrapper, which
reports its ru_maxrss; a size assertion, not a timed one)."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
import zipfile
from base64 import urlsafe_b64encode
from pathlib import Path

from tests.integration.helpers import needs_nvcc, one_kernel_project, wheelforge

PEAK_KIB = 1 << 20  # 1 GiB: the 1M-entry fatbin's JSON took 2.7 GB, a 300 MB METADATA 4.6 GB
_WRAP = """
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    code = subprocess.run(sys.argv[3:], stdout=out, stderr=open(sys.argv[2], "wb")).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measured(tmp_path: Path, *args: str | Path) -> tuple[int, Path, str, int]:
    """``python -m wheelforge ARGS``: exit code, its stdout (a file), stderr, peak RSS in KiB."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    argv = [sys.executable, "-m", "wheelforge", *map(str, args)]
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", _WRAP, out, err, *argv], capture_output=True, text=True, env=env
    )  # fmt: skip
    code, peak = map(int, done.stdout.split())
    text = err.read_text(errors="replace")
    assert "Traceback" not in text, text
    return code, out, text, peak


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


# --- a fatbin of a million entries -----------------------------------------------------------
def _elf(section: bytes, name: bytes = b".nv_fatbin") -> bytes:
    """A minimal ELF64 relocatable object holding *section* (and the section-name table)."""
    names = b"\0" + name + b"\0.shstrtab\0"
    names_at = 64 + len(section)
    headers_at = -(-(names_at + len(names)) // 8) * 8
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, headers_at, 0, 64, 0, 0, 64, 3, 2
    )

    def shdr(name_at: int, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name_at, kind, 0, 0, offset, size, 0, 0, 8, 0)

    table = bytes(64) + shdr(1, 1, 64, len(section)) + shdr(len(name) + 2, 3, names_at, len(names))
    return header + section + names + bytes(headers_at - names_at - len(names)) + table


def _fatbin(entries: int) -> bytes:
    """One container of *entries* SASS entries for sm_90 (64-byte headers, empty payloads)."""
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x0101, 64, 0, 0, 0x40, 8, 1, 90, 0, 0, 0x11, 0, 0)
    body = entry * entries
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_inspect_json_streams_a_million_fatbin_entries_in_bounded_memory(tmp_path: Path) -> None:
    """Streamed rather than refused past a cap: if the entries are real, a user wants them, and
    the document (280 MB here) is written a piece at a time. Before: 2.7 GB peak."""
    obj = tmp_path / "million.o"
    obj.write_bytes(_elf(_fatbin(1_000_000)))
    assert obj.stat().st_size < 70 << 20
    code, out, err, peak = measured(tmp_path, "inspect", "--json", obj)
    assert code == 0, err
    assert peak < PEAK_KIB, f"peak RSS {peak} KiB"
    entries = 0
    with out.open() as text:
        head = text.read(64)
        for line in text:
            entries += line == '          "kind": "sass",\n'
    assert head.startswith('{\n  "schema_version": 1,\n  "files": [')
    assert entries == 1_000_000
    code, out, err, peak = measured(tmp_path, "inspect", obj)
    assert code == 0 and peak < PEAK_KIB and "1000000" in out.read_text(), err


# --- a 300 MB METADATA ---------------------------------------------------------------------------
def _record_line(name: str, data_sha: hashlib._Hash, size: int) -> str:
    digest = urlsafe_b64encode(data_sha.digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{size}\n"


def _wheel_with_metadata(path: Path, *, headers: int, body: int) -> Path:
    """A pure wheel with RECORD whose METADATA holds *headers* bytes of Requires-Dist lines
    and a long description of *body* bytes, stored (no compression: no ratio cap refuses it)."""
    meta_name = "demo-1.0.dist-info/METADATA"
    record = ""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        sha, size = hashlib.sha256(), 0
        with zf.open(zipfile.ZipInfo(meta_name), "w", force_zip64=True) as member:

            def write(data: bytes) -> None:
                nonlocal size
                sha.update(data)
                member.write(data)
                size += len(data)

            write(b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n")
            line = b"Requires-Dist: numpy>=1.0\n" * 40_000
            while size < headers:
                write(line)
            if body:
                write(b"\n")
                block = b"lorem ipsum dolor sit amet " * 40_000
                while size < headers + body:
                    write(block)
        record += _record_line(meta_name, sha, size)
        for name, text in (("demo/__init__.py", b""), ("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")):  # fmt: skip
            zf.writestr(name, text)
            record += _record_line(name, hashlib.sha256(text), len(text))
        zf.writestr("demo-1.0.dist-info/RECORD", record + "demo-1.0.dist-info/RECORD,,\n")
    return path


def test_check_reads_a_300mb_metadata_within_bounded_memory(tmp_path: Path) -> None:
    """A 300 MB long description is never inflated beyond its headers (the RECORD hash streams
    it); 300 MB of headers is refused at 16 MiB. Before: 2.9 GB and 4.6 GB, minutes."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    body = _wheel_with_metadata(
        tmp_path / "a" / "demo-1.0-py3-none-any.whl", headers=0, body=300 << 20
    )
    code, _, err, peak = measured(tmp_path, "check", body)
    assert peak < PEAK_KIB, f"peak RSS {peak} KiB"
    assert len(_errors(err)) <= 1 and code in (0, 4), err
    assert "METADATA" not in "".join(_errors(err)), err
    heads = _wheel_with_metadata(
        tmp_path / "b" / "demo-1.0-py3-none-any.whl", headers=300 << 20, body=0
    )
    code, _, err, peak = measured(tmp_path, "check", heads)
    assert peak < PEAK_KIB, f"peak RSS {peak} KiB"
    assert code == 4 and len(_errors(err)) == 1, err
    assert "METADATA: its headers run past 16 MiB without the blank line" in _errors(err)[0]


# --- init on extra_compile_args=42 --------------------------------------------------------------
def test_init_on_extra_compile_args_42_is_one_line(tmp_path: Path) -> None:
    """setup.py runs (the capture child records 42); before: TypeError from setuprecord."""
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    (tmp_path / "demo" / "k.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        "setup(name='demo', version='1.0', packages=['demo'],\n"
        "      ext_modules=[CUDAExtension('demo._C', ['demo/k.cu'], extra_compile_args=42)],\n"
        "      cmdclass={'build_ext': BuildExtension})\n"
    )
    for run in (wheelforge("init", tmp_path, cwd=tmp_path), wheelforge("init", "--no-run", tmp_path, cwd=tmp_path)):  # fmt: skip
        assert run.code == 2 and len(_errors(run.err)) == 1, run.err
        assert "extra_compile_args is 42, where setuptools takes a list of strings" in run.err
        assert not (tmp_path / "matrix.yaml").exists()


# --- a borrowed torch answering include_dirs: [] -------------------------------------------------
def _fake_torch_python(root: Path) -> Path:
    """An interpreter whose torch (a stand-in package first on its path) is 2.13.0 with the
    stable-ABI headers' folder, but whose cpp_extension names no include folder."""
    torch = root / "site" / "torch"
    (torch / "utils").mkdir(parents=True)
    (torch / "include" / "torch" / "csrc" / "stable").mkdir(parents=True)
    (torch / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    (torch / "__init__.py").write_text(
        "from . import version\n__version__ = version.__version__\n"
        "class _C:\n    _GLIBCXX_USE_CXX11_ABI = True\n"
    )
    (torch / "utils" / "__init__.py").write_text("")
    (torch / "utils" / "cpp_extension.py").write_text(
        "def include_paths(device='cpu'):\n    return []\n"
        "def library_paths(device='cpu'):\n    return []\n"
    )
    python = root / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nPYTHONPATH={root / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


@needs_nvcc
def test_torch_from_answering_no_include_dirs_is_one_line(tmp_path: Path) -> None:
    python = _fake_torch_python(tmp_path / "py")
    project = one_kernel_project(tmp_path / "p")
    matrix = project / "matrix.yaml"
    matrix.write_text(
        matrix.read_text().replace("torch: '>=2.10'", "abi: unstable\ntorch: installed")
    )
    run = wheelforge(
        "build", "--dry-run", "--torch-from", python, "--cache-dir", tmp_path / "cache",
        cwd=project,
    )  # fmt: skip
    assert run.code == 5 and len(_errors(run.err)) == 1, run.err
    assert f"{python}'s torch answered include_dirs: [] (torch.utils.cpp_extension" in run.err


# --- a package file whose name is not UTF-8 ------------------------------------------------------
@needs_nvcc
def test_a_package_file_named_in_other_bytes_fails_the_build_in_one_line(tmp_path: Path) -> None:
    """Before: UnicodeEncodeError when packing, after the compile; now the build's one walk of
    the project (planning/selection.py) refuses it before anything is compiled."""
    project = one_kernel_project(tmp_path / "p")
    (project / "tiny" / os.fsdecode(b"caf\xe9.py")).write_text("x = 1\n")
    run = wheelforge(
        "build", "--no-import-check", "--cache-dir", tmp_path / "cache", cwd=project
    )  # fmt: skip
    assert run.code == 2 and len(_errors(run.err)) == 1, run.err
    assert "tiny/caf\\xe9.py: the file's name is not UTF-8" in _errors(run.err)[0], run.err
    assert not list((project / "dist").glob("*.whl")) if (project / "dist").exists() else True
