"""A wheel member read once as a stream, in bounded memory (binaries/stream.py, fatscan.py): what
it keeps, that what it finds equals what the whole member gives, and that a reader asking for
bytes it did not keep gets them from a whole read instead, never a wrong answer."""

from __future__ import annotations

import random
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from wheelforge.binaries import bounded, elf, fatbin, reader, registry, stream
from wheelforge.binaries.facts import FATBINS, Reading
from wheelforge.binaries.fatscan import FatbinScan
from wheelforge.binaries.inspection import inspect_paths

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = [
    DATA / "released" / "_flashmla_extension_C.abi3.so",
    DATA / "fatbin" / "sm80_sm90a_ptx90.so",
    DATA / "fatbin" / "sm100f_sm120a_zstd.so",
    DATA / "fatbin" / "sm75_lz4.so",
    DATA / "fatbin" / "rdc_linked_sm80.so",
    DATA / "fatbin" / "no_cuda.so",
    DATA / "abicheck" / "ext.so",
]
CHECK = FATBINS | registry.reading(registry.applicable("stable"), metadata=True)


def wheel_of(tmp_path: Path, files: list[Path]) -> Path:
    path = tmp_path / "pkg-1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for file in files:
            zf.writestr(f"pkg/{file.name}", file.read_bytes())
        zf.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\nVersion: 1.0\n")
    return path


@pytest.fixture
def whole_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the members read whole (the fallback) rather than streamed."""
    counts: Counter[str] = Counter()
    real = bounded.read_member

    def read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> bytearray:
        if not info.filename.endswith(".dist-info/METADATA"):  # text members are read whole
            counts[info.filename] += 1
        return real(zf, info, display)

    monkeypatch.setattr(bounded, "read_member", read)
    return counts


def facts_of(path: Path, reading: Reading = CHECK) -> dict[str, object]:
    wheel = reader.read_wheel(path, reading)
    return {
        b.display: (b.role, b.fatbins, b.symbols, b.init_export, b.role_reason)
        for b in wheel.binaries
    }


def test_streamed_members_give_what_the_files_give(
    tmp_path: Path, whole_reads: Counter[str]
) -> None:
    wheel = wheel_of(tmp_path, SAMPLES)
    found = facts_of(wheel)
    assert sum(whole_reads.values()) == 0  # every member from its one streamed pass
    for file in SAMPLES:
        [on_disk] = inspect_paths([file])
        assert found[f"pkg/{file.name}"][1] == on_disk.entries  # type: ignore[index]


def test_with_small_caps_the_fatbin_comes_from_the_scan_and_memory_stays_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_reads: Counter[str]
) -> None:
    wheel = wheel_of(tmp_path, SAMPLES[:1])
    expected = facts_of(wheel)
    monkeypatch.setattr(stream, "HEAD_CAP", 64 << 10)
    monkeypatch.setattr(stream, "TAIL_CAP", 64 << 10)
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/_flashmla_extension_C.abi3.so")
        kept, scan = stream.stream_member(zf, info, "x", fatbins=True)
    size = SAMPLES[0].stat().st_size
    assert sum(len(p) for p in kept.pieces) < size * 0.7  # the fatbin (79 kB) was not kept
    assert scan is not None and len(scan.chains) >= 1
    assert facts_of(wheel) == expected and sum(whole_reads.values()) == 0


def test_a_reader_that_needs_more_than_was_kept_reads_the_member_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_reads: Counter[str]
) -> None:
    wheel = wheel_of(tmp_path, SAMPLES[:3])
    expected = facts_of(wheel)
    monkeypatch.setattr(stream, "HEAD_CAP", 256)  # not even .dynsym fits
    monkeypatch.setattr(stream, "TAIL_CAP", 256)
    assert facts_of(wheel) == expected
    assert set(whole_reads) == {f"pkg/{f.name}" for f in SAMPLES[:3]}


def test_the_scan_finds_the_chain_among_false_starts_in_any_chunking() -> None:
    data = SAMPLES[0].read_bytes()
    start, size = 0x16830, 0x13438  # .nv_fatbin of the sample (readelf -S)
    expected = fatbin.parse_fatbin_section(data[start : start + size], path="x", file_offset=start)
    # A fake container header in the bytes before the fatbin: a false start the scan drops.
    fake = bytearray(data)
    fake[0x8000:0x8010] = fatbin._CONTAINER.pack(fatbin.CONTAINER_MAGIC, 1, 16, 1 << 40)
    rng = random.Random(23)
    for _ in range(5):
        scan = FatbinScan()
        at = 0
        while at < len(fake):
            step = rng.choice((1, 7, 64, 333, 4096, 1 << 16))
            scan.feed(bytes(fake[at : at + step]))
            at += step
        scan.finish()
        assert scan.entries_for(start, size, "x") == expected
    assert scan.entries_for(start + 8, size, "x") is None  # no chain fills another range


def test_a_reader_of_all_the_bytes_of_a_streamed_member_gets_the_whole_read(
    tmp_path: Path, whole_reads: Counter[str]
) -> None:
    wheel = wheel_of(tmp_path, SAMPLES[:1])
    with elf.open_wheel(wheel) as opened:
        [info] = list(opened.elf_infos())
        size = reader.read_member(opened, info, lambda image: len(image.view), fatbins=False)
    assert size == SAMPLES[0].stat().st_size and sum(whole_reads.values()) == 1


def test_the_stream_hashes_the_member_in_the_same_pass(tmp_path: Path) -> None:
    import hashlib

    wheel = wheel_of(tmp_path, SAMPLES[:1])
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/_flashmla_extension_C.abi3.so")
        kept, _ = stream.stream_member(zf, info, "x", fatbins=False, digest=True)
        plain, _ = stream.stream_member(zf, info, "x", fatbins=False)
    assert kept.sha256 == hashlib.sha256(SAMPLES[0].read_bytes()).digest()
    assert plain.sha256 is None


def test_member_chunks_keeps_the_caps_and_names_a_lie(tmp_path: Path) -> None:
    wheel = wheel_of(tmp_path, SAMPLES[1:2])
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/sm80_sm90a_ptx90.so")
        chunks: Iterator[bytes] = bounded.member_chunks(zf, info, "x")
        assert b"".join(chunks) == SAMPLES[1].read_bytes()


def test_a_corrupt_fatbin_streamed_says_what_the_whole_read_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bytes of the fatbin section changed at random (seeded): the streamed read (small caps,
    so the entries come from the scan) gives the same entries or the same error as the exact
    parse of the whole file."""
    from wheelforge.binaries.elf import ElfImage, member_name
    from wheelforge.foundation.errors import BinaryFormatError

    monkeypatch.setattr(stream, "HEAD_CAP", 64 << 10)
    monkeypatch.setattr(stream, "TAIL_CAP", 64 << 10)
    good = SAMPLES[0].read_bytes()
    start, size = 0x16830, 0x13438
    rng = random.Random(2323)
    for case in range(60):
        data = bytearray(good)
        for _ in range(rng.choice((1, 2, 8))):
            at = start + rng.randrange(0, 256) if case % 2 else start + rng.randrange(size)
            data[at] = rng.randrange(256)
        path = tmp_path / f"pkg-{case}-cp310-abi3-linux_x86_64.whl"
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("pkg/_C.abi3.so", bytes(data))

        def whole(data: bytearray = data, path: Path = path) -> object:
            with ElfImage(member_name(path, "pkg/_C.abi3.so"), bytes(data)) as image:
                return fatbin.fatbin_entries(image)

        def streamed(path: Path = path) -> object:
            with elf.open_wheel(path) as opened:
                [info] = list(opened.elf_infos())
                return reader.read_member(opened, info, fatbin.fatbin_entries, fatbins=True)

        outcomes = []
        for read in (whole, streamed):
            try:
                outcomes.append([(e.kind, e.arch, e.offset, e.size) for e in read()])  # type: ignore[attr-defined]
            except BinaryFormatError as error:
                outcomes.append(error.message)
        assert outcomes[0] == outcomes[1], case
