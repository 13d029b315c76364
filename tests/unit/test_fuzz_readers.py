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
from wheelforge.foundation.errors import BinaryFormatError, ConfigError

DATA = Path(__file__).resolve().parent.parent / "data"
SEEDS = [
    (DATA / "fatbin" / name).read_bytes()
    for name in ("sm80_sm90a_ptx90.so", "sm75_lz4.so", "sm100f_sm120a_zstd.so", "add_one_sm80.o")
] + [(DATA / "abicheck" / "ext.so").read_bytes()]
TARGET = abicheck.CheckTarget(torch=(2, 10), python=(3, 10), guards={})

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
