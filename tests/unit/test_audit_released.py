"""check as the auditor of wheels nobody here built (issue 23): a binary's role is inferred from
what it holds and only the rules of that role run; Requires-Python and the torch requirement
are weighed; what the binaries allow is said. The binaries are small real ones: three copied
from released wheels (tests/data/released/README.md), the rest built by
tests/data/abicheck/build.sh."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from wheelforge.binaries import abicheck, floors, roles
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.cli.app import main
from wheelforge.foundation.errors import VerificationError

from .fakes import with_record

DATA = Path(__file__).resolve().parents[1] / "data"
RELEASED = DATA / "released"
ABI = DATA / "abicheck"


def wheel(
    tmp_path: Path,
    name: str,
    members: dict[str, Path],
    *,
    requires: str | None = None,
    requires_python: str | None = None,
) -> Path:
    path = tmp_path / name
    project, version = name.split("-")[:2]
    dist = f"{project}-{version}"
    lines = ["Metadata-Version: 2.1", f"Name: {project}", f"Version: {version}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    if requires:
        lines.append(f"Requires-Dist: {requires}")
    with zipfile.ZipFile(path, "w") as zf:
        for member, source in members.items():
            zf.writestr(member, source.read_bytes())
        zf.writestr(f"{dist}.dist-info/METADATA", "\n".join(lines) + "\n")
    return with_record(path)  # a whole wheel: the layout rule reads RECORD (issue 21)


def by_member(checks: list[BinaryCheck]) -> dict[str, BinaryCheck]:
    return {c.path.rsplit("!", 1)[-1] if "!" in c.path else "(wheel)": c for c in checks}


# -- roles ----------------------------------------------------------------------------------------


def test_an_op_library_named_like_a_module_is_no_extension(tmp_path: Path) -> None:
    # torchaudio 2.11.0's lib/_torchaudio.abi3.so: torch.ops.load_library loads it; main said
    # "does not define PyInit__torchaudio, so 'import' fails" of it.
    path = wheel(
        tmp_path,
        "torchaudio-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        {"torchaudio/lib/_torchaudio.abi3.so": RELEASED / "_torchaudio.abi3.so"},
    )
    checks = by_member(abicheck.check_wheel(path, torch=None, guards={}))
    lib = checks["torchaudio/lib/_torchaudio.abi3.so"]
    assert lib.role == "library" and "registers torch operators" in lib.role_reason
    # It needs libcudart.so.13 and requires no torch: PyPI's torch 2.0 to 2.10 bring CUDA 11 or
    # 12's runtime, beside which it does not load (issue 38's cuda-runtime warning; the gallery
    # loaded it on 2.11 and 2.14, not on 2.8). Nothing else.
    assert [(v.rule, v.severity) for v in lib.violations] == [("cuda-runtime", "warning")]
    # It states no torch requirement: checked against its floor, told what to declare.
    assert [v.rule for v in checks["(wheel)"].violations] == ["requirement"]
    assert lib.wheel is not None and lib.wheel.allows == "torch>=2.10"


def test_the_role_follows_what_a_file_exports_not_its_name(tmp_path: Path) -> None:
    path = wheel(
        tmp_path,
        "pkg-1.0-cp310-abi3-manylinux_2_34_x86_64.whl",
        {
            "pkg/libext.so": ABI / "ext.so",  # exports PyInit__C
            "pkg/_ops.cpython-310-x86_64-linux-gnu.so": ABI / "oplib.so",  # registers ops
            "pkg/_C.abi3.so": ABI / "hidden_init.so",  # named like a module, nothing else
            "pkg/bin/tool": ABI / "program",
            "pkg.libs/libdep-1234.so": ABI / "glibc234.so",
        },
        requires="torch>=2.10",
    )
    checks = by_member(abicheck.check_wheel(path, torch=None, guards={}))
    assert {m: c.role for m, c in checks.items()} == {
        "pkg/libext.so": "extension",
        "pkg/_ops.cpython-310-x86_64-linux-gnu.so": "library",
        "pkg/_C.abi3.so": "extension",
        "pkg/bin/tool": "program",
    }  # the grafted library is not the wheel's: no rule judges it
    # The one-CPython name inside an abi3 wheel matters for what Python imports only.
    assert checks["pkg/_ops.cpython-310-x86_64-linux-gnu.so"].violations == ()
    # An extension with no PyInit at all is still held to it.
    assert [v.rule for v in checks["pkg/_C.abi3.so"].violations] == ["module-init"]
    assert checks["pkg/bin/tool"].violations == ()


def test_role_inference_in_its_own_words() -> None:
    assert roles.infer("x.libs/libz.so", None, None).role == "bundled"
    assert roles.infer("pkg/_C.abi3.so", None, None).reason == "by its name"


def test_a_function_of_the_wheels_own_that_takes_a_stable_tensor_is_not_libtorchs(
    tmp_path: Path,
) -> None:
    # torchcodec 0.17.0's custom_ops libraries call libtorchcodec_core's
    # facebook::torchcodec::...(torch::stable::Tensor): main named each a libtorch C++ symbol.
    path = wheel(
        tmp_path,
        "pkg-1.0-cp312-cp312-manylinux_2_17_x86_64.whl",
        {"pkg/libops.so": ABI / "own_cxx.so", "pkg/libold.so": ABI / "cxx_symbol.so"},
        requires="torch>=2.10",
    )
    checks = by_member(abicheck.check_wheel(path, torch=None, guards={}))
    # Not libtorch's; but this stand-in links no libtorchcodec_core that would define them.
    assert {v.rule for v in checks["pkg/libops.so"].violations} == {"unresolved-symbol"}
    assert checks["pkg/libops.so"].torch_abi == "no-torch"
    assert {v.rule for v in checks["pkg/libold.so"].violations} == {"cxx-symbol"}
    assert checks["pkg/libold.so"].torch_abi == "torch-unstable"


def test_who_owns_a_demangled_symbol() -> None:
    assert floors.is_libtorch("vtable for c10::Error")
    assert floors.is_libtorch("at::Tensor at::native::add<float>(at::Tensor const&)")
    assert floors.is_libtorch("c10::operator<<(std::ostream&, c10::Device const&)")
    assert not floors.is_libtorch("facebook::torchcodec::Decoder::Decoder(torch::stable::Tensor)")
    assert not floors.is_libtorch("at::Tensor mine::f<int>(at::Tensor const&)")
    assert not floors.is_libtorch("torch::stable::Tensor::dim() const")


# -- Requires-Python ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requires_python", "blocking"), [(">=3.11,<3.15", False), (">=3.8", True), (None, True)]
)
def test_limited_api_newer_than_the_tag_is_weighed_against_requires_python(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    requires_python: str | None,
    blocking: bool,
) -> None:
    # vLLM 0.33.0: cp38-abi3, Requires-Python >=3.11, spinloop uses 3.10/3.11 limited API.
    path = wheel(
        tmp_path,
        "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
        {"vllm/spinloop.abi3.so": RELEASED / "spinloop.abi3.so"},
        requires="torch==2.14.0",
        requires_python=requires_python,
    )
    [check] = abicheck.check_wheel(path, torch=None, guards={})
    assert {v.rule for v in check.violations} == {"floor", "python-api"}
    assert {v.blocking for v in check.violations} == {blocking}
    code = main(["check", str(path)])
    err = " ".join(capsys.readouterr().err.split())
    if blocking:
        assert code == VerificationError.exit_code
        assert "but the wheel is tagged cp38-abi3" in err
    else:
        assert code == 0
        assert (
            "uses PyBuffer_Release, in the limited API only since Python 3.11, above the wheel's "
            "cp38-abi3 tag; its Requires-Python (>=3.11,<3.15) keeps it off older Pythons" in err
        )


# -- what the binaries allow ----------------------------------------------------------------------


def test_a_pin_is_set_beside_what_the_binaries_allow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = wheel(
        tmp_path,
        "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl",
        {"pkg/_C.abi3.so": ABI / "ext.so", "pkg/_new.abi3.so": ABI / "newer_shim.so"},
        requires="torch==2.14.0",
        requires_python=">=3.12",
    )
    checks = by_member(abicheck.check_wheel(path, torch=None, guards={}))
    assert checks["pkg/_C.abi3.so"].allows == "torch>=2.10"
    assert checks["pkg/_new.abi3.so"].allows == "torch>=2.13"
    summary = checks["pkg/_C.abi3.so"].wheel
    assert summary is not None and summary.allows == "torch>=2.13"
    assert summary.declared.torch_pin == "2.14.0" and summary.torch == (2, 14)
    main(["check", str(path)])
    out = " ".join(capsys.readouterr().out.split())
    assert "requires torch==2.14.0; Requires-Python >=3.12; tagged cp310-abi3" in out
    assert "its binaries load on torch >= 2.13; the wheel pins torch==2.14.0" in out


def test_a_requirement_that_applies_with_an_extra_is_not_the_wheels() -> None:
    text = "Name: x\nRequires-Dist: torch\nRequires-Dist: torch>=2.12.0; extra == 'b12x'\n"
    said = abicheck.metadata.declared(text)
    assert said.torch == "torch" and said.torch_floor is None


def test_check_json_carries_what_torch_abi_audit_carries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Per library: its role, its torch ABI verdict, its stable and unstable symbol counts, its
    minimum torch; per wheel the same rolled up (docs/stable-abi.md maps each field)."""
    import json

    path = wheel(  # tagged as torchaudio's own wheel: its GLIBCXX_3.4.21 is above 2_17's
        tmp_path,
        "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        {
            "pkg/lib/_ops.abi3.so": RELEASED / "_torchaudio.abi3.so",
            "pkg/libold.so": ABI / "cxx_symbol.so",
        },
    )
    assert main(["check", "--json", str(path)]) == VerificationError.exit_code
    document = json.loads(capsys.readouterr().out)
    whole_wheel, ops, old = document["binaries"]  # the wheel's own findings come first
    assert whole_wheel["role"] == "wheel"
    assert [v["severity"] for v in whole_wheel["violations"]] == ["warning"]
    # its only finding: torchaudio's libcudart.so.13 beside the CUDA 11/12 torches it admits
    assert (ops["role"], ops["torch_abi"], ops["verdict"]) == (
        "library",
        "torch-stable",
        "warning",
    )
    assert [v["rule"] for v in ops["violations"]] == ["cuda-runtime"]
    assert ops["stable_shim_count"] == 6 and ops["unstable_symbol_count"] == 0
    assert ops["torch_floor"]["inferred"] == "2.10" and ops["allows"] == "torch>=2.10"
    assert (old["torch_abi"], old["verdict"]) == ("torch-unstable", "error")
    assert old["unstable_symbol_count"] == len(old["unstable_symbols"]) > 0
    assert all("::" in name for name in old["unstable_symbols"])  # demangled, as theirs
    [whole] = document["wheels"]
    assert (whole["torch_abi"], whole["verdict"], whole["min_torch"]) == (
        "torch-unstable",
        "error",
        "2.10",
    )
    assert whole["requires"] == {"torch": None, "torch_pin": None, "python": None}
    assert whole["checked_against"] == {"torch": "2.10", "from": "inferred"}
