"""The fatbin reader on small real binaries (tests/data/fatbin, see build.sh there) and on corrupt
and truncated copies of them, made here from their bytes. No compiler, no subprocess."""

from __future__ import annotations

import io
import random
import struct
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import (
    FatbinEntry,
    entry_payload,
    parse_fatbin_section,
    ptx_target,
    read_fatbin_entries,
)
from wheelforge.binaries.inspection import inspect_paths
from wheelforge.documents.inspect_schema import inspect_document
from wheelforge.foundation.document import to_document
from wheelforge.foundation.errors import BinaryFormatError, ConfigError

DATA = Path(__file__).parents[1] / "data" / "fatbin"

# (kind, arch, container, compression) of every entry, in file order; cuobjdump 13.5 lists the
# same (kind, arch) pairs, naming the f cubin sm_100 and each PTX sm_XX.
EXPECTED = {
    "sm80_sm90a_ptx90.so": [
        ("sass", "sm_80", 0, "none"),
        ("sass", "sm_90a", 0, "none"),
        ("ptx", "compute_90", 0, "zstd"),
        ("sass", "sm_80", 1, "none"),
        ("sass", "sm_90a", 1, "none"),
        ("ptx", "compute_90", 1, "zstd"),
    ],
    "sm100f_sm120a_zstd.so": [
        ("sass", "sm_100f", 0, "zstd"),
        ("ptx", "compute_100f", 0, "zstd"),
        ("sass", "sm_120a", 0, "zstd"),
    ],
    "sm75_lz4.so": [("sass", "sm_75", 0, "lz4"), ("ptx", "compute_75", 0, "lz4")],
    "add_one_sm80.o": [("sass", "sm_80", 0, "none"), ("ptx", "compute_80", 0, "zstd")],
    "add_one_rdc_sm86.o": [("sass", "sm_86", 0, "zstd"), ("ptx", "compute_86", 0, "zstd")],
    # The device-linked image only: __nv_relfatbin is read only when there is no .nv_fatbin.
    "rdc_linked_sm80.so": [("sass", "sm_80", 0, "none")],
    "no_cuda.so": [],
}
BINARIES = sorted(EXPECTED)


def load(name: str) -> bytes:
    return (DATA / name).read_bytes()


def section(data: bytes, name: str = ".nv_fatbin") -> tuple[int, int, int]:
    """File offset and size of a section, and the offset of its section header."""
    elf = ELFFile(io.BytesIO(data))
    index = elf.get_section_index(name)
    assert index is not None
    header = elf.get_section(index).header
    return header["sh_offset"], header["sh_size"], elf["e_shoff"] + index * elf["e_shentsize"]


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def entries_of(name: str) -> list[FatbinEntry]:
    return read_fatbin_entries(load(name), path=name)


def assert_format_error(excinfo: pytest.ExceptionInfo[BinaryFormatError], path: str) -> None:
    error = excinfo.value
    assert error.path == path
    assert error.offset is not None
    assert str(error).startswith(f"{path} at offset {error.offset:#x}: ")


# --- decoding real binaries -------------------------------------------------------------------


@pytest.mark.parametrize("name", BINARIES)
def test_entries_of_checked_in_binaries(name: str) -> None:
    found = [(e.kind, e.arch, e.container, e.compression) for e in entries_of(name)]
    assert found == EXPECTED[name]


def test_family_and_arch_specific_variants() -> None:
    sass_f, ptx_f, sass_a = entries_of("sm100f_sm120a_zstd.so")
    assert (sass_f.sm, sass_f.variant, sass_f.version) == (100, "f", "1.8")
    assert (ptx_f.sm, ptx_f.variant, ptx_f.version) == (100, "f", "9.0")
    assert (sass_a.sm, sass_a.variant) == (120, "a")
    assert sass_f.stored_size < sass_f.size  # compressed


def test_offsets_point_at_entry_headers() -> None:
    data = load("sm80_sm90a_ptx90.so")
    start, size, _ = section(data)
    entries = read_fatbin_entries(data, path="x")
    assert entries[0].offset == start + 16  # after the first container header
    for entry in entries:
        assert start <= entry.offset < start + size
        kind, _, header_size, stored = struct.unpack_from("<HHIQ", data, entry.offset)
        assert kind == (2 if entry.kind == "sass" else 1)
        assert header_size >= 64
        assert stored == entry.stored_size


def test_uncompressed_size_is_stored_size() -> None:
    for entry in entries_of("sm80_sm90a_ptx90.so"):
        if entry.compression == "none":
            assert entry.size == entry.stored_size


def test_accepts_memoryview_and_bytearray() -> None:
    data = load("sm75_lz4.so")
    expected = read_fatbin_entries(data, path="x")
    assert read_fatbin_entries(memoryview(data), path="x") == expected
    assert read_fatbin_entries(bytearray(data), path="x") == expected


@pytest.mark.parametrize("name", [n for n in BINARIES if EXPECTED[n]])
def test_payloads_decompress(name: str) -> None:
    data = load(name)
    for entry in read_fatbin_entries(data, path=name):
        payload = entry_payload(data, entry, path=name)
        assert len(payload) == entry.size
        if entry.kind == "sass":
            assert payload.startswith(b"\x7fELF")
        else:
            assert f".version {entry.version}".encode() in payload


@pytest.mark.parametrize(
    ("name", "targets"),
    [
        ("sm80_sm90a_ptx90.so", ["sm_90", "sm_90"]),
        ("sm100f_sm120a_zstd.so", ["sm_100f"]),
        ("sm75_lz4.so", ["sm_75"]),
        ("add_one_sm80.o", ["sm_80"]),
        ("add_one_rdc_sm86.o", ["sm_86"]),
    ],
)
def test_ptx_target(name: str, targets: list[str]) -> None:
    data = load(name)
    ptx = [e for e in read_fatbin_entries(data, path=name) if e.kind == "ptx"]
    assert [ptx_target(data, e, path=name) for e in ptx] == targets


def test_ptx_target_needs_a_ptx_entry() -> None:
    data = load("sm75_lz4.so")
    sass = read_fatbin_entries(data, path="x")[0]
    with pytest.raises(ValueError, match="needs a PTX entry"):
        ptx_target(data, sass, path="x")


def test_to_json() -> None:
    entry = entries_of("sm100f_sm120a_zstd.so")[1]
    assert to_document(entry) == {  # inspect --json and the build report write it so
        "kind": "ptx",
        "arch": "compute_100f",
        "sm": 100,
        "variant": "f",
        "container": 0,
        "offset": entry.offset,
        "stored_size": 360,
        "size": 665,
        "compression": "zstd",
        "version": "9.0",
    }


# --- corrupt and truncated input --------------------------------------------------------------


def test_not_an_elf_file() -> None:
    with pytest.raises(BinaryFormatError) as excinfo:
        read_fatbin_entries(b"PK\x03\x04 not an ELF file", path="x.so")
    assert_format_error(excinfo, "x.so")
    assert excinfo.value.offset == 0


@pytest.mark.parametrize("length", [0, 3, 4, 16, 40, 63, 64, 1000, -200, -64, -1])
def test_truncated_elf_file(length: int) -> None:
    data = load("sm80_sm90a_ptx90.so")
    with pytest.raises(BinaryFormatError) as excinfo:
        read_fatbin_entries(data[:length], path="cut.so")
    assert_format_error(excinfo, "cut.so")


def test_section_headers_past_the_end() -> None:
    data = load("sm75_lz4.so")
    shoff = ELFFile(io.BytesIO(data))["e_shoff"]
    with pytest.raises(BinaryFormatError) as excinfo:
        read_fatbin_entries(patched(data, 0x28, "<Q", shoff + len(data)), path="x.so")
    assert_format_error(excinfo, "x.so")


def test_fatbin_section_past_the_end() -> None:
    data = load("sm75_lz4.so")
    _, _, header = section(data)
    bad = patched(data, header + 0x20, "<Q", len(data))  # sh_size
    with pytest.raises(BinaryFormatError, match=r"section \.nv_fatbin") as excinfo:
        read_fatbin_entries(bad, path="x.so")
    assert excinfo.value.offset == header


def test_bad_container_magic() -> None:
    data = load("sm80_sm90a_ptx90.so")
    start, _, _ = section(data)
    with pytest.raises(BinaryFormatError, match="magic") as excinfo:
        read_fatbin_entries(patched(data, start, "<I", 0xDEADBEEF), path="x.so")
    assert excinfo.value.offset == start


def test_bad_magic_of_second_container() -> None:
    data = load("sm80_sm90a_ptx90.so")
    start, _, _ = section(data)
    second = start + 16 + struct.unpack_from("<Q", data, start + 8)[0]
    with pytest.raises(BinaryFormatError, match="magic") as excinfo:
        read_fatbin_entries(patched(data, second, "<I", 0x12345678), path="x.so")
    assert excinfo.value.offset == second


def test_container_size_past_the_end() -> None:
    data = load("sm80_sm90a_ptx90.so")
    start, _, _ = section(data)
    with pytest.raises(BinaryFormatError, match="runs past the end") as excinfo:
        read_fatbin_entries(patched(data, start + 8, "<Q", 1 << 40), path="x.so")
    assert excinfo.value.offset == start


def test_unknown_container_version() -> None:
    data = load("sm75_lz4.so")
    start, _, _ = section(data)
    with pytest.raises(BinaryFormatError, match="version 7"):
        read_fatbin_entries(patched(data, start + 4, "<H", 7), path="x.so")


@pytest.mark.parametrize("header_size", [0, 8, 63, 0xFFFF_FFF0])
def test_bad_entry_header_size(header_size: int) -> None:
    data = load("sm80_sm90a_ptx90.so")
    entry = read_fatbin_entries(data, path="x")[1]
    with pytest.raises(BinaryFormatError, match="entry") as excinfo:
        read_fatbin_entries(patched(data, entry.offset + 4, "<I", header_size), path="x.so")
    assert excinfo.value.offset == entry.offset


def test_entry_payload_past_its_container() -> None:
    data = load("sm80_sm90a_ptx90.so")
    entry = read_fatbin_entries(data, path="x")[0]
    with pytest.raises(BinaryFormatError, match="runs past the end of its container") as excinfo:
        read_fatbin_entries(patched(data, entry.offset + 8, "<Q", 1 << 33), path="x.so")
    assert excinfo.value.offset == entry.offset


@pytest.mark.parametrize(
    ("flags", "problem"), [(0x8011 | 0x2000, "two codecs"), (0x300011, "two variants")]
)
def test_contradictory_flags(flags: int, problem: str) -> None:
    data = load("sm75_lz4.so")
    entry = read_fatbin_entries(data, path="x")[0]
    with pytest.raises(BinaryFormatError, match=problem) as excinfo:
        read_fatbin_entries(patched(data, entry.offset + 0x28, "<Q", flags), path="x.so")
    assert excinfo.value.offset == entry.offset


def test_compressed_size_larger_than_stored() -> None:
    data = load("sm75_lz4.so")
    entry = read_fatbin_entries(data, path="x")[0]
    with pytest.raises(BinaryFormatError, match="compressed size"):
        read_fatbin_entries(patched(data, entry.offset + 0x10, "<I", 1 << 20), path="x.so")


def test_truncated_section_at_every_offset() -> None:
    data = load("sm80_sm90a_ptx90.so")
    start, size, _ = section(data)
    body = data[start : start + size]
    boundaries = {0, size}
    boundaries.add(16 + struct.unpack_from("<Q", body, 8)[0])
    for cut in range(size + 1):
        try:
            entries = parse_fatbin_section(body[:cut], path="x.so", file_offset=start)
        except BinaryFormatError as error:
            assert error.path == "x.so"
            assert error.offset is not None
            assert start <= error.offset < start + size
        else:
            assert cut in boundaries, f"cut at {cut} was not noticed"
            assert len(entries) == {0: 0, size: 6}.get(cut, 3)


def test_zero_padding_between_containers_and_at_the_end() -> None:
    data = load("sm80_sm90a_ptx90.so")
    start, size, _ = section(data)
    body = data[start : start + size]
    first = 16 + struct.unpack_from("<Q", body, 8)[0]
    padding = -first % 16
    assert padding  # the first container ends 8 bytes short of a 16-byte boundary
    padded = body[:first] + bytes(padding) + body[first:] + bytes(48)
    expected = [(e.kind, e.arch) for e in parse_fatbin_section(body, path="x", file_offset=0)]
    found = parse_fatbin_section(padded, path="x", file_offset=0)
    assert [(e.kind, e.arch) for e in found] == expected
    assert found[3].offset == first + padding + 16
    with pytest.raises(BinaryFormatError, match="magic"):
        parse_fatbin_section(
            body[:first] + bytes(padding + 16) + body[first:], path="x", file_offset=0
        )


def test_corrupt_compressed_payloads() -> None:
    for name in ("sm75_lz4.so", "sm100f_sm120a_zstd.so"):
        data = load(name)
        entry = read_fatbin_entries(data, path=name)[0]
        header_size = struct.unpack_from("<I", data, entry.offset + 4)[0]
        payload = entry.offset + header_size
        broken = data[:payload] + bytes([data[payload] ^ 0xFF]) * 64 + data[payload + 64 :]
        with pytest.raises(BinaryFormatError, match=entry.compression.replace("lz4", "LZ4")):
            entry_payload(broken, entry, path=name)


@pytest.mark.parametrize(
    ("name", "module", "package"),
    [("sm75_lz4.so", "lz4.block", "lz4"), ("sm100f_sm120a_zstd.so", "zstandard", "zstandard")],
)
def test_missing_decompressor_names_the_package(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str, package: str
) -> None:
    data = load(name)
    entry = read_fatbin_entries(data, path=name)[0]
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(BinaryFormatError, match=f"pip install {package}"):
        entry_payload(data, entry, path=name)


def test_random_bit_flips_and_truncations_only_raise_binary_format_error() -> None:
    rng = random.Random(20251129)
    data = load("sm80_sm90a_ptx90.so")
    start, size, _ = section(data)
    body = data[start : start + size]
    headers = [e.offset - start for e in parse_fatbin_section(body, path="x", file_offset=0)]
    hot = [0, 8, *(16 + struct.unpack_from("<Q", body, 8)[0] + k for k in (0, 8))]
    for _ in range(3000):
        mutated = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            base = rng.choice(hot + headers)
            at = min(len(mutated) - 1, base + rng.randrange(72))
            mutated[at] ^= 1 << rng.randrange(8)
        cut = len(mutated) if rng.random() < 0.7 else rng.randrange(len(mutated))
        try:
            entries = parse_fatbin_section(bytes(mutated[:cut]), path="x", file_offset=start)
        except BinaryFormatError as error:
            assert error.offset is not None
            continue
        for entry in entries:
            assert entry.kind in ("sass", "ptx")
            assert start <= entry.offset < start + size


def test_random_damage_to_elf_headers_only_raises_binary_format_error() -> None:
    rng = random.Random(7)
    data = load("add_one_sm80.o")
    shoff = ELFFile(io.BytesIO(data))["e_shoff"]
    regions = [(0, 64), (shoff, len(data))]
    for _ in range(150):
        mutated = bytearray(data)
        low, high = rng.choice(regions)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(low, high)] ^= 1 << rng.randrange(8)
        try:
            entries = read_fatbin_entries(bytes(mutated), path="x.o")
            for entry in entries:
                entry_payload(bytes(mutated), entry, path="x.o")
        except BinaryFormatError as error:
            assert error.path == "x.o"


# --- inspection of files, wheels and folders --------------------------------------------------


def make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in members.items():
            wheel.writestr(name, data)
    return path


def test_inspect_a_shared_object() -> None:
    (report,) = inspect_paths([DATA / "sm80_sm90a_ptx90.so"])
    assert report.path == str(DATA / "sm80_sm90a_ptx90.so")
    assert report.size == (DATA / "sm80_sm90a_ptx90.so").stat().st_size
    assert report.sass_archs == ("sm_80", "sm_90a")
    assert report.ptx_archs == ("compute_90",)
    assert report.entries == tuple(entries_of("sm80_sm90a_ptx90.so"))


def test_archs_are_sorted_by_number_then_variant() -> None:
    entries = [
        *entries_of("sm100f_sm120a_zstd.so"),
        *entries_of("sm80_sm90a_ptx90.so"),
        *entries_of("sm75_lz4.so"),
    ]
    report = BinaryContents(path="x", size=1, entries=tuple(entries))
    assert report.sass_archs == ("sm_75", "sm_80", "sm_90a", "sm_100f", "sm_120a")
    assert report.ptx_archs == ("compute_75", "compute_90", "compute_100f")


def test_inspect_a_wheel_reads_every_elf_member(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path / "pkg-1.0-cp310-abi3-linux_x86_64.whl",
        {
            "pkg/__init__.py": b"",
            "pkg/_C.abi3.so": load("sm100f_sm120a_zstd.so"),
            "pkg/libs/no_cuda.so": load("no_cuda.so"),
            "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\n",
        },
    )
    reports = inspect_paths([wheel])
    assert [r.path for r in reports] == [f"{wheel}!pkg/_C.abi3.so", f"{wheel}!pkg/libs/no_cuda.so"]
    assert reports[0].sass_archs == ("sm_100f", "sm_120a")
    assert reports[0].entries == tuple(entries_of("sm100f_sm120a_zstd.so"))
    assert reports[1].entries == ()
    assert reports[1].size == len(load("no_cuda.so"))


def test_inspect_a_folder(tmp_path: Path) -> None:
    (tmp_path / "b" / "deep").mkdir(parents=True)
    (tmp_path / "b" / "deep" / "k.o").write_bytes(load("add_one_sm80.o"))
    (tmp_path / "a.so").write_bytes(load("sm75_lz4.so"))
    (tmp_path / "notes.txt").write_text("not a binary")
    (tmp_path / "b" / "plain.so").write_bytes(load("no_cuda.so"))
    (tmp_path / "a-link.so").symlink_to(tmp_path / "a.so")
    make_wheel(tmp_path / "b" / "w-1.0-py3-none-any.whl", {"w/_k.so": load("sm75_lz4.so")})
    paths = [r.path for r in inspect_paths([tmp_path])]
    assert paths == [
        str(tmp_path / "a.so"),
        str(tmp_path / "b" / "deep" / "k.o"),
        str(tmp_path / "b" / "plain.so"),
        f"{tmp_path / 'b' / 'w-1.0-py3-none-any.whl'}!w/_k.so",
    ]


def test_reports_to_json() -> None:
    reports = inspect_paths([DATA / "sm75_lz4.so", DATA / "no_cuda.so"])
    document = to_document(inspect_document(reports))
    # Issue 23 added loads_on (tests/unit/test_loads_on.py); the keys before it are unchanged.
    loads = [f.pop("loads_on") for f in document["files"]]
    assert loads[1] is None
    assert [g["gpu"] for g in loads[0]["gpus"] if g["verdict"] == "sass"] == ["sm_75"]
    assert document == {
        "schema_version": 1,
        "files": [
            {
                "path": str(DATA / "sm75_lz4.so"),
                "size": (DATA / "sm75_lz4.so").stat().st_size,
                "fatbins": [to_document(e) for e in entries_of("sm75_lz4.so")],
            },
            {"path": str(DATA / "no_cuda.so"), "size": 15024, "fatbins": []},
        ],
    }


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        inspect_paths([tmp_path / "nope.so"])


def test_a_named_file_that_is_neither_elf_nor_wheel(tmp_path: Path) -> None:
    (tmp_path / "README").write_text("hello")
    with pytest.raises(BinaryFormatError, match="neither an ELF file nor a wheel"):
        inspect_paths([tmp_path / "README"])


def test_a_wheel_that_is_not_a_zip(tmp_path: Path) -> None:
    (tmp_path / "x-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(BinaryFormatError, match="not a readable wheel"):
        inspect_paths([tmp_path / "x-1.0-py3-none-any.whl"])


@pytest.mark.parametrize("damage", ["container magic", "section headers cut off"])
def test_a_corrupt_file_on_disk(tmp_path: Path, damage: str) -> None:
    # Also checks that the file's memory map closes cleanly when the reader raises.
    data = load("sm80_sm90a_ptx90.so")
    start, _, _ = section(data)
    bad = patched(data, start, "<I", 0) if damage == "container magic" else data[:-100]
    (tmp_path / "bad.so").write_bytes(bad)
    with pytest.raises(BinaryFormatError) as excinfo:
        inspect_paths([tmp_path / "bad.so"])
    assert_format_error(excinfo, str(tmp_path / "bad.so"))


def test_a_corrupt_wheel_member(tmp_path: Path) -> None:
    data = load("sm75_lz4.so")
    start, _, _ = section(data)
    wheel = make_wheel(tmp_path / "x-1.0-py3-none-any.whl", {"x/_C.so": data[: start + 20]})
    with pytest.raises(BinaryFormatError) as excinfo:
        inspect_paths([wheel])
    assert excinfo.value.path == f"{wheel}!x/_C.so"


def test_a_wheel_member_with_a_bad_crc(tmp_path: Path) -> None:
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("x/_C.so", load("sm75_lz4.so"))
    raw = bytearray(wheel.read_bytes())
    raw[30 + len("x/_C.so") + 5000] ^= 0xFF  # inside the stored member
    wheel.write_bytes(bytes(raw))
    with pytest.raises(BinaryFormatError, match="cannot inflate"):
        inspect_paths([wheel])


def test_a_device_linked_objects_relocatable_ptx_counts_for_the_arch_check() -> None:
    """bitsandbytes (CUDA_SEPARABLE_COMPILATION, archs 80): nvlink puts SASS only into the
    linked image; the PTX compute_80 it was asked for stays in __nv_relfatbin, which the driver
    JIT-links. Its entries stay cuobjdump's; the arch check counts that PTX."""
    from wheelforge.binaries.verify import check_binary
    from wheelforge.configuration.archs import ArchSet, parse_arch_list

    [linked] = inspect_paths([DATA / "rdc_linked_sm80.so"])
    assert (linked.ptx_archs, linked.linked_ptx) == ((), ("compute_80",))
    asked = ArchSet("default", parse_arch_list("8.0+PTX", source="test"))
    assert check_binary(linked, asked).ok
    [plain] = inspect_paths([DATA / "sm75_lz4.so"])
    assert plain.linked_ptx == ()  # one .nv_fatbin: nothing beside it
    [objects] = inspect_paths([DATA / "add_one_rdc_sm86.o"])
    assert objects.linked_ptx == ()  # not device-linked: its __nv_relfatbin is its fatbin
