"""What a wheel's torch requirement means to check (issue 38): a pin is any requirement that
admits one torch minor (packaging decides, not the spelling); torch's own wheel is torch, not an
extension that must pin it; and a binary's CUDA runtime is weighed against the torch releases
the requirement admits (data/torch-cuda.toml: each release's PyPI build, from its METADATA).
The binaries are small real ones built by tests/data/abicheck/build.sh."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from wheelforge.binaries import abicheck, torchcuda
from wheelforge.binaries.checkwheels import result_of
from wheelforge.binaries.metadata import declared, pinned

from .fakes import with_record

ABI = Path(__file__).resolve().parents[1] / "data" / "abicheck"


def wheel(tmp_path: Path, members: dict[str, Path], requires: list[str], name: str) -> Path:
    dist, version = name.split("-")[:2]
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, source in members.items():
            zf.writestr(member, source.read_bytes())
        lines = [f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"]
        lines += [f"Requires-Dist: {r}\n" for r in requires]
        zf.writestr(f"{dist}-{version}.dist-info/METADATA", "".join(lines))
    return with_record(path)


@pytest.mark.parametrize(
    ("spec", "pin"),
    [
        ("==2.14.*", "2.14.*"),
        (">=2.14,<2.15", "2.14.*"),
        (">=2.14.0,<2.15.0", "2.14.*"),  # torch-tensorrt 2.14.0's
        ("<2.15.0,>=2.14.0", "2.14.*"),
        ("~=2.14.0", "2.14.*"),
        ("==2.14.1", "2.14.1"),
        (">2.14,<2.15", "2.14.*"),
        ("~=2.14", None),
        (">=2.14", None),
        (">=2.13,<2.15", None),
        ("==2.*", None),
        ("", None),
    ],
)
def test_a_pin_is_any_requirement_that_admits_one_minor(spec: str, pin: str | None) -> None:
    assert pinned(SpecifierSet(spec)) == pin


def test_a_range_pin_makes_a_libtorch_wheel_classic(tmp_path: Path) -> None:
    """cxx_symbol.so uses libtorch's C++ API: pinned with >=2.14.0,<2.15.0 (as torch-tensorrt
    2.14.0 is) it is checked as a classic wheel, which neither the cxx-symbol rule nor the
    torch-pin rule fails; with >=2.14 it is the stable ABI's, which fails it."""
    members = {"demo/_C.abi3.so": ABI / "cxx_symbol.so"}
    name = "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    ranged = wheel(tmp_path, members, ["torch<2.15.0,>=2.14.0"], name)
    checks = abicheck.check_wheel(ranged, torch=None, guards={})
    assert {c.flavour for c in checks} == {"unstable"}
    assert not [v for c in checks for v in c.violations if v.blocking]
    assert declared(
        "Metadata-Version: 2.1\nName: d\nVersion: 1\nRequires-Dist: torch<2.15.0,>=2.14.0\n"
    ).torch_pin == ("2.14.*")
    (tmp_path / "open").mkdir()
    open_ = wheel(tmp_path / "open", members, ["torch>=2.14"], name)
    checks = abicheck.check_wheel(open_, torch=None, guards={})
    assert any(v.rule == "cxx-symbol" and v.blocking for c in checks for v in c.violations)


def test_torchs_own_wheel_is_torch_not_an_extension_that_must_pin_it(tmp_path: Path) -> None:
    """A wheel named torch holding a library that needs libtorch's C++ (as torch_python needs
    torch_cpu's) and requiring no torch: the classic rules, and no torch-pin error."""
    members = {"torch/lib/libtorch_demo.so": ABI / "cxx_symbol.so"}
    path = wheel(tmp_path, members, [], "torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    checks = abicheck.check_wheel(path, torch=None, guards={})
    assert {c.flavour for c in checks} == {"unstable"}
    assert [v.rule for c in checks for v in c.violations if v.blocking] == []
    [checked] = result_of(checks).wheels
    assert checked.summary.allows is None  # no "pin it" said to torch
    # The same bytes in another wheel that claims any torch: an extension, failed.
    other = wheel(tmp_path, members, [], "demo-1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    rules = {
        v.rule for c in abicheck.check_wheel(other, torch=None, guards={}) for v in c.violations
    }
    assert "cxx-symbol" in rules


def test_the_data_says_each_torch_releases_pypi_cuda() -> None:
    """Read from the releases' own METADATA (tools/gen_torch_cuda.py): 2.10.0 requires
    nvidia-cuda-runtime-cu12==12.8.90, 2.11.0 cuda-toolkit[cudart,...]==13.0.2."""
    builds = torchcuda.pypi_builds()
    from packaging.version import Version

    assert builds[Version("2.10.0")].major == 12
    assert builds[Version("2.11.0")].major == 13
    assert torchcuda.runtime_major("libcudart.so.12") == 12
    assert torchcuda.runtime_major("libcublasLt.so.13") == 13
    assert torchcuda.runtime_major("libcudart.so") is None


NAME = "demo-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"


def cuda_findings(path: Path) -> list[tuple[str, str]]:
    checks = abicheck.check_wheel(path, torch=None, guards={})
    return [
        (v.severity, v.message) for c in checks for v in c.violations if v.rule == "cuda-runtime"
    ]


def test_a_cuda_12_binary_required_beside_cuda_13_torches_only_fails(tmp_path: Path) -> None:
    """cudart12_oplib.so needs libcudart.so.12; torch>=2.11 admits only releases whose PyPI
    wheels bring CUDA 13's runtime: pip installs it beside a torch without libcudart.so.12."""
    members = {"demo/_ops.abi3.so": ABI / "cudart12_oplib.so"}
    path = wheel(tmp_path, members, ["torch>=2.11"], NAME)
    [(severity, message)] = cuda_findings(path)
    assert severity == "error"
    assert "libcudart.so.12 (CUDA 12's runtime)" in message and "2.11.0: CUDA 13.0" in message


def test_a_cuda_12_binary_whose_requirement_admits_a_cuda_12_torch_says_which(
    tmp_path: Path,
) -> None:
    """torch>=2.10 admits 2.10, PyPI's CUDA 12 build: no error, and the "loads on" line says it
    loads on a CUDA 12 build of torch only."""
    members = {"demo/_ops.abi3.so": ABI / "cudart12_oplib.so"}
    path = wheel(tmp_path, members, ["torch>=2.10"], NAME)
    # It also admits 2.11 on (CUDA 13 on PyPI), where it cannot load: a warning, as xformers
    # 0.0.35's _C.so fails under torch 2.14.0+cu130 ("libcudart.so.12: cannot open ...").
    [(severity, message)] = cuda_findings(path)
    assert severity == "warning" and "also admits torch 2.11.0 to" in message
    assert cuda_findings(wheel(tmp_path, members, ["torch>=2.10,<2.11"], NAME)) == []
    [checked] = result_of(abicheck.check_wheel(path, torch=None, guards={})).wheels
    assert checked.summary.torch_cuda is not None
    assert checked.summary.torch_cuda.startswith("with CUDA 12 (a cu12x build of torch")
    assert "torch 2.10.0" in checked.summary.torch_cuda


def test_a_wheel_that_requires_the_runtime_itself_needs_none_of_torch(tmp_path: Path) -> None:
    members = {"demo/_ops.abi3.so": ABI / "cudart12_oplib.so"}
    path = wheel(tmp_path, members, ["torch>=2.11", "nvidia-cuda-runtime-cu12"], NAME)
    assert cuda_findings(path) == []
    under_extra = wheel(
        tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path,
        members,
        ["torch>=2.11", 'nvidia-cuda-runtime-cu12; extra == "cuda"'],
        NAME,
    )
    assert [s for s, _ in cuda_findings(under_extra)] == ["error"]


def test_a_wheel_without_torch_gets_its_cuda_from_the_system_not_torch(tmp_path: Path) -> None:
    """No torch requirement and no torch library linked (cupy, onnxruntime): the runtime it
    needs comes from the system's CUDA or its own packages; nothing is said of torch's builds."""
    members = {"demo/_ops.abi3.so": ABI / "cudart12_oplib.so"}
    path = wheel(tmp_path, members, ["numpy"], NAME)
    assert cuda_findings(path) == []
    [checked] = result_of(abicheck.check_wheel(path, torch=None, guards={})).wheels
    assert checked.summary.torch_cuda is None


def test_one_of_several_cuda_builds_is_a_variant_not_an_error(tmp_path: Path) -> None:
    """bitsandbytes 0.50.2 requires torch>=2.4,<3 and ships libbitsandbytes_cuda118.so to
    _cuda130.so, loading the one for torch's CUDA: its CUDA 11 build has no PyPI torch to go
    with, but its CUDA 12 build has, so the CUDA 11 one is a warning, not an error."""
    members = {
        "demo/libops_cuda118.so": ABI / "cudart11_oplib.so",
        "demo/libops_cuda128.so": ABI / "cudart12_oplib.so",
    }
    path = wheel(tmp_path, members, ["torch<3,>=2.4"], NAME)
    found = dict(cuda_findings(path)[i][::-1] for i in range(2))
    variant = next(m for m in found if "libcudart.so.11.0" in m)
    assert found[variant] == "warning" and "ships builds for CUDA 12 too" in variant
    # No build of it for CUDA 13, which torch 2.11 on brings: its CUDA 12 build warns of them.
    newer = next(m for m in found if "libcudart.so.12" in m)
    assert found[newer] == "warning" and "also admits torch 2.11.0 to" in newer
    # Alone, the CUDA 11 build is an error: nothing it admits brings its runtime.
    (tmp_path / "alone").mkdir()
    alone = wheel(
        tmp_path / "alone", {"demo/libops.so": ABI / "cudart11_oplib.so"}, ["torch>=2.4"], NAME
    )
    assert [s for s, _ in cuda_findings(alone)] == ["error"]


def test_the_runtime_package_is_the_one_of_its_library() -> None:
    """libcublas.so.12 comes with nvidia-cublas-cu12, libnvrtc.so.12 with nvidia-cuda-nvrtc-cu12
    (not nvidia-cuda-runtime-cu12, which holds libcudart alone); CUDA 13's with cuda-toolkit's
    extra of the same name."""
    from wheelforge.binaries import torchcuda

    def meta(*requires: str) -> str:
        return "".join(f"Requires-Dist: {r}\n" for r in requires)

    assert torchcuda.requires_runtime(meta("nvidia-cublas-cu12"), 12, "libcublas.so.12")
    assert torchcuda.requires_runtime(meta("nvidia-cublas-cu12"), 12, "libcublasLt.so.12")
    assert not torchcuda.requires_runtime(meta("nvidia-cuda-runtime-cu12"), 12, "libnvrtc.so.12")
    assert torchcuda.requires_runtime(meta("nvidia-cuda-nvrtc-cu12"), 12, "libnvrtc.so.12")
    assert torchcuda.requires_runtime(meta("cuda-toolkit[nvrtc]==13.*"), 13, "libnvrtc.so.13")
    assert not torchcuda.requires_runtime(meta("cuda-toolkit[cudart]==13.*"), 13, "libnvrtc.so.13")
    assert torchcuda.runtime_requirement("libnvrtc.so.12", 12) == "nvidia-cuda-nvrtc-cu12"
    assert torchcuda.runtime_requirement("libcudart.so.13", 13).startswith(
        "nvidia-cuda-runtime==13"
    )


@pytest.mark.parametrize(
    ("platform", "warned"), [("manylinux2014_x86_64", True), ("manylinux_2_28_x86_64", False)]
)
def test_libstdcxx_above_the_tag_is_a_warning(tmp_path: Path, platform: str, warned: bool) -> None:
    """torchaudio 2.11.0's _torchaudio.abi3.so needs GLIBCXX_3.4.21: within manylinux_2_28's
    libstdc++ (3.4.24), above manylinux2014's (3.4.19), where it is a tags warning (it loads where
    libstdc++ is newer: everywhere it was tried), never an error (auditwheel's policy decides)."""
    released = ABI.parent / "released" / "_torchaudio.abi3.so"
    name = f"demo-1.0-cp310-abi3-{platform}.whl"
    path = wheel(tmp_path, {"demo/_torchaudio.abi3.so": released}, ["torch>=2.11"], name)
    [checked] = result_of(abicheck.check_wheel(path, torch=None, guards={})).binaries
    tags = [v for v in checked.violations if v.rule == "tags"]
    assert {v.severity for v in tags} == ({"warning"} if warned else set())
    if warned:  # the newest of each family above the tag: GLIBCXX, and CXXABI above 1.3.7
        [glibcxx] = [v for v in tags if (v.symbol or "").startswith("GLIBCXX_")]
        assert glibcxx.symbol == "GLIBCXX_3.4.21" and "GLIBCXX_3.4.19" in glibcxx.message
