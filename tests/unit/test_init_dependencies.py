"""init's phase 2 (issue 19) on captured builds, without a process: several shared objects
written as ``extensions``, an operator library the package loads with ``torch.ops.load_library``
as ``kind: library``, include folders in a git submodule or a vendored CUTLASS as
``header-libraries`` (build.toml's ``cutlass_X_Y`` as nvidia-cutlass from PyPI), and the
programs that write sources as ``generate`` steps."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from wheelforge.adoption.doors import buildtoml, generators
from wheelforge.adoption.doors.setuprecord import read_record
from wheelforge.adoption.record import childdocument
from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
    CapturedStep,
    ProjectMetadata,
)
from wheelforge.adoption.writer import matrixfile
from wheelforge.adoption.writer.matrixfile import InitChoices, render
from wheelforge.configuration.archs import parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import gitfiles
from wheelforge.foundation.errors import ConfigError
from wheelforge.planning.selection import sdist_files

STABLE = "#include <torch/csrc/stable/library.h>\nSTABLE_TORCH_LIBRARY(demo, m) {}\n"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def archs(text: str) -> tuple[object, ...]:
    return parse_arch_list(text, source="test")


def files(root: Path, tree: dict[str, str]) -> Path:
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def ext(name: str, *sources: str | CapturedSource, **kw: object) -> CapturedExtension:
    return CapturedExtension(
        name=name,
        kind="CUDAExtension",
        where="setup.py:1",
        sources=tuple(CapturedSource(path=s) if isinstance(s, str) else s for s in sources),
        **kw,  # type: ignore[arg-type]
    )


def build_of(root: Path, *extensions: CapturedExtension, **kw: object) -> CapturedBuild:
    return CapturedBuild(
        root=root,
        front_door="setup.py",
        extensions=extensions,
        metadata=ProjectMetadata(name="demo", version="1.0"),
        packages=("demo",),
        **kw,  # type: ignore[arg-type]
    )


def written(build: CapturedBuild, **choices: object) -> tuple[dict[str, object], object]:
    result = render(build, InitChoices(**choices))  # type: ignore[arg-type]
    (build.root / "matrix.yaml").write_text(result.text)
    return yaml.safe_load(result.text), result


# -- several shared objects, and operator libraries -------------------------------------------------


def test_several_extensions_are_written_each_with_its_sources_flags_and_archs(
    tmp_path: Path,
) -> None:
    root = files(
        tmp_path,
        {
            "demo/__init__.py": "from . import _C\n",
            "demo/moe/__init__.py": "",
            "demo/_loader.py": textwrap.dedent("""\
                import glob, os
                import torch

                def load():
                    for path in glob.glob(os.path.join(os.path.dirname(__file__), "_ops*.so")):
                        torch.ops.load_library(path)
                """),
            "csrc/ops.cpp": STABLE,
            "csrc/k_sm90.cu": STABLE,
            "csrc/moe/moe.cu": STABLE,
            "csrc/lib/lib.cpp": STABLE,
        },
    )
    build = build_of(
        root,
        ext(
            "demo._C",
            "csrc/ops.cpp",
            CapturedSource(path="csrc/k_sm90.cu", archs=archs("9.0a")),
            archs=archs("8.0 9.0a"),
            nvcc_flags=("--use_fast_math",),
        ),
        ext(
            "demo.moe._moe_C", "csrc/moe/moe.cu", nvcc_flags=("-DMOE_TOPK=8",), torch_target="2.10"
        ),
        ext("demo._ops", "csrc/lib/lib.cpp", cxx_flags=("-O2",)),
    )
    data, result = written(build)
    assert "extension" not in data
    first, moe, lib = data["extensions"]  # type: ignore[misc]
    assert first["name"] == "demo._C" and first["nvcc-flags"] == ["--use_fast_math"]
    assert {"files": "csrc/k_sm90.cu", "archs": "9.0a"} in first["sources"]
    assert moe["nvcc-flags"] == ["-DMOE_TOPK=8"] and moe["sources"] == ["csrc/moe/moe.cu"]
    # loaded with torch.ops.load_library (a glob naming _ops), no PyInit in its sources
    assert lib["kind"] == "library" and "module-init" not in lib
    assert first["module-init"] is True and "kind" not in first
    assert data["torch"] == ">=2.10"  # the newest stable-ABI target of them
    assert data["arch-sets"] == {"default": "8.0 9.0a"}
    assert "demo._C: 2 sources; demo.moe._moe_C: 1 source; demo._ops: 1 source" in (
        result.summary  # type: ignore[attr-defined]
    )
    assert any("demo/_loader.py:6 loads it" in d for d in result.done)  # type: ignore[attr-defined]
    matrix = load_matrix(root / "matrix.yaml")
    assert [(e.name, e.kind) for e in matrix.extensions] == [
        ("demo._C", "module"),
        ("demo.moe._moe_C", "module"),
        ("demo._ops", "library"),
    ]


def test_a_module_that_defines_its_init_stays_a_module_though_the_package_loads_it(
    tmp_path: Path,
) -> None:
    root = files(
        tmp_path,
        {
            "demo/__init__.py": "import torch\ntorch.ops.load_library(__file__.replace('__init__.py', '_C.so'))\n",
            "csrc/ops.cpp": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
            "csrc/other.cpp": STABLE,
        },
    )
    data, _ = written(build_of(root, ext("demo._C", "csrc/ops.cpp")), torch=("2.13.0",))
    assert "kind" not in data["extension"]  # type: ignore[operator]
    data, _ = written(build_of(root, ext("demo._other", "csrc/other.cpp")))
    assert "kind" not in data["extension"]  # type: ignore[operator]  # nothing loads _other


def test_stable_and_unstable_extensions_share_the_unstable_abi(tmp_path: Path) -> None:
    root = files(
        tmp_path,
        {
            "demo/__init__.py": "",
            "csrc/a.cpp": STABLE,
            "csrc/b.cpp": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
        },
    )
    data, result = written(
        build_of(root, ext("demo._a", "csrc/a.cpp"), ext("demo._b", "csrc/b.cpp")),
        torch=("2.13.0",),
    )
    assert data["abi"] == "unstable" and data["torch"] == ["2.13.0"]
    assert any("demo._a use(s) the stable ABI" in d for d in result.done)  # type: ignore[attr-defined]


# -- header libraries -------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _gitlinks(monkeypatch: pytest.MonkeyPatch) -> None:
    """What git says the superproject pins (unit tests start no process): COMMIT."""
    monkeypatch.setattr(gitfiles, "gitlink", lambda top, path: COMMIT)


def superproject(top: Path) -> None:
    """A checkout (``.git``) with a CUTLASS submodule checked out at COMMIT."""
    (top / ".git").mkdir(parents=True)
    files(
        top,
        {
            ".gitmodules": '[submodule "third_party/cutlass"]\n\tpath = third_party/cutlass\n'
            "\turl = https://github.com/NVIDIA/cutlass.git\n",
            "third_party/cutlass/.git/HEAD": COMMIT + "\n",
            "third_party/cutlass/include/cutlass/cutlass.h": "#pragma once\n",
            "third_party/cutlass/tools/util/include/cutlass/util/x.h": "#pragma once\n",
            "third_party/cutlass/examples/common/y.h": "#pragma once\n",
        },
    )


def test_include_folders_in_a_git_submodule_become_a_header_library(tmp_path: Path) -> None:
    superproject(tmp_path)
    files(tmp_path, {"demo/__init__.py": "", "csrc/ops.cpp": STABLE, "csrc/ops.h": ""})
    include = (
        "csrc",
        "third_party/cutlass/include",
        "third_party/cutlass/tools/util/include",
        "third_party/cutlass/examples",
    )
    data, result = written(build_of(tmp_path, ext("demo._C", "csrc/ops.cpp", include_dirs=include)))
    assert data["header-libraries"] == [
        {
            "name": "cutlass",
            "path": "third_party/cutlass",
            "include": ["include", "tools/util/include", "examples"],
        }
    ]  # no version: the build reads the checkout's commit
    assert data["extension"]["include-dirs"] == ["csrc"]  # type: ignore[index]
    assert any("a git submodule, checked out at 0123456789ab" in d for d in result.done)  # type: ignore[attr-defined]
    matrix = load_matrix(tmp_path / "matrix.yaml")
    [lib] = matrix.header_libraries
    assert lib.path == tmp_path / "third_party" / "cutlass"


def test_a_project_that_is_itself_a_submodule_is_no_header_library_of_its_own(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    files(tmp_path, {".gitmodules": '[submodule "k"]\n\tpath = kernels/mine\n\turl = x\n'})
    root = files(tmp_path / "kernels" / "mine", {"demo/__init__.py": "", "csrc/ops.cpp": STABLE})
    data, _ = written(build_of(root, ext("demo._C", "csrc/ops.cpp", include_dirs=(".", "csrc"))))
    assert "header-libraries" not in data
    assert data["extension"]["include-dirs"] == [".", "csrc"]  # type: ignore[index]


def test_a_vendored_cutlass_above_the_project_folder_is_read_there_and_refused_by_the_sdist(
    tmp_path: Path,
) -> None:
    """FlashAttention-3's shape: hopper/ includes ../csrc/cutlass/include; no git checkout, so
    the version is read from CUTLASS's version.h and written."""
    repo = files(
        tmp_path,
        {
            "csrc/cutlass/include/cutlass/cutlass.h": "#pragma once\n",
            "csrc/cutlass/include/cutlass/version.h": "#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 9\n"
            "#define CUTLASS_PATCH 2\n",
            "hopper/flash_attn_3/__init__.py": "",
            "hopper/flash_api.cpp": STABLE,
            "hopper/pyproject.toml": "[build-system]\nrequires = ['wheelforge']\n",
        },
    )
    root = repo / "hopper"
    build = CapturedBuild(
        root=root,
        front_door="setup.py",
        extensions=(
            ext("flash_attn_3._C", "flash_api.cpp", include_dirs=(".", "../csrc/cutlass/include")),
        ),
        metadata=ProjectMetadata(name="flash_attn_3", version="3.0.0"),
        packages=("flash_attn_3",),
        done=("include_dirs: '../csrc/cutlass/include' lies outside the project folder: ...",),
    )
    data, result = written(build)
    assert data["header-libraries"] == [
        {"name": "cutlass", "path": "../csrc/cutlass", "version": "3.9.2"}
    ]
    done = result.done  # type: ignore[attr-defined]
    assert any(
        "above the project folder: a build reads it there, an sdist cannot carry it" in d
        for d in done
    )
    assert not any(
        "lies outside the project folder" in d for d in done
    )  # said once, as the library's
    matrix = load_matrix(root / "matrix.yaml")
    assert matrix.header_libraries[0].path == repo / "csrc" / "cutlass"
    with pytest.raises(
        ConfigError, match=r"header-libraries\[0\] \(cutlass\): .* an sdist cannot carry it"
    ):
        sdist_files(matrix, root)


BUILD_TOML = """\
[general]
name = "lora"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.sgmv]
backend = "cuda"
depends = ["torch", "{dep}"]
include = {include}
src = ["sgmv/sgmv.cu"]
"""


def kernel(root: Path, dep: str, include: str = "[]") -> CapturedBuild:
    files(
        root,
        {
            "build.toml": BUILD_TOML.format(dep=dep, include=include),
            "torch-ext/torch_binding.cpp": "//\n",
            "torch-ext/lora/__init__.py": "",
            "sgmv/sgmv.cu": "//\n",
        },
    )
    return buildtoml.read_build_toml(root)


def test_a_kernel_builder_cutlass_without_a_pypi_release_needs_a_hand(tmp_path: Path) -> None:
    build = kernel(tmp_path, "cutlass_3_9")  # kernel-builder's 3.9.2: no nvidia-cutlass 3.9.2.0
    assert build.header_libraries == ()
    [note] = [h for h in build.hand if "cutlass_3_9" in h]
    assert "CUTLASS 3.9.2" in note and "checkout v3.9.2" in note and "header-libraries" in note


def test_a_cutlass_submodule_takes_the_place_of_build_tomls_pypi_cutlass(tmp_path: Path) -> None:
    superproject(tmp_path)
    build = kernel(tmp_path, "cutlass_3_8", include='["third_party/cutlass/include"]')
    assert [lib.pypi for lib in build.header_libraries] == ["nvidia-cutlass==3.8.0.0"]
    data, result = written(build)
    assert data["header-libraries"] == [{"name": "cutlass", "path": "third_party/cutlass"}]
    assert any("not nvidia-cutlass==3.8.0.0" in d for d in result.done)  # type: ignore[attr-defined]


# -- generate steps ---------------------------------------------------------------------------------


def test_a_generator_setup_py_runs_as_a_command_becomes_a_step(tmp_path: Path) -> None:
    root = files(
        tmp_path, {"tools/gen.py": "", "gen/k_a.cu": "", "gen/k_b.cu": "", "csrc/ops.cpp": ""}
    )
    record = {
        "root": str(root),
        "setup": "setup.py",
        "written": [
            {"path": str(root / "gen/k_a.cu"), "by": "tools/gen.py", "entry": {"function": "<module>"}},
            {"path": str(root / "gen/k_b.cu"), "by": "tools/gen.py", "entry": {"function": "<module>"}},
            {"path": str(root / "demo/config.py"), "by": "setup.py"},
        ],
        "generators": [
            {"argv": ["/usr/bin/python3", "tools/gen.py", "--out=gen", "--n", "2"], "cwd": str(root),
             "script": "tools/gen.py", "where": "setup.py:12"},
        ],
    }  # fmt: skip
    found = generators.from_record(
        root,
        childdocument.parse(record),
        [ext("demo._C", "csrc/ops.cpp", "gen/k_a.cu", "gen/k_b.cu")],
    )
    [step] = found.steps
    assert step == CapturedStep(
        name="gen",
        run=("{python}", "{project}/tools/gen.py", "--out={out}", "--n", "2"),
        inputs=("tools/gen.py",),
        outputs=("k_a.cu", "k_b.cu"),
        found="setup.py:12 runs /usr/bin/python3 tools/gen.py --out=gen --n 2",
    )
    assert [s.path for s in found.extensions[0].sources] == [
        "csrc/ops.cpp",
        "{gen}/k_a.cu",
        "{gen}/k_b.cu",
    ]
    record["writes"] = ["demo/config.py", "gen/k_a.cu", "gen/k_b.cu"]
    assert generators.writes_said(
        childdocument.parse(record)
    ) == [  # a generator's hundreds of files said once
        "setup.py wrote demo/config.py (as it does under pip)",
        "tools/gen.py (run by setup.py) wrote 2 file(s) into gen/ (as it does under pip)",
    ]


def test_a_generator_setup_py_imports_and_calls_becomes_a_step_or_a_hand(tmp_path: Path) -> None:
    root = files(tmp_path, {"codegen/kernels.py": "", "out/k.cu": "", "csrc/ops.cpp": ""})
    entry = {"function": "main", "module": "kernels", "args": [str(root / "out"), "fast"]}
    record = {
        "setup": "setup.py",
        "written": [{"path": str(root / "out/k.cu"), "by": "codegen/kernels.py", "entry": entry}],
    }
    found = generators.from_record(
        root, childdocument.parse(record), [ext("demo._C", "csrc/ops.cpp", "out/k.cu")]
    )
    [step] = found.steps
    assert step.run[:2] == ("{python}", "-c") and "from kernels import main" in step.run[2]
    assert step.run[3:] == ("{project}/codegen", "{out}", "fast")
    # main(None): it writes where it lies; no argument names the folder to point elsewhere
    record["written"][0]["entry"] = {**entry, "args": [None]}  # type: ignore[index]
    left = generators.from_record(
        root, childdocument.parse(record), [ext("demo._C", "csrc/ops.cpp", "out/k.cu")]
    )
    assert left.steps == () and "cannot run it in its build folder" in left.hand[0]
    assert [s.path for s in left.extensions[0].sources] == ["csrc/ops.cpp", "out/k.cu"]


def test_a_script_with_an_output_option_that_writes_the_missing_sources_becomes_a_step(
    tmp_path: Path,
) -> None:
    root = files(
        tmp_path,
        {
            "generate_kernels.py": "import argparse\nif __name__ == '__main__':\n"
            "    p = argparse.ArgumentParser()\n    p.add_argument('-o', '--output_dir')\n",
            "gen_notes.py": "print('no options')\nif __name__ == '__main__': pass\n",
            "csrc/ops.cpp": "",
        },
    )
    assert generators.candidates(root) == [("generate_kernels.py", "--output_dir")]
    missing = ("instantiations/f_sm90.cu", "instantiations/f_sm80.cu", "csrc/lost.cu")
    sources = (
        CapturedSource(path="csrc/ops.cpp"),
        *(CapturedSource(path=m, archs=archs("9.0a")) for m in missing),
    )
    extension = CapturedExtension(
        name="demo._C", kind="CUDAExtension", where="setup.py", sources=sources
    )
    found = generators.from_trial(
        missing,
        [extension],
        script="generate_kernels.py",
        option="--output_dir",
        written=["f_sm90.cu", "f_sm80.cu", "other.cu"],
    )
    [step] = found.steps
    assert (step.name, step.outputs) == ("instantiations", ("f_sm90.cu", "f_sm80.cu"))
    assert step.run == ("{python}", "{project}/generate_kernels.py", "--output_dir", "{out}")
    assert found.missing == ("csrc/lost.cu",)  # still refused: nothing writes it
    assert found.extensions[0].sources[1] == CapturedSource(
        path="{instantiations}/f_sm90.cu", archs=archs("9.0a")
    )


def test_generated_sources_are_globbed_over_the_steps_outputs(tmp_path: Path) -> None:
    root = files(tmp_path, {"demo/__init__.py": "", "gen.py": "", "csrc/api.cpp": STABLE})
    step = CapturedStep(
        name="kernels",
        run=("{python}", "{project}/gen.py", "{out}"),
        inputs=("gen.py",),
        outputs=("f_a_sm90.cu", "f_b_sm90.cu", "f_c_sm80.cu"),
        found="test",
    )
    sm90 = archs("9.0a")
    build = build_of(
        root,
        CapturedExtension(
            name="demo._C",
            kind="CUDAExtension",
            where="setup.py",
            sources=(
                CapturedSource(path="csrc/api.cpp"),
                CapturedSource(path="{kernels}/f_a_sm90.cu", archs=sm90),
                CapturedSource(path="{kernels}/f_b_sm90.cu", archs=sm90),
                CapturedSource(path="{kernels}/f_c_sm80.cu", archs=archs("8.0")),
            ),
            archs=archs("8.0 9.0a"),
        ),
        steps=(step,),
    )
    data, _ = written(build)
    assert data["generate"] == [
        {
            "name": "kernels",
            "run": ["{python}", "{project}/gen.py", "{out}"],
            "inputs": ["gen.py"],
            "outputs": ["f_a_sm90.cu", "f_b_sm90.cu", "f_c_sm80.cu"],
        }
    ]
    assert data["extension"]["sources"] == [  # type: ignore[index]
        "csrc/api.cpp",
        {"files": "{kernels}/*_sm90.cu", "archs": "9.0a"},  # names exactly the two outputs
        {"files": "{kernels}/f_c_sm80.cu", "archs": "8.0"},
    ]
    matrix = load_matrix(root / "matrix.yaml")
    assert [s.name for s in matrix.generate] == ["kernels"]


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("instantiations", "instantiations"),
        ("csrc/Gen-Out", "gen_out"),
        ("2x", "gen_2x"),
        ("out", "gen_out"),
    ],
)
def test_a_steps_name_comes_from_its_folder(folder: str, name: str) -> None:
    assert generators.step_name(folder, ()) == name
    assert generators.step_name(folder, (name,)) == f"{name}2"


def test_a_pyinit_only_windows_compiles_makes_no_module_and_two_strings_name_the_leaf(
    tmp_path: Path,
) -> None:
    """torch_scatter 2.1.2: ``PyInit__scatter_cpu`` under ``#ifdef _WIN32`` only, and the
    package loads ``f"{library}_cpu"`` for each name of a list."""
    root = files(
        tmp_path,
        {
            "torch_scatter/__init__.py": textwrap.dedent("""\
                import importlib, os.path as osp
                import torch
                for library in ['_version', '_scatter']:
                    spec = importlib.machinery.PathFinder().find_spec(f'{library}_cpu', [osp.dirname(__file__)])
                    torch.ops.load_library(spec.origin)
                """),
            "csrc/scatter.cpp": textwrap.dedent("""\
                #include <torch/script.h>
                #ifdef _WIN32
                #ifdef WITH_PYTHON
                PyMODINIT_FUNC PyInit__scatter_cpu(void) { return NULL; }
                #endif
                #else
                static int linux_only = 1;
                #endif
                """),
        },
    )
    build = CapturedBuild(
        root=root,
        front_door="setup.py",
        extensions=(ext("torch_scatter._scatter_cpu", "csrc/scatter.cpp"),),
        packages=("torch_scatter",),
    )
    data, _ = written(build, torch=("2.13.0",))
    assert data["extension"]["kind"] == "library"  # type: ignore[index]
    assert "module-init" not in data["extension"]  # type: ignore[operator]
    assert matrixfile.linux_text("#if defined(_WIN32)\nA\n#elif X\nB\n#endif\nC") == "B\nC"


def test_no_cuda_anywhere_is_said_once_for_the_build_not_per_extension(tmp_path: Path) -> None:
    root = files(tmp_path, {"csrc/a.cpp": "", "csrc/b.cpp": "", "csrc/k.cu": ""})

    def record(*extensions: dict[str, object]) -> dict[str, object]:
        return {"setup_calls": [{"name": "demo"}], "extensions": list(extensions)}

    cpp = {"name": "demo._a", "kind": "CUDAExtension", "sources": ["csrc/a.cpp"]}
    cuda = {"name": "demo._k", "kind": "CUDAExtension", "sources": ["csrc/b.cpp", "csrc/k.cu"]}
    both = read_record(root, childdocument.parse(record(cpp, cuda)), front_door="setup.py")
    assert not any("no CUDA source" in h for h in both.hand)  # _a is C++ beside a CUDA one
    alone = read_record(root, childdocument.parse(record(cpp)), front_door="setup.py")
    assert [h for h in alone.hand if "no CUDA source" in h] == [
        "demo._a compile(s) no CUDA source, though the project has .cu files: its setup.py may choose "
        "CUDA by asking for a GPU (torch.cuda.is_available()); set the switch it reads (FORCE_CUDA=1, "
        "or --archs, which sets TORCH_CUDA_ARCH_LIST for it) and run init again"
    ]
