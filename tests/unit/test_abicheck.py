from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.fakes import make_wheel
from wheelforge.binaries import abicheck, floors
from wheelforge.binaries.rule import CheckTarget
from wheelforge.binaries.symbols import demangle
from wheelforge.cli.app import main
from wheelforge.foundation.errors import BinaryFormatError, ConfigError
from wheelforge.toolchain import shims

DATA = Path(__file__).resolve().parents[1] / "data" / "abicheck"


def target(torch: tuple[int, int], python: tuple[int, int] | None = (3, 10)) -> CheckTarget:
    return CheckTarget(torch=torch, python=python, guards={})


def rules(check: abicheck.BinaryCheck) -> list[tuple[str, str | None]]:
    return [(v.rule, v.symbol) for v in check.violations]


def test_clean_binary() -> None:
    check = abicheck.check_elf(
        (DATA / "ext.so").read_bytes(), path="ext.so", target=target((2, 10))
    )
    assert check.violations == ()
    assert check.shims == ("aoti_torch_get_data_ptr", "torch_library_impl")
    assert check.newest_shim == (2, 10)
    assert check.python_symbols == ("PyModule_Create2", "PyUnicode_AsUTF8AndSize")


def test_shim_newer_than_the_target() -> None:
    data = (DATA / "ext.so").read_bytes()
    check = abicheck.check_elf(data, path="ext.so", target=target((2, 9)))
    assert rules(check) == [("floor", None), ("shim-version", "torch_library_impl")]
    assert check.newest_shim == (2, 10) and check.declared_torch == (2, 9)
    assert "declares torch>=2.9, but the shim functions it imports need torch 2.10" in (
        check.violations[0].message
    )
    message = check.violations[1].message
    assert (
        "which torch 2.9 lacks: it arrived in torch 2.10 (per the libraries of torch 2.9)"
        in message
    )
    assert "-DTORCH_TARGET_VERSION" in message


def test_new_shim_and_python_api() -> None:
    data = (DATA / "newer_shim.so").read_bytes()
    check = abicheck.check_elf(data, path="n.so", target=target((2, 10)))
    assert check.newest_shim == (2, 13) and check.python_floor == (3, 11)
    assert rules(check) == [
        ("floor", None),
        ("floor", None),
        ("shim-version", "torch_exception_get_what_without_backtrace"),
        ("python-api", "PyObject_GetBuffer"),
        ("python-api", "PyUnicode_AsUTF8"),
    ]
    by_symbol = {v.symbol: v.message for v in check.violations}
    assert "arrived in torch 2.13" in by_symbol["torch_exception_get_what_without_backtrace"]
    assert "only since Python 3.11" in by_symbol["PyObject_GetBuffer"]
    assert "raise python-abi to cp311" in by_symbol["PyObject_GetBuffer"]
    assert "not in Python's limited API" in by_symbol["PyUnicode_AsUTF8"]
    # The same binary is fine for a 2.13 target when no abi3 floor applies... except PyUnicode_AsUTF8.
    later = abicheck.check_elf(data, path="n.so", target=target((2, 13), python=None))
    assert later.violations == ()


def test_inferred_floors() -> None:
    clean = abicheck.check_elf((DATA / "ext.so").read_bytes(), path="e", target=target((2, 12)))
    # Declaring a higher floor than needed is allowed; the binary's own floor is still reported.
    assert clean.violations == () and clean.newest_shim == (2, 10)
    assert clean.python_floor == (3, 10)  # PyUnicode_AsUTF8AndSize joined the limited API in 3.10
    assert floors.python_floor(["PyObject_GetBuffer", "PyModule_Create2"]) == (3, 11)
    assert floors.python_floor(["PyUnicode_AsUTF8"]) is None  # not in the limited API at all


def test_libtorch_cxx_symbols_are_demangled() -> None:
    check = abicheck.check_elf(
        (DATA / "cxx_symbol.so").read_bytes(), path="c.so", target=target((2, 10))
    )
    assert rules(check) == [
        ("cxx-symbol", "_ZN2at6TensorD1Ev"),
        ("cxx-symbol", "_ZN3c105ErrorC1EPKc"),
    ]
    first, second = (v.message for v in check.violations)
    assert "uses at::Tensor::~Tensor() (_ZN2at6TensorD1Ev), a C++ symbol of libtorch" in first
    assert "torch::stable::Tensor" in first
    assert "c10::Error::Error(char const*)" in second and "STD_TORCH_CHECK" in second


def test_demangle() -> None:
    assert demangle("_ZNK5torch8autograd4Node4nameEv") == "torch::autograd::Node::name() const"
    assert demangle("not_mangled") == "not_mangled"
    assert demangle("_Zgarbage") == "_Zgarbage"


def test_header_guards_override_for_unknown_versions() -> None:
    future = (2, 99)
    assert future not in shims.exports_table()
    guards = {"torch_brand_new": (2, 99), "torch_old": None}
    assert shims.judge("torch_brand_new", (2, 98), guards).ok is False
    assert shims.judge("torch_brand_new", future, guards).ok is True
    assert shims.judge("torch_old", future, guards).ok is True
    assert shims.judge("torch_never_heard_of", future, guards).ok is False
    assert shims.judge("torch_library_impl", (2, 8), {}).ok is False


def test_exports_table_has_released_versions() -> None:
    table = shims.exports_table()
    assert {(2, 9), (2, 10), (2, 11), (2, 12), (2, 13)} <= set(table)
    assert "torch_library_impl" not in table[(2, 9)] and "torch_library_impl" in table[(2, 10)]
    assert "aoti_torch_get_current_cuda_stream" in table[(2, 10)]


def test_header_guards_from_text(tmp_path: Path) -> None:
    header = tmp_path / "torch/csrc/stable/c/shim.h"
    header.parent.mkdir(parents=True)
    header.write_text(
        "AOTI_TORCH_EXPORT AOTITorchError torch_base(int);\n"
        "#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_11_0\n"
        "#ifdef USE_CUDA\nAOTI_TORCH_EXPORT AOTITorchError torch_cuda_thing(int);\n#endif\n"
        "AOTI_TORCH_EXPORT AOTITorchError\ntorch_eleven(int);\n"
        "#else\nAOTI_TORCH_EXPORT AOTITorchError torch_before_eleven(int);\n"
        "#endif\n"
    )
    assert shims.header_guards(tmp_path) == {
        "torch_base": None,
        "torch_cuda_thing": (2, 11),
        "torch_eleven": (2, 11),
        "torch_before_eleven": None,
    }


def test_wheel_floor_comes_from_metadata(tmp_path: Path) -> None:
    ok = make_wheel(tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl", "ext.so")
    [check] = abicheck.check_wheel(ok, torch=None, guards={})
    assert check.path.endswith("!pkg/_C.abi3.so") and check.violations == ()
    old = make_wheel(
        tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl", "ext.so", requires="torch>=2.9.1"
    )
    [check] = abicheck.check_wheel(old, torch=None, guards={})
    assert rules(check) == [("floor", None), ("shim-version", "torch_library_impl")]


def test_wheel_tags_against_binaries(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_28_aarch64.whl", "glibc234.so",
                       member="pkg/_C.cpython-311-x86_64-linux-gnu.so")  # fmt: skip
    [check] = abicheck.check_wheel(wheel, torch=None, guards={})
    messages = [v.message for v in check.violations if v.rule == "tags"]
    assert any(
        "tagged manylinux_2_28_aarch64, but pkg/_C.cpython-311-x86_64-linux-gnu.so needs GLIBC_2.34"
        in m
        for m in messages
    )
    assert any("is built for x86_64" in m for m in messages)
    assert any("named for one CPython; name it *.abi3.so" in m for m in messages)


def test_a_variant_wheel_is_checked_against_the_tags_before_its_label(tmp_path: Path) -> None:
    name = "pkg-1.0-cp310-abi3-manylinux_2_28_aarch64-sm80_cu130.whl"
    wheel = make_wheel(tmp_path, name, "glibc234.so", variant_json=True)
    [check] = abicheck.check_wheel(wheel, torch=None, guards={})
    assert any("tagged manylinux_2_28_aarch64" in v.message for v in check.violations)
    # A label in the name of a wheel that holds no variant.json is no variant wheel.
    (tmp_path / "plain").mkdir()
    plain = make_wheel(tmp_path / "plain", name, "ext.so")
    with pytest.raises(BinaryFormatError, match="not a wheel file name"):
        abicheck.check_wheel(plain, torch=None, guards={})


def test_wheel_without_torch_requirement_is_checked_against_what_its_binaries_need(
    tmp_path: Path,
) -> None:
    # Issue 23: it was refused ("pass --target"); it is checked against its binaries' floor
    # (ext.so's newest shim, torch_library_impl, arrived in 2.10) and told what to declare.
    for requires in (None, "torch"):
        wheel = make_wheel(
            tmp_path, "pkg-1.0-cp310-abi3-linux_x86_64.whl", "ext.so", requires=requires
        )
        whole, binary = abicheck.check_wheel(wheel, torch=None, guards={})
        assert binary.violations == () and binary.declared_torch == (2, 10)
        [warning] = whole.violations
        assert (warning.rule, warning.severity) == ("requirement", "warning")
        assert "declare Requires-Dist: torch>=2.10" in warning.message
        assert binary.wheel is not None and binary.wheel.torch_source == "inferred"
        assert binary.wheel.allows == "torch>=2.10"
    assert abicheck.check_wheel(wheel, torch=(2, 10), guards={})[0].violations == ()


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass --target"):
        abicheck.check_paths([DATA / "ext.so"], torch=None, python=None, guards={})
    with pytest.raises(ConfigError, match="no such file"):
        abicheck.check_paths([tmp_path / "nope.so"], torch=(2, 10), python=None, guards={})
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + b"\0" * 10)
    with pytest.raises(BinaryFormatError, match=r"junk\.so"):
        abicheck.check_paths([junk], torch=(2, 10), python=None, guards={})
    bad_zip = tmp_path / "pkg-1.0-cp310-abi3-linux_x86_64.whl"
    bad_zip.write_bytes(b"PK not really")
    with pytest.raises(BinaryFormatError, match="not a readable wheel"):
        abicheck.check_paths([bad_zip], torch=(2, 10), python=None, guards={})


def test_torch_floor() -> None:
    assert floors.torch_floor("Requires-Dist: numpy\nRequires-Dist: torch>=2.11,<2.15\n") == (
        2,
        11,
    )
    assert floors.torch_floor("Requires-Dist: torch==2.12.1\n") == (2, 12)
    assert floors.torch_floor("Requires-Dist: torch\n") is None


def _elf_with_version_needs(sections: int, entries: int, aux: int = 1) -> bytes:
    """A minimal ELF64 shared object whose only contents are *sections* .gnu.version_r
    sections, each claiming *entries* version needs (sh_info) of *aux* auxiliaries, all one
    entry repeated by zero vn_next and vna_next (what a hostile file does)."""
    import struct

    shstr = b"\0.shstrtab\0.dynstr\0.gnu.version_r\0"
    dynstr = b"\0libc.so.6\0GLIBC_2.17\0"
    need = struct.pack("<HHIII", 1, aux, 1, 16, 0) + struct.pack("<IHHII", 0, 0, 2, 11, 0)
    data = shstr + dynstr + need
    shoff = 64 + len(data)
    headers = [bytes(64)]
    headers.append(struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, 64, len(shstr), 0, 0, 1, 0))
    headers.append(
        struct.pack("<IIQQQQIIQQ", 11, 3, 0, 0, 64 + len(shstr), len(dynstr), 0, 0, 1, 0)
    )
    need_at = 64 + len(shstr) + len(dynstr)
    for _ in range(sections):
        headers.append(
            struct.pack("<IIQQQQIIQQ", 19, 0x6FFFFFFE, 2, 0, need_at, len(need), 2, entries, 8, 0)
        )
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 56, 0, 64, len(headers), 1
    )
    return header + data + b"".join(headers)


@pytest.mark.parametrize(
    ("sections", "entries", "aux"), [(1000, 4096, 1), (1, 4096, 65535), (5, 1, 1)]
)
def test_version_needs_are_bounded_in_all(sections: int, entries: int, aux: int) -> None:
    """Issue 21: 1,000 version-need sections each claiming 4096 entries took `check` over 150 s
    on a 1 MB file; one entry claiming 65535 auxiliaries repeats as badly."""
    data = _elf_with_version_needs(sections, entries, aux)
    with pytest.raises(BinaryFormatError, match="implausible count of version"):
        abicheck.check_elf(data, path="hostile.so", target=target((2, 10)))


def test_one_plausible_version_need_section_is_read() -> None:
    check = abicheck.check_elf(_elf_with_version_needs(1, 1), path="ok.so", target=target((2, 10)))
    assert check.path == "ok.so"  # read, not refused: a real library's one section passes


# -- issue 20: check knows the flavour -------------------------------------------------------

CLASSIC = "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"  # one CPython: the unstable ABI
CLASSIC_MEMBER = "pkg/_C.cpython-311-x86_64-linux-gnu.so"


def test_a_classic_wheel_is_checked_by_the_unstable_abis_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch's C++ API (a libtorch symbol) is what a classic extension is for: the stable-ABI
    rules don't apply; its init export, tags and pin do, and the pin is shown as a pin."""
    wheel = make_wheel(tmp_path, CLASSIC, "cxx_symbol.so", requires="torch==2.13.*", member=CLASSIC_MEMBER)  # fmt: skip
    [check] = abicheck.check_wheel(wheel, torch=None, guards={})
    assert check.flavour == "unstable" and check.violations == ()
    # its own, the wheel's (python-api says nothing: a one-CPython tag has no abi3 floor)
    assert check.rules == (
        "unresolved-symbol",
        "cuda-runtime",
        "python-api",
        "module-init",
        "tags",
        "layout",
        "torch-pin",
        "pypi-metadata",
    )
    assert check.wheel is not None and check.wheel.declared.torch == "torch==2.13.*"
    assert main(["check", str(wheel)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "unstable ABI (libtorch's C++ API: one torch; one CPython): declares torch==2.13.*" in out
    )
    assert (
        "unstable-ABI rules applied: unresolved-symbol, cuda-runtime, python-api, module-init, "
        "tags, layout, torch-pin" in out
    )
    assert "torch floor" not in out  # a classic extension's torch is a pin, not a floor
    assert "torch >=" not in out
    assert "1 binary uses libtorch's C++ API: the wheel loads only on the torch it was" in out
    assert "(torch 2.13.*, its pin)" in out
    # The same binary judged as a stable-ABI one (--abi stable) breaks its rules.
    [stable] = abicheck.check_wheel(wheel, torch=None, guards={}, flavour="stable")
    assert "cxx-symbol" in [v.rule for v in stable.violations]


def test_a_wheel_of_libtorch_symbols_without_a_pin(tmp_path: Path) -> None:
    """One CPython, libtorch's C++ API, but a range of torch: the stable rules say what is
    wrong (its libtorch symbols against the range); judged as a classic one (--abi unstable),
    the missing pin is the violation."""
    wheel = make_wheel(tmp_path, CLASSIC, "cxx_symbol.so", requires="torch>=2.13", member=CLASSIC_MEMBER)  # fmt: skip
    [binary] = abicheck.check_wheel(wheel, torch=None, guards={})
    assert binary.flavour == "stable" and "cxx-symbol" in [v.rule for v in binary.violations]
    whole, classic = abicheck.check_wheel(wheel, torch=None, guards={}, flavour="unstable")
    assert [v.rule for v in whole.violations] == ["torch-pin"] and classic.violations == ()
    # The fix names the torch the wheel's requirement starts at, not a made-up one (issue 33).
    assert (
        "declares torch>=2.13; pin the torch its binaries were built against: "
        "Requires-Dist: torch==2.13.* if that is torch 2.13" in whole.violations[0].message
    )


def test_a_binary_calling_a_2_15_function_needs_torch_2_15() -> None:
    """torch 2.15.0's libraries (data/shim_exports.json, from its wheel by
    tools/gen_shim_exports.py) add torch_dtype_from_pyobject and four other pyobject shims."""
    data = (DATA / "shim_215.so").read_bytes()
    check = abicheck.check_elf(data, path="s.so", target=target((2, 10)))
    assert check.newest_shim == (2, 15)
    assert ("shim-version", "torch_dtype_from_pyobject") in rules(check)
    by_symbol = {v.symbol: v.message for v in check.violations}
    assert "arrived in torch 2.15" in by_symbol["torch_dtype_from_pyobject"]
    assert abicheck.check_elf(data, path="s.so", target=target((2, 15))).violations == ()
    assert floors.introduced_floor(["torch_dtype_from_pyobject", "torch_library_impl"], {}) == (
        2,
        15,
    )
