"""check's verdicts on released wheels (issue 33): a classic wheel's torch ABI comes from its
binaries' libtorch C++ symbols and its requirement, not its Python tag (vLLM 0.10.1.1 and
xformers 0.0.32.post2 are cp3X-abi3 wheels pinned to one torch); the violations of one kind in
one wheel are said in one line with a count (fbgemm-gpu 1.9.0: 2,082 libtorch symbols); a pin
hint names the torch the wheel says, never a made-up one; "checked against torch X" only where
X was inferred; symlinked wheels in ``inspect DIR`` are read; piped output is never cut.

The binaries are tests/data/abicheck's (build.sh): cxx_symbol.so needs two libtorch C++
symbols (at::Tensor::~Tensor, c10::Error::Error) and exports PyInit__C; classic_py.so needs the
same and PyUnicode_AsUTF8, outside Python's limited API."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from tests.unit.fakes import make_wheel, with_record
from wheelforge.binaries import abicheck, rule
from wheelforge.binaries.inspection import inspect_paths
from wheelforge.cli.app import main

DATA = Path(__file__).resolve().parents[1] / "data" / "abicheck"
FATBIN = Path(__file__).resolve().parents[1] / "data" / "fatbin"
ABI3 = "pkg-1.0-cp39-abi3-manylinux_2_28_x86_64.whl"  # xformers 0.0.32.post2's tags


def one_line(text: str) -> str:
    return " ".join(text.split())


def errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def test_a_classic_abi3_wheel_pinned_exactly_is_judged_classic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """xformers 0.0.32.post2: cp39-abi3, libtorch's C++ API, Requires-Dist: torch==2.8.0. It
    loads on torch 2.8.0 and nowhere else, and says so: a correct wheel, not a broken
    stable-ABI one (main failed it with one cxx-symbol error per symbol)."""
    wheel = make_wheel(tmp_path, ABI3, "cxx_symbol.so", requires="torch==2.8.0")
    [check] = abicheck.check_wheel(wheel, torch=None, guards={})
    assert check.flavour == "unstable" and check.violations == ()
    assert check.torch_abi == "torch-unstable" and len(check.libtorch_symbols) == 2
    assert check.wheel is not None and check.wheel.tag_python == (3, 9)
    assert check.wheel.allows is not None and check.wheel.allows.startswith("torch==2.8.0 ")
    assert main(["check", str(wheel)]) == 0
    out = one_line(capsys.readouterr().out)
    assert "unstable ABI (libtorch's C++ API: one torch; tagged cp39-abi3): declares " in out
    assert "torch==2.8.0" in out
    assert "built against (torch 2.8.0, its pin)" in out
    assert "one CPython" not in out  # it is tagged for Python's limited API
    assert "checked against torch" not in out


def test_the_abi3_tag_still_binds_a_classic_wheels_python_symbols(tmp_path: Path) -> None:
    """Judged as classic, the wheel's Python side is still the tag's: a symbol outside the
    limited API in a cp39-abi3 wheel is an error (python-api applies to the unstable ABI)."""
    wheel = make_wheel(tmp_path, ABI3, "classic_py.so", requires="torch==2.8.0")
    [check] = abicheck.check_wheel(wheel, torch=None, guards={})
    assert check.flavour == "unstable"
    assert [(v.rule, v.symbol) for v in check.violations] == [("python-api", "PyUnicode_AsUTF8")]
    # A kind with one finding is said as itself: its symbol, its own fix.
    assert abicheck.said([check]) == list(check.violations)
    assert "uses PyUnicode_AsUTF8, which is not in Python's limited API, so the cp39-abi3" in (
        check.violations[0].message
    )
    # The same binary in a one-CPython wheel: no abi3 floor, nothing to say.
    one = make_wheel(
        tmp_path,
        "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "classic_py.so",
        requires="torch==2.8.0",
        member="pkg/_C.cpython-312-x86_64-linux-gnu.so",
    )
    [classic] = abicheck.check_wheel(one, torch=None, guards={})
    assert classic.flavour == "unstable" and classic.violations == ()


@pytest.mark.parametrize(
    ("requires", "hint"),
    [
        # No torch requirement (fbgemm-gpu 1.9.0): no torch to name, and none made up.
        (None, "Requires-Dist: torch==X.Y.*, X.Y the build's torch: neither the wheel's"),
        # A range of two minors (torch>=2.8,<2.10): its floor, for the user to confirm
        # (torch>=2.8,<2.9 admits one minor: a pin, test_torch_requirements.py).
        ("torch<2.10,>=2.8", "Requires-Dist: torch==2.8.* if that is torch 2.8, the lowest its"),
    ],
)
def test_a_classic_abi3_wheel_without_a_pin_is_an_error_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], requires: str | None, hint: str
) -> None:
    """Classic symbols and no exact pin: the genuine error, kept; its libtorch symbols in one
    line with a count, by namespace and binary, a few named; every one in --json."""
    wheel = tmp_path / ABI3
    with zipfile.ZipFile(wheel, "w") as zf:
        for member in ("pkg/_C.abi3.so", "pkg/ops/_C.abi3.so"):
            zf.writestr(member, (DATA / "cxx_symbol.so").read_bytes())
        metadata = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"
        zf.writestr(
            "pkg-1.0.dist-info/METADATA",
            metadata + (f"Requires-Dist: {requires}\n" if requires else ""),
        )
    with_record(wheel)
    checks = abicheck.check_wheel(wheel, torch=None, guards={})
    assert {c.flavour for c in checks} == {"stable"}
    cxx = [v for c in checks for v in c.violations if v.rule == "cxx-symbol"]
    assert len(cxx) == 4 and {v.kind for v in cxx} == {"libtorch-cxx"}
    [said] = [v for v in abicheck.said(checks) if v.rule == "cxx-symbol"]
    assert said.symbol is None
    message = one_line(said.message)
    assert "2 binaries use 4 C++ symbols of libtorch (at:: 2, c10:: 2;" in message
    assert "pkg/_C.abi3.so 2, pkg/ops/_C.abi3.so 2" in message
    assert "e.g. at::Tensor::~Tensor(); c10::Error::Error(char const*)" in message
    assert hint in message
    assert "2.13" not in message  # the old hard-coded hint
    assert main(["check", str(wheel)]) == 4
    captured = capsys.readouterr()
    [line] = errors(captured.err)  # one line, no per-symbol lines above it
    assert "C++ symbols of libtorch" in line and "more above" not in line
    assert "_ZN2at6TensorD1Ev" not in captured.err  # the mangled names: in --json only
    assert main(["check", "--json", str(wheel)]) == 4
    document = json.loads(capsys.readouterr().out)
    listed = [v["symbol"] for b in document["binaries"] for v in b["violations"]]
    assert listed.count("_ZN2at6TensorD1Ev") == 2 and listed.count("_ZN3c105ErrorC1EPKc") == 2


def test_a_file_given_on_its_own_is_said_in_one_line_too(tmp_path: Path) -> None:
    """A bare shared object's libtorch symbols: one line for the file, no wheel to pin."""
    data = (DATA / "cxx_symbol.so").read_bytes()
    check = abicheck.check_elf(
        data, path="c.so", target=rule.CheckTarget(torch=(2, 10), python=None, guards={})
    )
    said = abicheck.said([check])
    assert len(said) == 1 and "2 C++ symbols of libtorch" in said[0].message
    assert said[0].message.startswith("c.so: 1 binary uses 2 C++ symbols of libtorch")


def test_checked_against_a_torch_only_where_inferred(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wheel that states no torch and whose binaries use no shim has no torch floor to infer:
    it is 'assumed' (the first stable-ABI torch, which nothing depends on), not 'inferred', and
    the screen names no torch it was checked against; one whose shims say is 'inferred'."""
    plain = make_wheel(tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_34_x86_64.whl", "own_cxx.so", requires=None)  # fmt: skip
    [check] = abicheck.check_wheel(plain, torch=None, guards={})
    assert check.wheel is not None and check.wheel.torch_source == "assumed"
    main(["check", str(plain)])
    out = one_line(capsys.readouterr().out)
    assert "checked against torch" not in out
    assert "states no torch requirement; its binaries use no torch shim" in out
    main(["check", "--json", str(plain)])
    [whole] = json.loads(capsys.readouterr().out)["wheels"]
    assert whole["checked_against"]["from"] == "assumed"
    shims = make_wheel(tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_34_x86_64.whl", "ext.so", requires=None)  # fmt: skip
    whole_check, uses = abicheck.check_wheel(shims, torch=None, guards={})
    assert [v.rule for v in whole_check.violations] == ["requirement"]  # told what to declare
    assert uses.wheel is not None and uses.wheel.torch_source == "inferred"
    assert uses.wheel.torch == (2, 10)
    main(["check", str(shims)])
    assert "checked against torch 2.10, what its binaries' shims need" in one_line(
        capsys.readouterr().out
    )


def test_inspect_dir_reads_symlinked_wheels(tmp_path: Path) -> None:
    """A link to a wheel elsewhere is read under the link's name; a link to a file inside the
    folder is that file (listed once); a dangling link is no file."""
    elsewhere = tmp_path / "downloads"
    elsewhere.mkdir()
    real = elsewhere / "pkg-1.0-cp310-abi3-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(real, "w") as zf:
        zf.writestr("pkg/_C.abi3.so", (FATBIN / "sm80_sm90a_ptx90.so").read_bytes())
    folder = tmp_path / "dist"
    folder.mkdir()
    (folder / real.name).symlink_to(real)
    (folder / "lib.so").write_bytes((FATBIN / "sm80_sm90a_ptx90.so").read_bytes())
    (folder / "lib.so.1").symlink_to("lib.so")
    (folder / "gone.whl").symlink_to(tmp_path / "missing.whl")
    reports = inspect_paths([folder])
    assert [r.path for r in reports] == [
        str(folder / "lib.so"),
        str(folder / real.name) + "!pkg/_C.abi3.so",
    ]
    assert reports[1].sass_archs == ("sm_80", "sm_90a")


@pytest.mark.parametrize("columns", ["80", "100"])
def test_piped_output_is_never_cut(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: str,
) -> None:
    """check and inspect into a pipe with COLUMNS=80 or 100: every line's content whole (main
    cut the rules line and the 'built against' line at 80, and folded a member's path
    mid-name in the table)."""
    monkeypatch.setenv("COLUMNS", columns)
    member = "pkg/a_rather_long_package_name/with_a_subpackage/_C.abi3.so"
    wheel = make_wheel(tmp_path, ABI3, "cxx_symbol.so", requires="torch==2.8.0", member=member)
    assert main(["check", str(wheel)]) == 0
    out = capsys.readouterr().out
    assert member in out  # never folded mid-name
    assert (
        "unstable-ABI rules applied: unresolved-symbol, cuda-runtime, python-api, module-init, "
        "tags, layout, torch-pin" in out
    )
    assert (
        "1 binary uses libtorch's C++ API: the wheel loads only on the torch it was built "
        "against (torch 2.8.0, its pin); it requires torch==2.8.0" in out
    )
    assert "…" not in out
    deep = tmp_path / "a_folder_whose_name_is_long_enough" / "to_push_the_path_past_eighty"
    deep.mkdir(parents=True)
    so = deep / "libkernels_with_a_long_name.so"
    so.write_bytes((FATBIN / "sm80_sm90a_ptx90.so").read_bytes())
    assert main(["inspect", str(deep)]) == 0
    out = capsys.readouterr().out
    assert str(deep) in out and so.name in out and "…" not in out
    assert os.environ["COLUMNS"] == columns


def test_python_symbols_outside_the_limited_api_in_one_line() -> None:
    """python-api's summary: the count, by binary, a few names, the tag that is wrong."""
    from wheelforge.binaries.metadata import Declared
    from wheelforge.binaries.rule import Violation, WheelSummary
    from wheelforge.binaries.rules import python_api

    found = [
        Violation(
            binary=f"w.whl!pkg/{so}",
            rule="python-api",
            symbol=name,
            message="m",
            kind=python_api.KIND,
        )
        for so, name in [
            ("a.abi3.so", "PyUnicode_AsUTF8"),
            ("a.abi3.so", "_PyObject_GC_New"),
            ("b.abi3.so", "PyFrame_GetCode"),
        ]
    ]
    wheel = WheelSummary(
        path="w.whl", declared=Declared(), tag_python=(3, 9), torch=(2, 9), torch_source="assumed"
    )
    line = python_api.summary("w.whl", found, wheel)
    assert line.startswith("w.whl: 2 binaries use 3 Python symbols outside the limited API")
    assert "pkg/a.abi3.so 2, pkg/b.abi3.so 1" in line
    assert "e.g. PyUnicode_AsUTF8, _PyObject_GC_New, PyFrame_GetCode, so the cp39-abi3 tag" in line
