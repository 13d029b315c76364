from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.toolchain.shims import cuda_only_shims
from wheelforge.toolchain.torchprobe import check_target, torch_source_facts, weak_shims_header

from .fakes import torch_env

SHIM = """
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle t, void** ret);
#ifdef USE_CUDA
AOTI_TORCH_EXPORT AOTITorchError
aoti_torch_get_current_cuda_stream(int32_t device_index, void** ret_stream);
#if defined(SOMETHING)
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_nested_cuda(int x);
#endif
#else
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_fallback(int x);
#endif // USE_CUDA
#ifndef USE_CUDA
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_not_cuda(int x);
#endif
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_10_0
#ifdef USE_CUDA
AOTI_TORCH_EXPORT void torch_c10_cuda_free_error_msg(char* error_msg);
#endif
#endif
"""


def test_cuda_only_shims_from_preprocessor_blocks(tmp_path: Path) -> None:
    header = tmp_path / "torch/csrc/inductor/aoti_torch/c/shim.h"
    header.parent.mkdir(parents=True)
    header.write_text(SHIM)
    assert cuda_only_shims(tmp_path) == (
        "aoti_torch_get_current_cuda_stream",
        "aoti_torch_nested_cuda",
        "torch_c10_cuda_free_error_msg",
    )


def test_cuda_only_shims_of_the_installed_torch() -> None:
    torch = pytest.importorskip("torch")
    include = Path(torch.__file__).parent / "include"
    names = cuda_only_shims(include)
    assert "aoti_torch_get_current_cuda_stream" in names
    assert "aoti_torch_get_data_ptr" not in names
    header = weak_shims_header(names)
    assert "#pragma weak aoti_torch_get_current_cuda_stream" in header


def test_check_target(tmp_path: Path) -> None:
    check_target(torch_env(tmp_path, "2.13.0"), Version("2.10"))
    check_target(torch_env(tmp_path, "2.10.1"), Version("2.10.0"))
    with pytest.raises(
        EnvironmentProblem,
        match=r"targets torch 2\.14, but the build environment has torch 2\.13\.0",
    ):
        check_target(torch_env(tmp_path, "2.13.0"), Version("2.14"))


def test_generated_cuda_ops_are_cuda_only(tmp_path: Path) -> None:
    header = tmp_path / "torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h"
    header.parent.mkdir(parents=True)
    header.write_text("AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cuda_mm_out(int);\n")
    assert cuda_only_shims(tmp_path) == ("aoti_torch_cuda_mm_out",)


def _torch_tree(site: Path, *, flags: str, guard: str) -> Path:
    torch = site / "torch"
    (torch / "utils").mkdir(parents=True)
    (torch / "include" / "ATen").mkdir(parents=True)
    (torch / "__init__.py").write_text("")
    (torch / "utils" / "cpp_extension.py").write_text(flags)
    (torch / "include" / "ATen" / "ATen.h").write_text(guard)
    return torch / "__init__.py"


def test_the_cxx_standard_is_the_one_torchs_cpp_extension_passes(tmp_path: Path) -> None:
    """torch 2.14's headers `#error C++20 or later` (ATen.h); its cpp_extension passes
    -std=c++20, as 2.12's and 2.13's already did while its headers needed C++17 only."""
    cpp20 = _torch_tree(tmp_path / "a", flags="cflags = common + ['-fPIC', '-std=c++20']\n",
                        guard="#if !defined(_MSC_VER) && __cplusplus < 201703L\n")  # fmt: skip
    assert torch_source_facts(str(cpp20))["cxx_std"] == 20
    floor = _torch_tree(tmp_path / "b", flags="cflags.append('-std=c++17')\n",
                        guard="#if !defined(_MSC_VER) && __cplusplus < 202002L\n#error C++20\n")  # fmt: skip
    assert torch_source_facts(str(floor))["cxx_std"] == 20  # the headers' floor wins
    # torch 2.11: -std=c++17 passed in eight places, -std=c++20 in a docstring's example
    example = "...  extra_compile_args={'cxx': ['-g', '-std=c++20', '-fPIC']})\n"
    old = _torch_tree(tmp_path / "c", flags=example + "cflags.append('-std=c++17')\n" * 2, guard="")
    assert torch_source_facts(str(old))["cxx_std"] == 17
    assert torch_source_facts(str(tmp_path / "none" / "torch" / "__init__.py"))["cxx_std"] == 17


def test_pips_cuda_header_folders_beside_torch(tmp_path: Path) -> None:
    init = _torch_tree(tmp_path, flags="", guard="")
    for folder in ("nvidia/cu13/include", "nvidia/cudnn/include", "nvidia/cu13/lib"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "nvidia" / "nccl").mkdir()  # no include folder
    assert torch_source_facts(str(init))["cuda_include_dirs"] == [
        str(tmp_path / "nvidia/cu13/include"),
        str(tmp_path / "nvidia/cudnn/include"),
    ]


@pytest.mark.parametrize(
    ("given", "resolved"),
    [
        ("", ""),  # an empty PYTHONPATH adds nothing to sys.path
        ("/a", "/a"),
        ("/a:", "/a:/work"),  # a trailing ':' is the current folder
        (":/a", "/work:/a"),
        ("/a::/b", "/a:/work:/b"),
        (":", "/work:/work"),
        ("src:.:../x/./y", "/work/src:/work:/x/y"),  # relative entries, as sys.path shows them
    ],
)
def test_resolved_pythonpath(given: str, resolved: str) -> None:
    from wheelforge.toolchain.warmtorch import resolved_pythonpath

    assert resolved_pythonpath(given, "/work") == resolved


def test_probe_key_resolves_pythonpath_against_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wheelforge.toolchain.torchprobe import probe_key

    python = Path("/usr/bin/python3")
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    monkeypatch.chdir(one)
    monkeypatch.setenv("PYTHONPATH", "/a:")
    trailing = probe_key(python)
    assert trailing["env"]["PYTHONPATH"] == f"/a:{one}"
    monkeypatch.setenv("PYTHONPATH", f"/a:{one}")
    assert probe_key(python) == trailing  # the same folders: the same answer
    monkeypatch.setenv("PYTHONPATH", "/a:")
    monkeypatch.chdir(two)
    assert probe_key(python) != trailing  # another current folder: another torch may win
    monkeypatch.delenv("PYTHONPATH")
    assert probe_key(python)["env"]["PYTHONPATH"] is None


def test_the_warm_child_gets_the_resolved_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child runs in a folder of its own: an empty entry must not name that folder."""
    from wheelforge.foundation import proc
    from wheelforge.toolchain import warmtorch

    seen: dict[str, object] = {}

    class Started(Exception):
        pass

    def start(args: object, **kwargs: object) -> object:
        seen.update(kwargs)
        raise Started

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/a::rel")
    monkeypatch.setattr(proc, "start", start)
    with pytest.raises(Started):
        warmtorch._start(Path("/usr/bin/python3"))
    assert seen["env"] == {"PYTHONPATH": f"/a:{tmp_path}:{tmp_path}/rel"}
    assert seen["cwd"] != tmp_path  # its own folder, which is removed again
    assert not Path(str(seen["cwd"])).exists()


def test_each_import_check_to_come_has_a_warm_child_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Variants side by side: each one about to compile reserves a child, so three variants'
    children import torch while the compiles run, not one after another in the import checks
    (the probe's child serves the first); a build of one variant starts one child, as before."""
    from wheelforge.foundation import proc
    from wheelforge.toolchain import warmtorch

    started: list[object] = []

    class Child:
        def __init__(self) -> None:
            started.append(self)

        def read_probe(self) -> str:
            return "{}"

        def finish(self, _request: object) -> proc.Result:
            return proc.Result(args=(), returncode=0, stdout="[]\n", stderr="")

        def close(self) -> None:
            pass

    monkeypatch.setattr(warmtorch, "_start", lambda _python: Child())
    python = Path("/usr/bin/python3")
    with warmtorch.session():
        warmtorch.probe(python)  # the cold build's probe: one child, kept warm
        warmtorch.reserve(python)  # the first variant's import check takes the probe's
        assert len(started) == 1
        warmtorch.reserve(python)
        warmtorch.reserve(python)
        assert len(started) == 3  # one each, all warm before any import check
        for _ in range(3):
            warmtorch.import_modules(python, Path("site"), [])
        assert len(started) == 3  # no import check started one of its own
        warmtorch.reserve(python)  # a later variant, its own again
        assert len(started) == 4
    assert warmtorch._WARM == {} and warmtorch._RESERVED == {}
