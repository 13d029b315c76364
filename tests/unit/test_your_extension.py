"""Issue 9 without a compiler: the matrix keys and checks that real extensions need, the PyInit
export rule, reading pyproject.toml, ninja failure output, and `wheelforge init`'s setup.py scan."""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.adoption import adopt as init
from wheelforge.adoption.doors.setuppy import scan_setup_py
from wheelforge.binaries import abicheck, initexport, verify
from wheelforge.build import diagnose, importcheck
from wheelforge.cli.app import main
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.settings import Flags, resolve
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.toolchain.toolkits import _dry_includes

from .conftest import GOOD_MATRIX
from .fakes import built_contents, make_wheel, plan_for

Project = Callable[..., Path]


def error_text(path: Path) -> str:
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    return "\n".join([*err.value.problems, err.value.message, err.value.details or ""])


# -- defect 1: the PyInit export rule ------------------------------------------------------------


def test_check_names_a_module_that_does_not_export_its_pyinit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = make_wheel(tmp_path, "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl", "hidden_init.so")
    [check] = abicheck.check_wheel(bad, torch=None, guards={})
    assert [(v.rule, v.symbol) for v in check.violations] == [("module-init", "PyInit__C")]
    assert main(["check", str(bad)]) == VerificationError.exit_code
    err = capsys.readouterr().err
    assert "pkg/_C.abi3.so does not define PyInit__C" in " ".join(err.split())
    assert check.path == f"{bad}!pkg/_C.abi3.so"


def test_an_unstable_abi_build_is_held_to_the_module_init_rule_in_the_one_pass(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = GOOD_MATRIX.replace('torch: ">=2.10"', "abi: unstable\ntorch: ['2.13.0']")
    plan = plan_for(load_matrix(project(matrix)), tmp_path)
    monkeypatch.setattr(verify, "verify_binaries", lambda _binaries, _plan: [])
    # pinned, as an unstable-ABI build's wheel is (issue 20's torch-pin rule judges that too)
    bad = make_wheel(tmp_path, "pkg-1.0-cp310-cp310-linux_x86_64.whl", "hidden_init.so",
                     requires="torch==2.13.*")  # fmt: skip
    with pytest.raises(VerificationError) as err:
        verify.verify_wheel(bad, plan)
    assert err.value.message.startswith(
        f"variant {plan.variant.id}: {bad.name}!pkg/_C.abi3.so does not define PyInit__C"
    )


def test_the_rule_reads_the_leaf_from_the_file_name() -> None:
    assert initexport.module_leaf("pkg/_C.abi3.so") == "_C"
    assert initexport.module_leaf("a/b/ops.cpython-312-x86_64-linux-gnu.so") == "ops"
    assert initexport.module_leaf("pkg/libhelper.so") is None  # may be a plain library


def test_the_link_exports_only_pyinit_and_sources_keep_default_visibility(
    project: Project, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    exports = next(g for g in plan.compile.generated if g.path.name == "exports.map")
    assert "global:\n    PyInit__C;\n  local:\n    *;" in exports.text
    assert f"-Wl,--version-script={exports.path}" in shlex.split(plan.links[0].ldflags)
    assert (
        "visibility"
        not in plan.compile.flag_sets[0].cxx
        + plan.compile.flag_sets[0].cc
        + plan.compile.flag_sets[0].nvcc
    )


# -- defects 2 and 3: Python and toolkit headers for C/C++ sources ------------------------------


def test_cpp_sources_see_python_and_the_variants_toolkit_headers(
    project: Project, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    cxx = shlex.split(plan.compile.flag_sets[0].cxx)
    assert f"-I{plan.torch.python_include}" in cxx
    for folder in plan.variant.toolkit.include_dirs:
        assert f"-I{folder}" in cxx


def test_toolkit_headers_come_from_nvccs_dry_run(tmp_path: Path) -> None:
    inc = tmp_path / "targets" / "x86_64-linux" / "include"
    (inc / "cccl").mkdir(parents=True)
    dry = f'#$ INCLUDES="-I{inc}"  \n#$ SYSTEM_INCLUDES="-isystem" "{inc}/cccl"  \n'
    assert _dry_includes(dry) == (inc.resolve(), (inc / "cccl").resolve())


# -- defect 4 and 5: ninja failures ---------------------------------------------------------------

NINJA_OUTPUT = (
    """\
[wheelforge 1/3] CXX /p/a.cpp
FAILED: /b/obj/a.cpp.o
c++ -c /p/a.cpp -o /b/obj/a.cpp.o
/p/a.cpp: In function 'int f()':
/p/a.cpp:3:5: error: 'first' was not declared in this scope
"""
    + "".join(f"/p/a.cpp:{i}:1: error: 'x{i}' was not declared in this scope\n" for i in range(200))
    + """\
[wheelforge 2/3] CXX /p/b.cpp
ninja: build stopped: subcommand failed.
"""
)


def test_the_first_errors_of_the_failing_command_are_shown() -> None:
    [failure] = diagnose.failures(NINJA_OUTPUT)
    assert failure.failed == "FAILED: /b/obj/a.cpp.o"
    shown = diagnose.first_errors(failure)
    assert shown.splitlines()[0] == "/p/a.cpp: In function 'int f()':"
    assert "'first' was not declared" in shown
    assert "CXX /p/b.cpp" not in shown
    assert shown.endswith("more lines in the build log)")


def test_a_duplicate_pyinit_gets_the_module_init_hint(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    text = "/usr/bin/ld: b.o: multiple definition of `PyInit__C'; a.o: first defined here"
    [hint] = diagnose.hints(text, plan)
    assert "set 'module-init: false'" in hint


# -- defect 6: matrix gaps --------------------------------------------------------------------


def test_a_flag_string_is_an_error_with_key_line_and_fix(project: Project) -> None:
    text = GOOD_MATRIX.replace(
        "  include-dirs: [csrc]\n", "  cxx-flags: -O3 -fvisibility=default\n"
    )
    message = error_text(project(text))
    assert "matrix.yaml:9: extension.cxx-flags must be a list of strings" in message
    assert "write [-O3, -fvisibility=default]" in message


def test_link_flags_libraries_and_library_dirs(project: Project, tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    text = GOOD_MATRIX.replace(
        "  include-dirs: [csrc]\n",
        '  libraries: [m, cublas]\n  library-dirs: [lib]\n  link-flags: ["-Wl,-z,now"]\n',
    )
    plan = plan_for(load_matrix(project(text)), tmp_path)
    ld = shlex.split(plan.links[0].ldflags)
    # the matrix's folders first, then the toolkit's library folder (cuBLAS lies there)
    assert ld[-5:] == [
        f"-L{(tmp_path / 'lib').resolve()}",
        "-L/opt/cuda-13.0.88/lib64",
        "-lm",
        "-lcublas",
        "-Wl,-z,now",
    ]


def test_the_wheel_ships_python_files_and_declared_data_only(
    project: Project, tmp_path: Path
) -> None:
    text = GOOD_MATRIX.replace(
        "  packages: [demo_ops]\n",
        "  packages: [demo_ops]\n  package-data: ['data/*.json', py.typed]\n  exclude: ['*_test.py']\n",
    )
    pkg = tmp_path / "demo_ops"
    for name in ("csrc/k.cu", "csrc/k.cpp", "data/t.json", "data/t.bin", "py.typed", "x_test.py",
                 "sub/mod.py"):  # fmt: skip
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text("x")
    plan = plan_for(load_matrix(project(text)), tmp_path)
    names = [arc for arc, _ in built_contents(plan).files]
    assert names == [
        "demo_ops/_C.abi3.so",
        "demo_ops/__init__.py",
        "demo_ops/data/t.json",
        "demo_ops/py.typed",
        "demo_ops/sub/mod.py",
    ]


@pytest.mark.parametrize("abi", ["cp32", "cp36", "cp39"])
def test_python_abi_older_than_torch_supports_is_a_warning(
    project: Project, abi: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any floor the limited API has is valid: pytorch/extension-cpp's stable example writes
    Py_LIMITED_API=0x03090000 (cp39). Below torch's own floor it is harmless, and warned of.
    (Issue 20: it was refused.)"""
    matrix = load_matrix(project(GOOD_MATRIX + f"python-abi: {abi}\n"))
    assert matrix.python_abi == abi
    assert matrix.limited_api_macro == f"0x030{int(abi[3:]):x}0000"
    err = capsys.readouterr().err
    assert f"python-abi '{abi}' is older than any Python torch runs on (3.10+)" in err
    assert f"tagged {abi}-abi3" in err


def test_python_abi_older_than_the_limited_api_is_refused(project: Project) -> None:
    message = error_text(project(GOOD_MATRIX + "python-abi: cp31\n"))
    assert "python-abi 'cp31' is older than the limited API (CPython 3.2, PEP 384)" in message


# -- defect 7: archs from the command line alone; the import-torch warning ---------------------


def test_arch_sets_may_come_from_archs_or_the_environment(project: Project) -> None:
    path = project(GOOD_MATRIX.split("arch-sets:")[0])
    assert str(resolve(Flags(matrix=path, archs="9.0"), env={}).matrix.arch_sets[0]) == "9.0"
    env = {"TORCH_CUDA_ARCH_LIST": "8.0"}
    assert str(resolve(Flags(matrix=path), env=env).matrix.arch_sets[0]) == "8.0"
    with pytest.raises(ConfigError, match="names no archs: add arch-sets"):
        resolve(Flags(matrix=path), env={})


def test_importing_the_extension_before_torch_is_warned(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    (tmp_path / "demo_ops" / "__init__.py").write_text("from . import _C\nimport torch\n")
    importcheck.warn_if_torch_not_imported_first(plan)
    assert "imports demo_ops._C before torch" in " ".join(capsys.readouterr().err.split())
    (tmp_path / "demo_ops" / "__init__.py").write_text("import torch\nfrom . import _C\n")
    importcheck.warn_if_torch_not_imported_first(plan)
    assert capsys.readouterr().err == ""


def test_a_top_level_extension_module_lands_at_the_wheel_root(
    project: Project, tmp_path: Path
) -> None:
    text = GOOD_MATRIX.replace("name: demo_ops._C", "name: demo_ops_cuda")
    plan = plan_for(load_matrix(project(text)), tmp_path)
    assert plan.links[0].wheel_path == "demo_ops_cuda.abi3.so"


# -- pyproject.toml [project] --------------------------------------------------------------------

PYPROJECT = """\
[project]
name = "demo-ops"
version = "1.2.0"
description = "from pyproject"
dependencies = ["numpy", "torch>=2.10"]
classifiers = ["Programming Language :: Python :: 3"]
"""


def test_pyproject_gives_the_metadata_a_matrix_leaves_out(project: Project, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    without_package = "extension:" + GOOD_MATRIX.split("extension:")[1]
    m = load_matrix(project(without_package))
    assert (m.package.name, m.package.version, m.package.summary) == (
        "demo-ops",
        "1.2.0",
        "from pyproject",
    )
    assert m.package.dependencies == ("numpy",)  # torch comes from the matrix
    assert ("Classifier", "Programming Language :: Python :: 3") in m.package.extra_metadata
    assert [p.name for p in m.package.packages] == ["demo_ops"]  # discovered


def test_a_conflict_with_pyproject_names_both_places(project: Project, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    message = error_text(project(GOOD_MATRIX.replace("version: 1.2.0", "version: 1.3.0")))
    assert "matrix.yaml:3: package.version '1.3.0' conflicts with version '1.2.0' in" in message
    assert "pyproject.toml [project]" in message


# -- wheelforge init ---------------------------------------------------------------------------

SETUP_PY = """\
import os
from pathlib import Path
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

this_dir = os.path.dirname(os.path.abspath(__file__))
cc_flag = []
cc_flag.append("-gencode")
if os.environ.get("USE_HIP"):
    nvcc = ["--offload-arch=gfx90a"]
else:
    nvcc = ["-O3", "--use_fast_math", "-gencode", "arch=compute_80,code=sm_80"]

def threads(args):
    return args + ["--threads", "4"]

setup(
    name="demo-ops",
    version=compute_version(),
    author="someone",
    ext_modules=[
        CUDAExtension(
            name="demo_ops._C",
            sources=["csrc/ops.cpp", os.path.join(this_dir, "csrc", "kernel.cu")],
            include_dirs=[Path(this_dir) / "csrc"],
            define_macros=[("WITH_CUDA", None)],
            extra_compile_args={"cxx": ["-O3"], "nvcc": threads(nvcc + cc_flag)},
            libraries=["cublas"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""


def test_init_reads_setup_py_without_running_it(project: Project, tmp_path: Path) -> None:
    project()
    (tmp_path / "setup.py").write_text(SETUP_PY)
    scan = scan_setup_py(tmp_path / "setup.py")
    [ext] = scan.extensions
    assert ext.name == "demo_ops._C"
    assert ext.sources == ["csrc/ops.cpp", "csrc/kernel.cu"]
    assert ext.include_dirs == ["csrc"]
    assert ext.cxx_flags == ["-DWITH_CUDA", "-O3"]
    assert ext.nvcc_flags == ["-DWITH_CUDA", "-O3", "--use_fast_math"]
    assert ext.libraries == ["cublas"]
    notes = "\n".join(scan.notes)
    # setup(author=...) is read now: matrix.yaml has package.authors (it used to be a note).
    assert scan.setup_args["author"] == "someone"
    for expected in ("setup(version=compute_version()) is computed",
                     "'cc_flag' is changed in place", "threads(...) at line", "nvcc arch flags"):  # fmt: skip
        assert expected in notes, notes
    (tmp_path / "matrix.yaml").unlink()
    request = init.InitRequest(
        root=tmp_path, torch=("2.13.0",), archs="9.0", run=False, python=Path(sys.executable)
    )
    result = init.init_project(request)
    m = load_matrix(result.path)
    assert (m.extension.name, m.abi, str(m.arch_sets[0])) == ("demo_ops._C", "unstable", "9.0")
    assert m.package.authors == ("someone",)
    with pytest.raises(ConfigError, match="exists; pass --force"):
        init.init_project(request)


def test_init_prints_what_needs_a_hand(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project()
    (tmp_path / "matrix.yaml").unlink()
    (tmp_path / "setup.py").write_text(SETUP_PY)
    assert main(["init", "--no-run", "--torch", "2.13.0", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "wrote" in err and re.search(r"\b\d+ things? needs? a hand:", err)
    # The last line is the next step: build what was written, from where the user is.
    last = " ".join(err.strip().splitlines()[-1:])
    assert last.startswith("next: see to the ") or last.startswith("next: wheelforge build")
    assert f"wheelforge build --matrix {tmp_path / 'matrix.yaml'}" in " ".join(err.split())
    assert "without running it (--no-run)" in " ".join(err.split())
    assert main(["init", "--no-run", str(tmp_path)]) == 2  # never overwrites without --force


@pytest.mark.parametrize(
    "message",
    [
        "op.cpp:3:20: error: ‘Widget’ in namespace ‘torch::stable’ does not name a type",
        "op.cpp:3:5: error: ‘Widget’ is not a member of ‘torch::stable’",
        'op.cu(3): error: namespace "torch::stable" has no member "Widget"',
    ],
)
def test_a_name_the_target_version_hides_gets_the_version_that_has_it(
    project: Project, tmp_path: Path, message: str
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)  # target 2.10
    header = plan.torch.include_dir / "torch" / "csrc" / "stable" / "widget.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(
        "#pragma once\nnamespace torch::stable {\n"
        "#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_13_0\nclass Widget {};\n#endif\n}\n"
    )
    [hint] = diagnose.hints(message, plan)
    assert hint.startswith("hint: Widget exists in torch 2.13 and newer")
    assert "target version 2.10" in hint


def test_a_top_level_module_imported_before_torch_by_a_package_is_warned(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """fast_rnnt's ``fast_rnnt/__init__.py`` starts with ``from _fast_rnnt import with_cuda``:
    its own CMake build put the build machine's torch/lib in the RUNPATH, so it loaded there;
    from a wheel, on the H200, ``import fast_rnnt`` failed with 'libc10.so: cannot open shared
    object file'."""
    text = GOOD_MATRIX.replace("name: demo_ops._C", "name: _demo_ops")
    plan = plan_for(load_matrix(project(text)), tmp_path)
    (tmp_path / "demo_ops" / "__init__.py").write_text("from _demo_ops import f\nimport torch\n")
    importcheck.warn_if_torch_not_imported_first(plan)
    err = " ".join(capsys.readouterr().err.split())
    assert "imports _demo_ops before torch: 'import demo_ops' will fail" in err
    (tmp_path / "demo_ops" / "__init__.py").write_text("import torch\nfrom _demo_ops import f\n")
    importcheck.warn_if_torch_not_imported_first(plan)
    assert capsys.readouterr().err == ""
