"""PEP 825 variant wheels: properties from fatbin entries, variant.json through variantlib,
the variant wheel's RECORD, the check that inspect runs, the index-level file, and the
matrix key."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from variantlib.variant_dist_info import VariantDistInfo

from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.packaging import testwheels as running_test
from wheelforge.packaging import wheel_variants as wv

from .conftest import GOOD_MATRIX

Project = Callable[..., Path]
PLAIN = "demo_ops-1.2.0-cp310-abi3-manylinux_2_28_x86_64.whl"


def entry(kind: str, arch: str) -> FatbinEntry:
    digits = "".join(c for c in arch if c.isdigit())
    suffix = arch[-1] if arch[-1] in "af" else ""
    return FatbinEntry(kind=kind, arch=arch, sm=int(digits), variant=suffix, container=0,  # type: ignore[arg-type]
                       offset=0, stored_size=8, size=8, compression="none", version=None)  # fmt: skip


def report(path: str, *entries: tuple[str, str]) -> BinaryContents:
    return BinaryContents(path=path, size=1, entries=tuple(entry(k, a) for k, a in entries))


def test_sm_arch_values_come_from_sass_and_ptx() -> None:
    so = report("x.whl!pkg/_C.abi3.so", ("sass", "sm_75"), ("sass", "sm_90a"), ("sass", "sm_100f"),
                ("ptx", "compute_120"), ("sass", "sm_75"))  # fmt: skip
    assert wv.sm_arch_values([so]) == ("100f_real", "120_virtual", "75_real", "90a_real")
    # Two CUDA libraries: a GPU needs code in both; a library without fatbins does not count.
    other = report("x.whl!pkg/_D.so", ("sass", "sm_75"))
    plain = report("x.whl!pkg/libplain.so")
    assert wv.sm_arch_values([so, other, plain]) == ("75_real",)
    assert wv.sm_arch_values([plain]) == ()


def test_variant_json_is_valid_for_variantlib() -> None:
    facts = wv.VariantFacts(sm_arch=("120_virtual", "75_real"), cuda="13.0", torch=None)
    text = wv.variant_json("default_cu130", wv.properties(facts), unstable_abi=False)
    desc = VariantDistInfo(text, "default_cu130").variant_desc
    assert sorted(p.to_str() for p in desc.properties) == [
        "nvidia :: cuda_version_lower_bound :: 13.0",
        "nvidia :: sm_arch :: 120_virtual",
        "nvidia :: sm_arch :: 75_real",
    ]
    data = json.loads(text)
    assert (
        data["$schema"]
        == wv.SCHEMA_URL
        == "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"
    )
    assert data["default-priorities"]["namespace"] == ["nvidia"]
    assert data["providers"]["nvidia"]["plugin-api"].startswith("nvidia_variant_provider")
    unstable = wv.VariantFacts(sm_arch=("80_real",), cuda="12.9", torch="2.13")
    text = wv.variant_json("x", wv.properties(unstable), unstable_abi=True)
    assert json.loads(text)["variants"]["x"]["abi_dependency"] == {"torch": ["2.13"]}
    null = json.loads(wv.variant_json("null", [], unstable_abi=False))
    assert null["variants"] == {"null": {}}


def test_a_label_outside_the_alphabet_is_refused() -> None:
    with pytest.raises(VerificationError, match="not a valid PEP 825 variant"):
        wv.variant_json("Default-CU130", ["nvidia :: sm_arch :: 75_real"], unstable_abi=False)


def plain_wheel(folder: Path) -> Path:
    path = folder / PLAIN
    members = {"demo_ops/__init__.py": b"", "demo_ops/_C.abi3.so": b"\x7fELF..."}
    record = "".join(f"{n},sha256=x,{len(d)}\n" for n, d in members.items())
    record += "demo_ops-1.2.0.dist-info/RECORD,,\n"
    # A fixed time: the variant wheel keeps the plain wheel's member times, and "same input,
    # same bytes" must not depend on the two plain wheels being written in one 2-second tick.
    when = (2020, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=when), data)
        zf.writestr(zipfile.ZipInfo("demo_ops-1.2.0.dist-info/RECORD", date_time=when), record)
    return path


def make(tmp_path: Path, label: str, sm_arch: tuple[str, ...], out: Path | None = None) -> Path:
    props = wv.properties(wv.VariantFacts(sm_arch=sm_arch, cuda="13.0", torch=None))
    text = wv.variant_json(label, props if label != "null" else [], unstable_abi=False)
    return wv.make_variant_wheel(plain_wheel(tmp_path), label, text, out or tmp_path / "out")


def test_variant_wheel_name_member_and_record(tmp_path: Path) -> None:
    made = make(tmp_path, "default_cu130", ("75_real",))
    assert made.name == PLAIN.removesuffix(".whl") + "-default_cu130.whl"
    assert wv.variant_label(made) == "default_cu130" and wv.variant_label(tmp_path / PLAIN) is None
    assert wv.plain_name(made) == wv.plain_name(tmp_path / PLAIN) == PLAIN
    assert wv.plain_name(made, "default_cu130") == wv.plain_name(tmp_path / PLAIN, None) == PLAIN
    with zipfile.ZipFile(made) as zf:
        names = zf.namelist()
        data = zf.read("demo_ops-1.2.0.dist-info/variant.json")
        record = zf.read("demo_ops-1.2.0.dist-info/RECORD").decode().splitlines()
    assert names[-2:] == [
        "demo_ops-1.2.0.dist-info/variant.json",
        "demo_ops-1.2.0.dist-info/RECORD",
    ]
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert record[-2:] == [
        f"demo_ops-1.2.0.dist-info/variant.json,sha256={digest},{len(data)}",
        "demo_ops-1.2.0.dist-info/RECORD,,",
    ]
    # Same input, same bytes.
    again = make(tmp_path, "default_cu130", ("75_real",), tmp_path / "again")
    assert again.read_bytes() == made.read_bytes()


def tamper(wheel: Path, values: list[str]) -> None:
    with zipfile.ZipFile(wheel) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    name = "demo_ops-1.2.0.dist-info/variant.json"
    data = json.loads(members[name])
    data["variants"]["default_cu130"]["nvidia"]["sm_arch"] = values
    members[name] = json.dumps(data).encode()
    with zipfile.ZipFile(wheel, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)


def test_check_flags_properties_that_disagree_with_the_binaries(tmp_path: Path) -> None:
    made = make(tmp_path, "default_cu130", ("75_real", "90_real"))
    so = report(f"{made}!demo_ops/_C.abi3.so", ("sass", "sm_75"), ("sass", "sm_90"))
    [ok] = wv.check_wheels([made], [so])
    assert ok.problems == () and "nvidia :: sm_arch :: 90_real" in ok.properties
    tamper(made, ["75_real", "90_real", "120_real"])
    [bad] = wv.check_wheels([made], [so])
    assert bad.problems == (
        "declares nvidia :: sm_arch :: 120_real, but no binary carries that code",
    )
    tamper(made, ["75_real"])
    [bad] = wv.check_wheels([made], [so])
    assert bad.problems == ("the binaries carry 90_real, which variant.json does not declare",)
    tamper(made, ["75-real"])
    [bad] = wv.check_wheels([made], [so])
    assert bad.problems[0].startswith("variant.json is not valid")


def test_non_variant_and_null_wheels(tmp_path: Path) -> None:
    null = make(tmp_path, "null", ())
    so = report(f"{null}!demo_ops/_C.abi3.so", ("sass", "sm_75"))
    [check] = wv.check_wheels([null, tmp_path / PLAIN], [so])
    assert check.label == "null" and check.properties == () and check.problems == ()


def test_index_json_merges_every_variant_of_the_release(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for folder, label, sm_arch in (("a", "sm75_cu130", ("75_real",)),
                                   ("b", "sm90_cu130", ("120_virtual", "90_real")), ("c", "null", ())):  # fmt: skip
        (tmp_path / folder).mkdir()
        make(tmp_path / folder, label, sm_arch, out)
    path = wv.write_index_json(out, "demo_ops", "1.2.0")
    assert path is not None and path.name == "demo_ops-1.2.0-variants.json"
    data = json.loads(path.read_text())
    assert sorted(data["variants"]) == ["null", "sm75_cu130", "sm90_cu130"]
    assert data["variants"]["sm90_cu130"]["nvidia"]["sm_arch"] == ["120_virtual", "90_real"]
    assert data["variants"]["null"] == {}
    assert wv.write_index_json(out, "other", "1.0") is None


def test_index_json_refuses_one_label_with_two_meanings(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    make(tmp_path / "a", "sm75_cu130", ("75_real",), out)
    other = make(tmp_path / "b", "sm75_cu130", ("80_real",), tmp_path / "b" / "out")
    renamed = out / other.name.replace("1.2.0-cp310", "1.2.0-cp311")
    other.rename(renamed)
    with pytest.raises(VerificationError, match="does not merge with the other variants"):
        wv.write_index_json(out, "demo_ops", "1.2.0")


def test_matrix_key(project: Project) -> None:
    m = load_matrix(project(GOOD_MATRIX + "wheel-variants:\n  null: default\n"))
    assert m.variant_wheels and m.wheel_variants is not None and m.wheel_variants.null == "default"
    assert load_matrix(project(GOOD_MATRIX + "wheel-variants: {}\n")).variant_wheels
    off = load_matrix(project(GOOD_MATRIX + "wheel-variants: {enabled: false}\n"))
    assert not off.variant_wheels and not load_matrix(project()).variant_wheels
    with pytest.raises(ConfigError, match="wheel-variants.null: 'hopper' is neither an arch set"):
        load_matrix(project(GOOD_MATRIX + "wheel-variants:\n  null: hopper\n"))


def test_wheelforge_test_installs_a_variant_wheel_under_its_plain_name(tmp_path: Path) -> None:
    made = make(tmp_path, "default_cu130", ("75_real",))
    with running_test._installable(made) as plain:
        assert plain.name == PLAIN and plain.read_bytes() == made.read_bytes()
    assert not plain.exists()
    with running_test._installable(tmp_path / PLAIN) as same:
        assert same == tmp_path / PLAIN


def test_the_variant_json_name_is_variantlibs() -> None:
    from variantlib.constants import VARIANT_DIST_INFO_FILENAME

    from wheelforge.binaries import elf

    assert elf.VARIANT_DIST_INFO_FILENAME == VARIANT_DIST_INFO_FILENAME
