"""The stand-in torch of init's setup.py child (capture_standin.py), in this process: what a
setup.py asks of torch (its module spec, importlib.util.find_spec, importlib.metadata, the
version's comparisons, the attributes an absent-GPU CUDA torch has) answered as an installed
torch answers, and a name it lacks recorded with the line that asked. The error init makes of
such a record is one line of exit code 5 (setupcapture.py).

This process has a real torch (2.13.0): the stand-in reports 2.99.0, so an answer that came
from the real one shows."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wheelforge.adoption.child import capture_standin
from wheelforge.adoption.doors import setupcapture
from wheelforge.adoption.record import childdocument, setuprun
from wheelforge.foundation.errors import EnvironmentProblem, ToolError


def _torch_modules() -> dict[str, Any]:
    return {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The stand-in installed as the child installs it (its scratch folder in *tmp_path*);
    this process's own torch modules, import hooks and path given back afterwards."""
    importlib.import_module("setuptools.command.build_ext")  # the stand-in's BuildExtension base
    saved = _torch_modules()
    for name in saved:
        del sys.modules[name]
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "pkg_resources", raising=False)
    got: dict[str, Any] = {"stub_missing": []}
    context = {"torch_version": "2.99.0", "cuda_version": "13.0", "tmp": str(tmp_path)}
    context["cuda_home"] = "/opt/cuda-13.0"
    try:
        capture_standin.install(context, got, open, "cu130", where=lambda: "setup.py:7")
        yield got
    finally:
        for name in _torch_modules():
            del sys.modules[name]
        sys.modules.update(saved)
        importlib.invalidate_caches()


def test_find_spec_and_the_module_spec_are_an_installed_packages(
    record: dict[str, Any], tmp_path: Path
) -> None:
    """exllamav2's ``importlib.util.find_spec("torch")`` raised "torch.__spec__ is None"."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.loader is not None and spec.has_location
    import torch

    assert torch.__spec__ is spec and torch.__loader__ is spec.loader
    package = tmp_path / "wheelforge-stand-in-torch" / "torch"
    assert Path(torch.__file__) == package / "__init__.py" and Path(torch.__file__).is_file()
    assert [Path(p) for p in torch.__path__] == [package]
    standins = [m for n, m in sys.modules.items() if n == "torch" or n.startswith("torch.")]
    assert len(standins) == 8 and all(Path(m.__file__).is_file() for m in standins)
    ext = importlib.util.find_spec("torch.utils.cpp_extension")
    assert ext is not None and ext.parent == "torch.utils"
    assert importlib.import_module("torch.version") is torch.version
    assert importlib.reload(torch) is torch  # the loader gives the made module back
    from torch import version as torch_version  # exllamav2's second line
    from torch.utils import cpp_extension

    assert (torch_version.cuda, torch_version.hip) == ("13.0", None)
    assert cpp_extension.CUDA_HOME == "/opt/cuda-13.0"
    assert record["stub_missing"] == []  # the import system's own lookups are no misses
    assert importlib.util.find_spec("torch.nn") is None  # a module it lacks: not found
    assert record["stub_missing"] == [{"name": "import torch.nn", "where": "setup.py:7"}]
    assert record["torch"] == {
        "version": "2.99.0+cu130",
        "real": False,
        "cuda": "13.0",
        "forced": False,
    }


def test_importlib_metadata_finds_the_stand_ins_distribution(record: dict[str, Any]) -> None:
    """``importlib.metadata.version("torch")``: PackageNotFoundError before; the stand-in's
    release (not this process's torch 2.13.0), under any spelling of the name."""
    assert importlib.metadata.version("torch") == "2.99.0"
    assert importlib.metadata.version("Torch") == "2.99.0"
    dist = importlib.metadata.distribution("torch")
    assert (dist.metadata["Name"], dist.version) == ("torch", "2.99.0")
    assert (dist.read_text("top_level.txt") or "").split() == ["torch"]
    folder = Path(str(dist._path))  # type: ignore[attr-defined]
    assert folder.name == "torch-2.99.0.dist-info"
    assert str(folder.parent) in sys.path  # where pkg_resources, imported later, finds it


def test_the_version_compares_as_torchs_torchversion(record: dict[str, Any]) -> None:
    import torch

    v = torch.__version__
    assert isinstance(v, str) and v == "2.99.0+cu130" and v.split("+")[0] == "2.99.0"
    assert v >= (2, 4) and v >= "2.4" and v < "3" and v < (3,) and v > "2.10"
    assert v > "2.99.0" and v != "2.99.0"  # packaging's rule: a local label sorts after
    assert torch.version.__version__ == v and {v: 1}["2.99.0+cu130"] == 1
    assert (v == "not a version") is False
    with pytest.raises(TypeError, match="not a version"):
        _ = v < "not a version"


def test_no_gpu_and_cpp_extensions_names(record: dict[str, Any]) -> None:
    import torch
    from torch.utils.cpp_extension import (
        COMMON_NVCC_FLAGS,
        IS_HIP_EXTENSION,
        ROCM_HOME,
        TORCH_LIB_PATH,
        BuildExtension,
        include_paths,
    )

    assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
    assert torch.cuda.get_arch_list() == []
    with pytest.raises(RuntimeError, match="Found no NVIDIA driver"):
        torch.cuda.get_device_capability()
    assert torch._C._GLIBCXX_USE_CXX11_ABI is True
    assert "OpenMP" in torch.__config__.parallel_info()
    assert "--expt-relaxed-constexpr" in COMMON_NVCC_FLAGS
    assert (IS_HIP_EXTENSION, ROCM_HOME, include_paths()) == (False, None, [])
    assert Path(TORCH_LIB_PATH).parent == Path(torch.__file__).parent
    assert issubclass(BuildExtension.with_options(use_ninja=False), BuildExtension)
    assert record["stub_missing"] == []


def test_a_name_it_lacks_raises_as_python_does_and_is_recorded(record: dict[str, Any]) -> None:
    import torch

    with pytest.raises(AttributeError, match="stand-in torch has no torch.cuda.nccl_version"):
        torch.cuda.nccl_version()
    with pytest.raises(ImportError, match="cannot import name 'load'"):
        from torch.utils.cpp_extension import load  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match="No module named 'torch.distributed'"):
        import torch.distributed
    with pytest.raises(AttributeError):
        torch.__wrapped__  # noqa: B018 - what inspect asks: not a name setup.py wants
    names = [m["name"] for m in record["stub_missing"]]
    assert names == [
        "torch.cuda.nccl_version",
        "torch.utils.cpp_extension.load",
        "import torch.distributed",
    ]
    assert {m["where"] for m in record["stub_missing"]} == {"setup.py:7"}


# -- the error init makes of the child's record -------------------------------------------------


def _failed(error: dict[str, Any], *misses: str) -> setuprun.SetupRun:
    """A failed run's record, as the child writes it, parsed as init reads it."""
    return childdocument.parse(
        {
            "error": {"where": "setup.py:9", "traceback": "Traceback ...\n", **error},
            "torch": {"version": "2.10.0+cu130", "real": False},
            "stub_missing": [{"name": m, "where": "setup.py:9"} for m in misses],
            "python": "/opt/py/bin/python",
            "output": "",
            "stderr": "",
        }
    )


@pytest.mark.parametrize(
    ("error", "miss", "asked"),
    [
        (
            {"type": "AttributeError", "message": "stand-in torch has no torch.cuda.nccl"},
            "torch.cuda.nccl",
            "torch.cuda.nccl",
        ),
        (
            {"type": "ImportError", "message": "cannot import name 'load' from 'torch.utils'"},
            "torch.utils.cpp_extension.load",
            "torch.utils.cpp_extension.load",
        ),
        (
            {"type": "ModuleNotFoundError", "message": "No module named 'torch.nn'"},
            "import torch.nn",
            "the module torch.nn",
        ),
    ],
)
def test_setup_py_failing_on_a_missing_name_is_one_line_of_exit_code_5(
    tmp_path: Path, error: dict[str, Any], miss: str, asked: str
) -> None:
    made = setupcapture._failure(tmp_path, _failed(error, "import torch.utils.hipify", miss))
    assert isinstance(made, EnvironmentProblem) and made.exit_code == 5
    assert made.details is None  # no traceback: the lookup was the stand-in's
    assert made.message == (
        f"{tmp_path / 'setup.py'} line 9 asks for {asked}, which wheelforge init's stand-in "
        "torch lacks (/opt/py/bin/python has no torch); install torch there or pass --python "
        "with a Python that has it, or read setup.py without running it: 'wheelforge init --no-run'"
    )


def test_another_failure_stays_setup_pys_and_names_what_it_was_raised_from(
    tmp_path: Path,
) -> None:
    """A project's own error raised while handling the stand-in's ImportError is its words,
    with the name said; one raised for something else does not blame the stand-in."""
    wrapped = {
        "type": "RuntimeError",
        "message": "needs torch >= 2.7",
        "cause": {"type": "ImportError", "message": "cannot import name 'SyclExtension'"},
    }
    made = setupcapture._failure(
        tmp_path, _failed(wrapped, "torch.utils.cpp_extension.SyclExtension")
    )
    assert type(made) is ToolError and made.exit_code == 3
    assert "setup.py failed at line 9: RuntimeError: needs torch >= 2.7" in made.message
    assert (
        "stand-in torch for torch.utils.cpp_extension.SyclExtension at setup.py:9" in made.message
    )
    other = {"type": "ModuleNotFoundError", "message": "No module named 'pkg_resources'"}
    made = setupcapture._failure(tmp_path, _failed(other, "import torch.utils.hipify"))
    assert type(made) is ToolError and "stand-in" not in made.message
    real = _failed({"type": "AttributeError", "message": "no torch.cuda.nccl"}, "torch.cuda.nccl")
    real = dataclasses.replace(real, torch=setuprun.TorchSeen(version="2.13.0", real=True))
    assert type(setupcapture._failure(tmp_path, real)) is ToolError


def test_a_missing_build_requirement_names_every_one_to_install(tmp_path: Path) -> None:
    """setup.py importing a distribution of [build-system] requires that --python lacks (vLLM
    0.34: setuptools_rust, then setuptools_scm): one line naming the whole list, ready to
    install, so the user does not find them one failure at a time."""
    (tmp_path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["cmake>=3.26.1", "setuptools-rust>=1.9.0", "torch == 2.14.0"]\n'
    )
    missing = {
        "type": "ModuleNotFoundError",
        "message": "No module named 'setuptools_rust'",
        "traceback": "Traceback ...\nModuleNotFoundError: No module named 'setuptools_rust'\n",
    }
    made = setupcapture._failure(tmp_path, _failed(missing))
    assert type(made) is ToolError and made.exit_code == 3
    assert made.message.endswith(
        "install them there: /opt/py/bin/python -m pip install 'cmake>=3.26.1' "
        "'setuptools-rust>=1.9.0' 'torch == 2.14.0'"
    )
    # a module no build requirement provides keeps the general advice
    other = {**missing, "traceback": "ModuleNotFoundError: No module named 'pandas'\n"}
    assert "fix what it needs" in setupcapture._failure(tmp_path, _failed(other)).message
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert "fix what it needs" in setupcapture._failure(tmp_path, _failed(missing)).message
