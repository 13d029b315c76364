"""Issue 39's wrong answers and tracebacks that need no process: each hostile fixture gives one
``error:`` line naming the thing, with its class's exit code (or, where it is no error, the right
answer)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.unit.badinput import METADATA, WHEEL, Case, Link, recorded, run_case
from wheelforge.binaries.elf import ElfImage
from wheelforge.foundation.errors import BinaryFormatError
from wheelforge.foundation.writers import ReadByTheBuild

DATA = Path(__file__).resolve().parents[1] / "data"
FATBIN = DATA / "fatbin" / "sm80_sm90a_ptx90.so"
TEXT_SO = b"not a shared obj\n"  # 17 bytes of text, named _C.abi3.so

CASES: dict[str, Case] = {
    # A member named as a shared object that is no ELF file: the loader refuses it, so the
    # wheel is broken; check passed it ("no ELF files to check", exit 0).
    "check-text-abi3-so": Case(
        ("check", "{root}/" + WHEEL),
        BinaryFormatError,
        "_C.abi3.so at offset 0x0: named as a shared object but not an ELF file",
        files={WHEEL: lambda: recorded(METADATA, ("demo/_C.abi3.so", TEXT_SO))},
    ),
    "inspect-text-library-so": Case(
        ("inspect", "{root}/" + WHEEL),
        BinaryFormatError,
        "libdemo.so.1 at offset 0x0: named as a shared object but not an ELF file",
        files={WHEEL: lambda: recorded(METADATA, ("demo/libdemo.so.1", b""))},
    ),
    # --report naming a file the build reads: refused before anything runs, and nothing written
    # to it, not even the report of that failure (it replaced csrc/kernel.cu).
    "report-is-a-source": Case(
        ("build", "--matrix", "{root}/matrix.yaml", "--report", "{root}/csrc/kernel.cu"),
        ReadByTheBuild,
        "--report {root}/csrc/kernel.cu: that is {root}/csrc/kernel.cu, which the build reads",
    ),
    "report-links-to-a-source": Case(
        ("build", "--matrix", "{root}/matrix.yaml", "--report", "{root}/r.json"),
        ReadByTheBuild,
        "which the build reads",
        files={"r.json": Link("{root}/csrc/ops.cpp")},
    ),
    "report-is-a-header": Case(
        ("build", "--matrix", "{root}/matrix.yaml", "--report", "{root}/csrc/ops.h"),
        ReadByTheBuild,
        "lies in an include folder {root}/csrc, whose files the build reads",
    ),
    "report-in-a-package": Case(
        ("build", "--matrix", "{root}/matrix.yaml", "--report", "{root}/demo_ops/r.json"),
        ReadByTheBuild,
        "lies in the package folder {root}/demo_ops, whose files the build reads",
    ),
    "report-is-the-readme": Case(
        ("build", "--matrix", "{root}/matrix.yaml", "--report", "{root}/README.md"),
        ReadByTheBuild,
        "that is {root}/README.md, which the build reads",
        files={
            "README.md": "# demo\n",
            "pyproject.toml": '[project]\nname = "demo-ops"\nversion = "1.2.0"\n'
            'readme = "README.md"\n',
        },
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_one_line_and_the_exit_code_of_its_class(
    name: str,
    project: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_case(CASES[name], project, tmp_path, monkeypatch, capsys)
    if name.startswith("report-"):  # nothing the build reads was written (conftest's project)
        assert not (tmp_path / "demo_ops" / "r.json").exists()
        assert (tmp_path / "csrc" / "kernel.cu").read_text() == "// kernel\n"
        assert (tmp_path / "csrc" / "ops.cpp").read_text() == "// ops\n"
        assert (tmp_path / "csrc" / "ops.h").read_text() == "#pragma once\n"
        readme = tmp_path / "README.md"
        assert not readme.exists() or readme.read_text() == "# demo\n"


def _with_shstrndx(data: bytes, link: int, *, kind: int | None = None) -> bytes:
    """A 64-bit little-endian ELF file's e_shstrndx made SHN_XINDEX, section 0's sh_link
    *link* (where the ELF specification puts the real index); *kind*: the name table's type."""
    out = bytearray(data)
    shoff = struct.unpack_from("<Q", out, 0x28)[0]
    entsize, _count, index = struct.unpack_from("<HHH", out, 0x3A)
    struct.pack_into("<H", out, 0x3E, 0xFFFF)
    struct.pack_into("<I", out, shoff + 0x28, link)
    if kind is not None:
        struct.pack_into("<I", out, shoff + index * entsize + 4, kind)
    return bytes(out)


def _names(data: bytes) -> list[str]:
    with ElfImage("x.so", data) as image:
        return [s.name for s in image.section_headers]


def test_shn_xindex_is_read_from_section_0_or_is_corrupt() -> None:
    """e_shstrndx SHN_XINDEX (0xFFFF): the index is section 0's sh_link, as the ELF
    specification says; a file that sends the reader there and finds 0, or a name table that is
    not SHT_STRTAB, is corrupt (exit 4), never a file with "no CUDA code"."""
    real = FATBIN.read_bytes()
    index = struct.unpack_from("<H", real, 0x3E)[0]
    assert ".nv_fatbin" in _names(_with_shstrndx(real, index))
    with pytest.raises(BinaryFormatError, match=r"e_shstrndx is SHN_XINDEX.*sh_link.*is 0"):
        _names(_with_shstrndx(real, 0))
    with pytest.raises(BinaryFormatError, match=r"section name table, section \d+, is of type 1"):
        _names(_with_shstrndx(real, index, kind=1))


def test_inspect_says_corrupt_not_no_cuda_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wheelforge.cli.app import main

    path = tmp_path / "x.so"
    path.write_bytes(_with_shstrndx(FATBIN.read_bytes(), 0))
    code = main(["inspect", str(path)])
    out, err = capsys.readouterr()
    assert code == 4 and "no CUDA code" not in out + err
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [
        f"error: {path} at offset 0x3e: corrupt ELF headers (e_shstrndx is SHN_XINDEX, and "
        "section 0's sh_link, where the ELF specification puts the section name table's "
        "index, is 0)"
    ]


def test_a_record_nested_too_deeply_is_one_malformed_record(tmp_path: Path) -> None:
    """The record comes from a child that runs the project's code, which can write it too: a
    list 100,000 deep (json.loads' RecursionError) is one MalformedRecord (exit 3), never a
    traceback."""
    from wheelforge.adoption.record import childdocument
    from wheelforge.adoption.record.setuprun import MalformedRecord

    path = tmp_path / "record.json"
    path.write_text('{"setup_kwargs": {"keywords": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    with pytest.raises(MalformedRecord, match="record.json: ") as caught:
        childdocument.load(path)
    assert caught.value.exit_code == 3


def test_the_child_shows_a_value_of_any_depth() -> None:
    """setup(keywords=<a list 100,000 deep>): the child's repr of it is short, no
    RecursionError (init printed the child's 30-line traceback)."""
    from wheelforge.adoption.child import setup_child

    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    shown = setup_child._jsonable(deep)
    for _ in range(7):
        shown = shown[0]
    assert shown == {"repr": "[[[[...]]]]"}


@pytest.mark.parametrize(
    "hook",
    ["get_requires_for_build_editable", "prepare_metadata_for_build_editable", "build_editable"],
)
def test_pip_install_editable_is_one_line(
    hook: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PEP 660's hooks refuse in one line, exit 2: without them pip ran ``setup.py develop``,
    a 67-line setuptools traceback. The integration test runs pip itself."""
    from wheelforge import build_meta

    run = getattr(build_meta, hook)
    with pytest.raises(SystemExit) as exited:
        run() if hook.startswith("get_") else run(str(tmp_path))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if ln.strip()] == [
        "error: wheelforge's backend makes no editable installs (pip install -e, PEP 660): the "
        "compiled extension would not follow edits of its sources; install the wheel instead "
        "(pip install . --no-build-isolation), and again after each edit"
    ]


@pytest.mark.parametrize("columns", ["0", "1", "20", "10000", "banana"])
def test_a_terminal_of_any_columns_shows_the_error(columns: str) -> None:
    """COLUMNS=0 at a terminal: rich laid the error out for 0 columns and printed nothing
    (issue 39); at any width every word of it is shown."""
    import io

    from rich.console import Console

    from wheelforge.foundation import log

    out = io.StringIO()
    console = Console(
        file=out, force_terminal=True, _environ=log.console_environ({"COLUMNS": columns})
    )
    assert console.width >= log.MIN_COLUMNS
    log.say("[bold red]error:[/bold red] /x/y.whl: no such file or folder", on=console)
    assert out.getvalue().split() == [
        "\x1b[1;31merror:\x1b[0m",
        *["/x/y.whl:", "no", "such", "file", "or", "folder"],
    ]


HOSTILE_FOLDER = "/tmp/a b;touch pwned;$(id)`id`'q\"/d"


def test_the_pip_install_hint_pastes_as_one_argument() -> None:
    """``next: pip install PATH`` with a folder of shell characters: the hint is shell-quoted,
    so pasted it installs that wheel and runs nothing else (issue 39)."""
    import shlex

    from wheelforge.build.results import BuildReport, VariantResult
    from wheelforge.cli.build_screen import next_step
    from wheelforge.configuration.archs import ArchSet, parse_arch_list

    wheel = Path(HOSTILE_FOLDER) / "demo-1.0-cp310-abi3-linux_x86_64.whl"
    variant = VariantResult(
        variant_id="v", arch_set=ArchSet("default", parse_arch_list("8.0", source="t")), toolkit="13.0.88", torch="2.13.0+cpu", wheel=wheel,
        wheel_size=1, sha256="0" * 64, sources=1, compiled=(), reused=False, binaries=(),
        arch_checks=(), abi_checks=(), size=None, stages=(), seconds=1.0,
    )  # fmt: skip
    report = BuildReport(
        matrix=Path("m.yaml"), target_version=(2, 10), built_against="2.13.0", variants=(variant,)
    )
    hint = next_step(report)
    assert hint is not None
    from rich.text import Text

    command = Text.from_markup(hint).plain.removeprefix("next: ").split(" (a 'tests'")[0]
    assert shlex.split(command) == ["pip", "install", str(wheel)]


def test_the_init_hint_pastes_as_one_argument(tmp_path: Path) -> None:
    import shlex

    from wheelforge.adoption.writer.matrixfile import InitResult
    from wheelforge.cli.init_screen import next_step

    matrix = Path(HOSTILE_FOLDER) / "matrix.yaml"
    result = InitResult(path=matrix, text="", front_door="setup.py", hand=())
    command = next_step(result, tmp_path).removeprefix("next: ").split(" (wheelforge")[0]
    assert shlex.split(command) == ["wheelforge", "build", "--matrix", str(matrix)]


def test_a_killed_builds_jobserver_folder_is_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGKILLed build leaves its jobserver folder (no cleanup runs); the next build's sweep
    removes it: nobody holds its flock any more. One in use (held) stays, as does a folder of
    the old name until it is a day old, and anything not a jobserver folder."""
    import os
    import tempfile
    import time

    from wheelforge.build import jobserver

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    killed = tmp_path / f"{jobserver.PREFIX}999999-abc"
    killed.mkdir()
    os.mkfifo(killed / "fifo")
    old_name = tmp_path / f"{jobserver.PREFIX}abcdefgh"
    old_name.mkdir()
    other = tmp_path / "not-ours"
    other.mkdir()
    alive = jobserver.Jobserver(2)
    alive.makeflags()  # made in tmp_path, and held
    assert alive.fifo is not None and alive.fifo.parent.parent == tmp_path
    try:
        assert jobserver.sweep() == [killed]
        assert alive.fifo.exists() and old_name.is_dir() and other.is_dir()
        assert jobserver.sweep(now=time.time() + 2 * 86400) == [old_name]
        assert alive.fifo.exists()
    finally:
        alive.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-ours"]


def test_the_quick_noops_records_are_the_caches_own(tmp_path: Path) -> None:
    """The quick no-op's records (probes/quick-noop/<32 hex>.json) are probe results to
    `cache list` and `cache prune`: they were "not wheelforge's" and no prune removed them. A
    file of another name there is still not wheelforge's, and left alone."""
    from wheelforge.build import caches as cache
    from wheelforge.cli import quicknoop
    from wheelforge.foundation.cachehome import RECORDS

    records = tmp_path / RECORDS
    records.mkdir(parents=True)
    record = records / f"{quicknoop._key(['build'])}.json"
    record.write_text("{}")
    stranger = records / "notes.txt"
    stranger.write_text("mine")
    kinds = {e.path: e.kind for e in cache.entries(tmp_path)}
    assert kinds == {record: cache.PROBE, stranger: cache.FOREIGN}
    listed = cache.list_cache(tmp_path).entries
    assert [(e.kind, e.name) for e in listed if e.kind == cache.PROBE] == [
        (cache.PROBE, "1 probe results")
    ]
    result = cache.prune(tmp_path, every=True)
    assert [e.path for e in result.removed] == [record] and not record.exists()
    assert stranger.read_text() == "mine"


def test_the_job_cost_history_and_dist_toolchains_are_entries(tmp_path: Path) -> None:
    """What wheelforge keeps at the cache's top (job-costs.json, sccache-dist's toolchains) is
    listed, each an entry, and pruned by name or with --all; it was left out of both."""
    from wheelforge.build import caches as cache
    from wheelforge.planning import jobcosts
    from wheelforge.toolchain import compilecache

    history = tmp_path / jobcosts.HISTORY
    history.write_text('{"entries": {}}\n')
    dist = tmp_path / compilecache.DIST_TOOLCHAINS
    dist.mkdir()
    (dist / "t.tar.gz").write_bytes(b"x")
    kinds = {e.path: e.kind for e in cache.list_cache(tmp_path).entries}
    assert kinds == {history: cache.HISTORY, dist: cache.DIST}
    assert [e.path for e in cache.prune(tmp_path, names=[jobcosts.HISTORY]).removed] == [history]
    assert [e.path for e in cache.prune(tmp_path, every=True).removed] == [dist]
    assert not history.exists() and not dist.exists()


def test_an_old_report_beside_the_sources_is_replaced(
    project: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--report naming an earlier report in a source folder is no input of the build: not
    refused (only sources, headers and package files are)."""
    from tests.unit.conftest import GOOD_MATRIX
    from wheelforge.build import preflight
    from wheelforge.configuration.matrix.load import load_matrix

    project("")  # type: ignore[operator]
    (tmp_path / "matrix.yaml").write_text(GOOD_MATRIX)
    old = tmp_path / "csrc" / "build-report.json"
    old.write_text("{}")
    matrix = load_matrix(tmp_path / "matrix.yaml")
    preflight.refuse_read(matrix, tmp_path / "build", old, "--report")
    with pytest.raises(ReadByTheBuild, match="lies in an include folder"):
        preflight.refuse_read(matrix, tmp_path / "build", tmp_path / "csrc" / "ops.h", "--report")
