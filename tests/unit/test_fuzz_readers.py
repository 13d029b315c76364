"""Fuzzing the readers of untrusted binaries (fatbin, ELF, wheel) with hypothesis: whatever the
bytes, a reader returns or raises the one error of a corrupt binary (BinaryFormatError), or a
ConfigError for an input that is not a binary at all; never anything else, never unbounded.

The examples are derived from the real binaries in tests/data, mutated (bytes flipped, cut,
spliced), plus raw bytes. The profile is derandomized with a fixed example count, so CI time is
bounded and runs repeat; WHEELFORGE_FUZZ_EXAMPLES raises the count for a long local run."""

from __future__ import annotations

import contextlib
import io
import os
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wheelforge.binaries import abicheck, bounded, inspection
from wheelforge.binaries.fatbin import read_fatbin_entries
from wheelforge.binaries.rule import CheckTarget
from wheelforge.foundation.errors import BinaryFormatError, ConfigError

DATA = Path(__file__).resolve().parent.parent / "data"
SEEDS = [
    (DATA / "fatbin" / name).read_bytes()
    for name in ("sm80_sm90a_ptx90.so", "sm75_lz4.so", "sm100f_sm120a_zstd.so", "add_one_sm80.o")
] + [(DATA / "abicheck" / "ext.so").read_bytes()]
TARGET = CheckTarget(torch=(2, 10), python=(3, 10), guards={})

settings.register_profile(
    "wheelforge-ci",
    derandomize=True,
    max_examples=int(os.environ.get("WHEELFORGE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
FUZZ = settings.get_profile("wheelforge-ci")


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A seed binary with a few bytes overwritten, a slice cut out, or truncated."""
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(0, 8))):
        # Headers are where the offsets and sizes live: bias toward the first kilobytes.
        limit = draw(st.sampled_from([64, 1024, len(data)]))
        pos = draw(st.integers(0, min(limit, len(data)) - 1))
        data[pos] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        start = draw(st.integers(0, len(data)))
        data = data[:start] + data[start + draw(st.integers(0, 4096)) :]
    return bytes(data[: draw(st.integers(0, len(data)))]) if draw(st.booleans()) else bytes(data)


binaries = st.one_of(mutated(), st.binary(max_size=512))


@FUZZ
@given(binaries)
def test_fatbin_reader(data: bytes) -> None:
    with contextlib.suppress(BinaryFormatError):
        read_fatbin_entries(data, path="fuzz.so")


@FUZZ
@given(binaries)
def test_elf_reader(data: bytes) -> None:
    with contextlib.suppress(BinaryFormatError):
        abicheck.check_elf(data, path="fuzz.so", target=TARGET)


@pytest.fixture(scope="module")
def so_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.so"


@FUZZ
@given(binaries)
def test_elf_reader_from_a_file(so_path: Path, data: bytes) -> None:
    so_path.write_bytes(data)
    with contextlib.suppress(BinaryFormatError, ConfigError):
        abicheck.check_paths([so_path], torch=(2, 10), python=(3, 10), guards={})


def _wheel(member: bytes, name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nRequires-Dist: torch>=2.10\n")
        zf.writestr(name, member)
    return buffer.getvalue()


@st.composite
def wheels(draw: st.DrawFn) -> bytes:
    """Wheels holding a fuzzed member, themselves mutated in their zip structures."""
    name = draw(st.sampled_from(["demo/_C.abi3.so", "../x.so", "/abs.so", "demo\\x.so"]))
    data = bytearray(_wheel(draw(binaries), name))
    for _ in range(draw(st.integers(0, 6))):
        pos = draw(st.integers(0, len(data) - 1))
        data[pos] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.fixture(scope="module")
def wheel_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "demo-1.0-cp310-abi3-linux_x86_64.whl"


@FUZZ
@given(wheels())
def test_wheel_readers(wheel_path: Path, data: bytes) -> None:
    wheel_path.write_bytes(data)
    with contextlib.suppress(BinaryFormatError):
        inspection.inspect_paths([wheel_path])
    with contextlib.suppress(BinaryFormatError, ConfigError):
        abicheck.check_paths([wheel_path], torch=None, python=None, guards={})


def test_unsafe_member_names() -> None:
    names = ["a/b.so", "../x", "a/../../x", "/etc/x", "C:/x", "\\\\server\\x", "a/..b", "..a/b"]
    assert bounded.unsafe_member_names(names) == [
        "../x",
        "a/../../x",
        "/etc/x",
        "C:/x",
        "\\\\server\\x",
    ]


# --- issue 21: the text parsers and the stored-entry reader, fuzzed ------------------------------
# Texts that hit the classes: other scripts' digits, digit runs beyond int()'s limit, line
# breaks of every kind, NULs, escapes, surrogates written as their UTF-8 bytes.
_HOSTILE = st.sampled_from(
    [
        "٤",
        "８",
        "²",
        "9" * 5000,
        "0" * 5000 + "1",
        "\u2028",
        "\r\n",
        "\0",
        "\x1b[2J",
        "\x9b31m",  # C1 CSI
        "\u202e",  # right-to-left override (Trojan Source)
        "\u2066",  # left-to-right isolate
        "\u200b",  # zero-width space
        "x" * 140_000,  # a field beyond csv's limit (128 KiB), a name a zip allows
        "\ud800",
        ".",
        "+",
        "-",
        " ",
        "e",
        "KiB",
        "+PTX",
        "sm_",
        ">=",
        "torch",
        "[",
        "]",
    ]
)
texts = st.lists(st.one_of(_HOSTILE, st.text(max_size=8)), max_size=6).map("".join)


def _raw(text: str) -> bytes:
    """*text* as a file would hold it: a lone surrogate becomes bytes that are not UTF-8."""
    return text.encode("utf-8", "surrogatepass")


@FUZZ
@given(texts)
def test_number_parsers(text: str) -> None:
    from packaging.requirements import InvalidRequirement
    from packaging.specifiers import InvalidSpecifier
    from packaging.version import InvalidVersion

    from wheelforge.foundation import numbers

    value = numbers.whole(text, low=1, high=numbers.MAX_JOBS)
    assert value is None or (1 <= value <= numbers.MAX_JOBS and text.strip().isascii())
    with contextlib.suppress(InvalidVersion):
        numbers.version(text)
    with contextlib.suppress(InvalidSpecifier):
        numbers.specifier(text)
    with contextlib.suppress(InvalidRequirement):
        numbers.requirement(text)


@FUZZ
@given(texts)
def test_value_parsers_of_flags_and_matrix(text: str) -> None:
    from wheelforge.configuration import settings
    from wheelforge.configuration.archs import parse_arch_list
    from wheelforge.configuration.bytesizes import parse_size
    from wheelforge.configuration.matrix.torchspec import parse_torch_spec

    with contextlib.suppress(ConfigError):
        parse_arch_list(text, source="--archs")
    with contextlib.suppress(ConfigError):
        parse_size(text, where="--size-budget")
    with contextlib.suppress(ConfigError):
        settings.torch_floor_flag(text)
    with contextlib.suppress(ConfigError):
        settings.source_date_epoch(text)
    with contextlib.suppress(ValueError):  # parse_torch_spec's documented error
        parse_torch_spec(text)


@pytest.fixture(scope="module")
def entry_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "entry.json"


@FUZZ
@given(st.one_of(st.binary(max_size=256), texts.map(_raw), st.just(b"[" * 5000 + b"]" * 5000)))
def test_stored_entries(entry_path: Path, data: bytes) -> None:
    """Whatever a stored entry holds, reading it gives its model or None."""
    from wheelforge.foundation import cachefiles
    from wheelforge.toolchain.probecache import ProbeEntry

    entry_path.write_bytes(data)
    value = cachefiles.load(entry_path, ProbeEntry, what="a fuzzed entry", within=entry_path.parent)
    assert value is None or isinstance(value, ProbeEntry)


@pytest.fixture(scope="module")
def setup_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "setup.py"


@FUZZ
@given(st.one_of(texts, st.binary(max_size=128).map(lambda b: b.decode("latin-1"))))
def test_setup_py_reader(setup_path: Path, text: str) -> None:
    from wheelforge.adoption.doors.setuppy import scan_setup_py

    setup_path.write_bytes(_raw("from setuptools import setup\nsetup(name=" + text + ")\n"))
    with contextlib.suppress(ConfigError):
        scan = scan_setup_py(setup_path)
        assert all("\n" not in n and len(n) < 400 for n in scan.notes)


def _recorded_wheel(member: bytes, record: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nRequires-Dist: torch>=2.10\n")
        zf.writestr("demo/_C.abi3.so", member)
        zf.writestr("demo-1.0.dist-info/RECORD", record)
    return buffer.getvalue()


@FUZZ
@given(binaries, texts)
def test_record_rule_on_fuzzed_records(wheel_path: Path, member: bytes, record: str) -> None:
    """The layout rule reads RECORD as data: any text there is findings, never an exception."""
    wheel_path.write_bytes(_recorded_wheel(member, _raw(record + "\n" + record.replace(",", "\n"))))
    with contextlib.suppress(BinaryFormatError, ConfigError):
        abicheck.check_paths([wheel_path], torch=None, python=None, guards={})


@FUZZ
@given(texts)
def test_printable_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    """log.printable, which every name from a file goes through before the terminal: no control
    or invisible format character left, and no run without a space over its cap."""
    import re

    from wheelforge.foundation import log

    shown = log.printable(text)
    assert not log._CONTROL_RE.search(shown)
    assert all(len(run) <= log.RUN_CAP for run in re.findall(r"\S+", shown))
