"""How ``check --torch-from`` weighs what the loader said (binaries/loadcheck.py): the loader's
word overrides the static verdict, but a library the environment lacks (the driver, FFmpeg,
TensorRT) is the environment's to install, not the wheel's fault. The words are dlerror's, as
the released wheels gave them under torch 2.14.0+cu130 (xformers 0.0.35's _C.so, vLLM 0.34.0's
modules without a driver, torchcodec 0.17.0's FFmpeg libraries)."""

from __future__ import annotations

from wheelforge.binaries import loadcheck
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.rule import Violation

WHERE = "torch 2.14.0+cu130 (/env/bin/python)"


def binary(member: str, *violations: Violation, role: str = "extension") -> BinaryCheck:
    return BinaryCheck(
        path=f"/w/x.whl!{member}",
        shims=(),
        newest_shim=None,
        python_symbols=(),
        violations=violations,
        role=role,
    )


def judged(c: BinaryCheck, error: str | None, *, relies_on_torch: bool = True) -> BinaryCheck:
    member = c.path.split("!", 1)[1]
    return loadcheck._judged(c, {member: error}, WHERE, relies_on_torch=relies_on_torch)


def test_a_cuda_runtime_torch_does_not_bring_is_the_wheels_error() -> None:
    said = judged(
        binary("xformers/_C.so", role="library"),
        "libcudart.so.12: cannot open shared object file: No such file or directory",
    )
    [v] = said.violations
    assert (v.rule, v.severity) == ("load", "error")
    assert "libcudart.so.12: cannot open shared object file" in v.message
    assert said.load == f"fails to load under {WHERE}"


def test_a_library_the_environment_lacks_is_a_warning() -> None:
    for missing in ("libcuda.so.1", "libavutil.so.58", "libtorchcodec_core6.so"):
        [v] = judged(
            binary("m/_C.abi3.so"), f"{missing}: cannot open shared object file: No such file"
        ).violations
        assert v.severity == "warning" and "this environment lacks" in v.message
    # CUDA's runtime, for a wheel that does not get it from torch (cupy): the environment's too
    [v] = judged(
        binary("cupy/_c.so"),
        "libcublas.so.13: cannot open shared object file",
        relies_on_torch=False,
    ).violations
    assert v.severity == "warning"


def test_an_undefined_symbol_is_an_error_and_a_load_turns_static_errors_into_warnings() -> None:
    [v] = judged(
        binary("m/_C.abi3.so"), "/tmp/s/m/_C.abi3.so: undefined symbol: scale_rows"
    ).violations
    assert v.severity == "error" and v.message.startswith("m/_C.abi3.so fails to load under")
    assert "/tmp/s" not in v.message and "undefined symbol: scale_rows" in v.message
    static = Violation(binary="b", rule="unresolved-symbol", symbol="s", message="needs s")
    newer = Violation(
        binary="b",
        rule="unresolved-symbol",
        symbol="getrandom",
        message="needs getrandom, newer than the tag",
        kind="newer-than-tag",
    )
    loaded = judged(binary("m/_C.abi3.so", static, newer), None)
    assert [(v.severity, v.kind) for v in loaded.violations] == [
        ("warning", None),
        ("error", "newer-than-tag"),  # loading on this newer system proves nothing of older ones
    ]
    assert "yet it loads under" in loaded.violations[0].message
    assert loaded.load == f"loads under {WHERE}"


def test_a_cuda_build_for_another_torch_among_several_is_a_warning() -> None:
    """bitsandbytes' libbitsandbytes_cuda121.so under torch 2.14.0+cu130: its wheel ships builds
    for CUDA 11, 12 and 13 (its loads-on line names them), and loads the one for torch's."""
    from wheelforge.binaries.metadata import Declared
    from wheelforge.binaries.rule import WheelSummary

    whole = WheelSummary(
        path="/w/x.whl",
        declared=Declared(),
        tag_python=None,
        torch=(2, 4),
        torch_source="requirement",
        torch_cuda="with CUDA 12 (a cu12x build of torch); with CUDA 13 (a cu13x build of torch)",
    )
    import dataclasses

    c = dataclasses.replace(binary("b/libb_cuda121.so", role="library"), wheel=whole)
    [v] = judged(c, "libcudart.so.12: cannot open shared object file").violations
    assert v.severity == "warning" and "one of the CUDA builds its wheel ships" in v.message
