"""wheelforge init's front doors on real tools (issue 19): setup.py run in a child of the build
Python with its setup() and Extension classes recording (most with the stand-in torch, one with
the real one), CMake configured only, and a captured project built, as a user would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import needs_nvcc, only_wheel, wheelforge
from wheelforge.adoption.doors.setupcapture import CaptureContext, capture_setup
from wheelforge.configuration.archs import parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import EnvironmentProblem, ToolError


def archs(text: str) -> tuple[object, ...]:
    return parse_arch_list(text, source="test")


MEGABLOCKS_LIKE = """\
import os
from setuptools import find_packages, setup
import torch
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

version_globals = {}
with open(os.path.join("demo", "_version.py")) as f:
    exec(f.read(), version_globals)

nvcc_flags = ["--ptxas-options=-v", "--optimize=2"]
if os.environ.get("DEMO_CC"):
    cc = os.environ["DEMO_CC"]
    nvcc_flags.append(f"--generate-code=arch=compute_{cc},code=sm_{cc}")
sources = ["csrc/ops.cu"] + ([] if os.environ.get("DEMO_NO_EXTRA") else ["csrc/extra.cu"])
ext_modules = []
if "cu" in torch.__version__ and CUDA_HOME is not None:
    ext_modules = [CUDAExtension("demo_ops", sources, include_dirs=["csrc"],
                                 extra_compile_args={"cxx": ["-fopenmp"], "nvcc": nvcc_flags})]
setup(
    name="demo",
    version=version_globals["__version__"],
    author="A. Author",
    author_email="a@example.com",
    url="https://example.com/demo",
    classifiers=["Programming Language :: Python :: 3"],
    packages=find_packages(exclude=["tests*"]),
    package_data={"demo": ["py.typed"]},
    install_requires=["numpy", "torch>=2.7.0,<2.7.1"],
    ext_modules=ext_modules,
    cmdclass={"build_ext": BuildExtension},
)
"""


def demo_project(root: Path, setup_py: str = MEGABLOCKS_LIKE) -> Path:
    for name, text in {
        "setup.py": setup_py,
        "demo/__init__.py": "import torch\n",
        "demo/_version.py": "__version__ = '0.7.1'\n",
        "demo/py.typed": "",
        "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
        "csrc/extra.cu": "// extra\n",
        "tests/test_demo.py": "def test_it():\n    pass\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def context(**env: str) -> CaptureContext:
    return CaptureContext(
        python=Path(sys.executable),
        cuda_home=Path("/usr/local/cuda"),
        cuda_version="13.0",
        torch_version="2.13.0",
        env=tuple(env.items()),
        stand_in=True,
    )


def test_setup_py_runs_and_records_what_setup_and_the_extension_get(tmp_path: Path) -> None:
    build = capture_setup(demo_project(tmp_path), context(DEMO_CC="90"))
    [ext] = build.extensions
    assert (ext.name, ext.kind) == ("demo_ops", "CUDAExtension")
    assert [s.path for s in ext.sources] == ["csrc/ops.cu", "csrc/extra.cu"]
    assert ext.archs == archs("9.0")  # the --generate-code append, followed
    assert "--generate-code" not in " ".join(ext.nvcc_flags)
    assert ext.cxx_flags == ("-fopenmp",)
    assert "--expt-relaxed-constexpr" in ext.nvcc_flags  # torch's BuildExtension adds it
    meta = build.metadata
    assert (meta.version, meta.author, meta.url) == (
        "0.7.1",
        "A. Author",
        "https://example.com/demo",
    )
    assert meta.classifiers == ("Programming Language :: Python :: 3",)
    assert (meta.dependencies, meta.torch_requirement) == (("numpy",), "torch>=2.7.0,<2.7.1")
    assert (build.packages, build.package_data, build.tests) == (("demo",), ("py.typed",), "tests")


def test_the_users_environment_switches_choose_the_sources(tmp_path: Path) -> None:
    build = capture_setup(demo_project(tmp_path), context(DEMO_NO_EXTRA="1"))
    assert [s.path for s in build.extensions[0].sources] == ["csrc/ops.cu"]


FETCHING = """\
import os, subprocess, urllib.request
from pathlib import Path
from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import CppExtension

class Fetching(build_py):
    def run(self):
        urllib.request.urlretrieve("https://example.com/prebuilt.whl", "prebuilt.whl")

try:
    urllib.request.urlopen("https://example.com/toolkit.tar.xz", timeout=5)
except OSError:
    pass
subprocess.run(["git", "submodule", "update", "--init", "third_party/x"])
status = os.system("pip download somepackage")
version = subprocess.check_output(["uname", "-s"], text=True).strip()
try:
    Path(os.environ["OUTSIDE"]).write_text("x")
except PermissionError:
    pass
Path("generated.py").write_text("X = 1\\n")
setup(name="fetching", version="1.0", ext_modules=[CppExtension("fetching._C", ["op.cpp"])],
      cmdclass={"build_py": Fetching}, description=version + f" {status}")
"""


def test_downloads_and_commands_are_refused_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "setup.py").write_text(FETCHING)
    (root / "op.cpp").write_text("// op\n")
    outside = Path.home() / ".wheelforge-init-test-must-not-be-written"
    build = capture_setup(root, context(OUTSIDE=str(outside)))
    assert not outside.exists()
    tried = {(r.what, r.where): r.detail for r in build.refusals if r.attempted}
    assert "example.com:443" in tried[("network", "setup.py:12")]
    assert tried[("command", "setup.py:15")] == "git submodule update --init third_party/x"
    assert tried[("command", "setup.py:16")] == "pip download somepackage"
    assert tried[("write", "setup.py:19")] == str(outside)
    # a read-only query runs; os.system's refusal is exit status 1
    assert build.metadata.summary == "Linux 256"
    held = [r for r in build.refusals if not r.attempted]
    assert any("cmdclass build_py=Fetching fetches (urlretrieve" in r.detail for r in held)
    assert any("setup.py wrote generated.py" in d for d in build.done)


NINJA_REPLACED = """\
import torch.utils.cpp_extension as ce
from setuptools import setup
from torch.utils.cpp_extension import CUDAExtension

def _write_ninja_file(path, cflags, post_cflags, cuda_cflags, cuda_post_cflags, cuda_dlink_post_cflags,
                      sources, objects, ldflags, library_target, with_cuda, **kwargs):
    sm80 = [f if f != "arch=compute_90a,code=sm_90a" else "arch=compute_80,code=sm_80" for f in cuda_post_cflags]
    lines = ["ninja_required_version = 1.3", "nvcc = nvcc",
             "cuda_post_cflags = " + " ".join(cuda_post_cflags),
             "cuda_post_cflags_sm80 = " + " ".join(sm80), "",
             "rule cuda_compile", "  command = $nvcc -c $in -o $out $cuda_post_cflags",
             "rule cuda_compile_sm80", "  command = $nvcc -c $in -o $out $cuda_post_cflags_sm80", ""]
    for source, obj in zip(sources, objects):
        rule = "cuda_compile_sm80" if source.endswith("_sm80.cu") else "cuda_compile"
        lines.append(f"build {obj}: {rule} {source}")
    with open(path, "w") as f:
        f.write("\\n".join(lines) + "\\n")

ce._write_ninja_file = _write_ninja_file
setup(name="hopperish", version="3.0.0", ext_modules=[CUDAExtension(
    "hopperish._C", ["api.cpp", "k_sm90.cu", "k_sm80.cu"],
    extra_compile_args={"cxx": [], "nvcc": ["-gencode", "arch=compute_90a,code=sm_90a"]})])
"""


def test_a_replaced_ninja_writer_gives_each_source_its_archs(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(NINJA_REPLACED)
    for name in ("api.cpp", "k_sm90.cu", "k_sm80.cu"):
        (tmp_path / name).write_text("// x\n")
    [ext] = capture_setup(tmp_path, context()).extensions
    assert ext.archs == archs("8.0 9.0a")
    assert {s.path: s.archs for s in ext.sources} == {
        "api.cpp": None,
        "k_sm90.cu": archs("9.0a"),
        "k_sm80.cu": archs("8.0"),
    }


def test_a_failing_setup_py_names_its_line_and_how_to_fix_it(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "import torch\ncc = torch.cuda.get_device_capability()\nfrom setuptools import setup\nsetup()\n"
    )
    with pytest.raises(ToolError) as err:
        capture_setup(tmp_path, context())
    assert "setup.py failed at line 2: RuntimeError" in err.value.message
    assert "give them with --archs" in err.value.message


def test_the_stand_in_torch_says_which_name_it_lacks(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import _no_such_helper\nsetup()\n"
    )
    with pytest.raises(EnvironmentProblem) as err:
        capture_setup(tmp_path, context())
    # One line naming setup.py's line and the name; the stand-in's lookup is no traceback of
    # the project's.
    assert err.value.message.startswith(
        f"{tmp_path / 'setup.py'} line 2 asks for torch.utils.cpp_extension._no_such_helper, "
        "which wheelforge init's stand-in torch lacks"
    )
    assert err.value.details is None and err.value.exit_code == 5


# -- the real torch, the command line, and a build of what init wrote -------------------------------

STABLE_OP = """\
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

static torch::stable::Tensor twice(torch::stable::Tensor x) { return torch::stable::empty_like(x); }

STABLE_TORCH_LIBRARY(twiceops, m) { m.def("twice(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(twiceops, CPU, m) { m.impl("twice", TORCH_BOX(&twice)); }
"""

STABLE_SETUP = """\
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

flags = ["-O2", "-DTORCH_TARGET_VERSION=0x020a000000000000"]
if os.environ.get("TWICE_FAST") == "1":
    flags.append("-DTWICE_FAST")
setup(
    name="twiceops", version="0.2.0", author="Some One", url="https://example.org/twice",
    packages=["twiceops"],
    ext_modules=[CppExtension("twiceops._C", ["twiceops/csrc/op.cpp"], extra_compile_args={"cxx": flags},
                              py_limited_api=True)],
    cmdclass={"build_ext": BuildExtension},
)
"""


@needs_nvcc
def test_init_with_the_real_torch_then_build_and_check_with_no_edit(tmp_path: Path) -> None:
    (tmp_path / "twiceops" / "csrc").mkdir(parents=True)
    (tmp_path / "twiceops" / "__init__.py").write_text("import torch\nfrom . import _C\n")
    (tmp_path / "twiceops" / "csrc" / "op.cpp").write_text(STABLE_OP)
    (tmp_path / "setup.py").write_text(STABLE_SETUP)
    run = wheelforge("init", "--archs", "9.0", cwd=tmp_path, env={"TWICE_FAST": "1"})
    assert run.code == 0, run.err
    err = " ".join(run.err.split())
    assert "this runs the project's own code" in err and "nothing needs a hand" in err
    written = yaml.safe_load((tmp_path / "matrix.yaml").read_text())
    assert sorted(written["extension"]["cxx-flags"]) == [
        "-DTWICE_FAST",
        "-O2",
    ]  # the switch honoured
    assert (written["abi"], written["torch"]) == ("stable", ">=2.10")
    assert (tmp_path / "matrix.yaml").read_text().endswith("\n")
    build = wheelforge("build", cwd=tmp_path)
    assert build.code == 0, build.err
    wheel = only_wheel(tmp_path / "dist")
    assert wheelforge("check", wheel, cwd=tmp_path).code == 0
    with zipfile.ZipFile(wheel) as zf:
        metadata = zf.read("twiceops-0.2.0.dist-info/METADATA").decode()
    assert (
        "Author: Some One" in metadata
        and "Home-page: https://example.org/twice"
        in metadata  # setup(url=), as setuptools writes it
    )


CMAKE_PROJECT = """\
cmake_minimum_required(VERSION 3.18)
project(cmk LANGUAGES CXX CUDA)
set(CMAKE_CXX_STANDARD 14)
add_library(core STATIC core/core.cu)
target_compile_definitions(core PRIVATE CORE_FAST)
add_library(_cmk MODULE python/module.cpp)
target_link_libraries(_cmk PRIVATE core)
set_target_properties(_cmk PROPERTIES PREFIX "")
set_property(TARGET core PROPERTY CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
target_compile_options(core PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
"""


def _cmake_project(root: Path, more_cmake: str = "") -> None:
    """CMAKE_PROJECT (and *more_cmake* after it) with its sources and package in *root*."""
    for name, text in {
        "CMakeLists.txt": CMAKE_PROJECT + more_cmake,
        "core/core.cu": "__global__ void k() {}\n",
        "python/module.cpp": "// module\n",
        "cmk/__init__.py": "from . import _cmk\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("cmake") is None, reason="needs nvcc and cmake"
)
def test_cmake_is_configured_only_and_its_compile_commands_read(tmp_path: Path) -> None:
    _cmake_project(tmp_path)
    run = wheelforge("init", "--torch", "2.13.0", cwd=tmp_path)
    assert run.code == 0, run.err
    assert "configure only" in run.err
    assert not (tmp_path / "build").exists()  # configured in a folder wheelforge owns, then gone
    written = yaml.safe_load((tmp_path / "matrix.yaml").read_text())
    ext = written["extension"]
    assert ext["name"] == "cmk._cmk"  # where the package imports it from
    assert sorted(str(s) for s in ext["sources"]) == ["core/core.cu", "python/module.cpp"]
    assert written["arch-sets"] == {"default": "8.0 9.0+PTX"}
    assert "--expt-relaxed-constexpr" in ext["nvcc-flags"]
    assert not any("std=c++14" in f for f in ext.get("cxx-flags", []))
    assert load_matrix(tmp_path / "matrix.yaml").extension.name == "cmk._cmk"


@pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("cmake") is None, reason="needs nvcc and cmake"
)
def test_the_toolkits_headers_stay_out_when_cmake_arg_names_the_toolkit(tmp_path: Path) -> None:
    """vLLM is configured with -DCUDA_TOOLKIT_ROOT_DIR and adds the toolkit's include folders to
    its targets: init wrote ../../../../../usr/local/cuda-13.0/include into matrix.yaml, which
    ties every variant to CUDA 13.0's headers (another release's nvcc refuses them)."""
    nvcc = Path(shutil.which("nvcc") or "").resolve()
    toolkit = nvcc.parent.parent
    _cmake_project(
        tmp_path,
        "find_package(CUDAToolkit REQUIRED)\n"
        "target_include_directories(core PRIVATE ${CUDAToolkit_INCLUDE_DIRS})\n"
        "target_include_directories(_cmk PRIVATE ${CUDAToolkit_INCLUDE_DIRS})\n",
    )
    run = wheelforge(
        "init", "--torch", "2.13.0", f"--cmake-arg=-DCUDAToolkit_ROOT={toolkit}", cwd=tmp_path
    )
    assert run.code == 0, run.err
    ext = yaml.safe_load((tmp_path / "matrix.yaml").read_text())["extension"]
    assert not any("include" in d for d in ext.get("include-dirs", [])), ext.get("include-dirs")


def test_cmakes_downloads_are_refused_with_the_flag_that_replaces_them(tmp_path: Path) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(dl LANGUAGES CXX)\ninclude(FetchContent)\n"
        "FetchContent_Declare(zlibby URL https://example.com/zlibby.tar.gz)\n"
        "FetchContent_MakeAvailable(zlibby)\n"
    )
    run = wheelforge("init", "--from", "cmake", cwd=tmp_path)
    assert run.code == ToolError.exit_code, run.err
    assert "-DFETCHCONTENT_SOURCE_DIR_ZLIBBY=<folder>" in " ".join(run.err.split())
    assert not (tmp_path / "matrix.yaml").exists()


def test_a_download_message_for_a_dependency_given_a_folder_is_not_reported(tmp_path: Path) -> None:
    # fast_rnnt's cmake/pybind11.cmake: message("Downloading pybind11") before a populate that
    # takes the folder given with -DFETCHCONTENT_SOURCE_DIR_PYBIND11
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    project, dep = tmp_path / "proj", tmp_path / "dep"
    for name, text in {
        "proj/CMakeLists.txt": "cmake_minimum_required(VERSION 3.18)\nproject(dl LANGUAGES CXX)\n"
        "include(FetchContent)\nFetchContent_Declare(dep URL https://example.com/dep.tar.gz)\n"
        "FetchContent_GetProperties(dep)\nif(NOT dep_POPULATED)\n"
        '  message(STATUS "Downloading dep")\n  FetchContent_Populate(dep)\nendif()\n'
        'add_library(_dl MODULE m.cpp)\nset_target_properties(_dl PROPERTIES PREFIX "")\n',
        "proj/m.cpp": "// module\n",
        "proj/dl/__init__.py": "from . import _dl\n",
        "dep/README": "the dependency's sources\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    run = wheelforge(
        "init", "--from", "cmake", "--torch", "2.13.0", f"--cmake-arg=-DFETCHCONTENT_SOURCE_DIR_DEP={dep}",
        cwd=project,
    )  # fmt: skip
    assert run.code == 0, run.err
    assert "Downloading dep" not in run.out + run.err
    assert yaml.safe_load((project / "matrix.yaml").read_text())["extension"]["name"] == "dl._dl"


# -- several shared objects, a header library and a generator, captured then built ----------------

TRIO_SETUP = """\
import subprocess, sys
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

subprocess.run([sys.executable, "tools/gen_answer.py", "--out-dir", "gen"], check=True)
flags = ["-O2", "-DTORCH_TARGET_VERSION=0x020a000000000000"]
setup(
    name="trio", version="0.3.0", packages=["trio"],
    ext_modules=[
        CppExtension("trio._C", ["trio/csrc/op.cpp"], include_dirs=["third_party/cutlass/include"],
                     extra_compile_args={"cxx": flags}, py_limited_api=True),
        CppExtension("trio._ops", ["trio/csrc/lib.cpp", "gen/answer.cpp"],
                     extra_compile_args={"cxx": [*flags, "-DTRIO_LIB"]}, py_limited_api=True),
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""

TRIO = {
    "setup.py": TRIO_SETUP,
    "tools/gen_answer.py": """\
import argparse, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--out-dir", default="gen")
out = pathlib.Path(parser.parse_args().out_dir)
out.mkdir(parents=True, exist_ok=True)
(out / "answer.cpp").write_text("int trio_answer() { return 42; }\\n")
""",
    "trio/__init__.py": """\
import glob, os
import torch
from . import _C
for _lib in glob.glob(os.path.join(os.path.dirname(__file__), "_ops*.so")):
    torch.ops.load_library(_lib)
""",
    "trio/csrc/op.cpp": '#include "cutlass/cutlass.h"\n' + STABLE_OP.replace("twiceops", "trio"),
    "trio/csrc/lib.cpp": STABLE_OP.replace("twiceops", "trio_ops")
    + "int trio_answer();\nstatic int answer = trio_answer();\n",
    "third_party/cutlass/include/cutlass/cutlass.h": "#pragma once\n#define TRIO_HEADERS 1\n",
    "third_party/cutlass/include/cutlass/version.h": (
        "#define CUTLASS_MAJOR 3\n#define CUTLASS_MINOR 9\n#define CUTLASS_PATCH 2\n"
    ),
}


@needs_nvcc
def test_two_shared_objects_a_vendored_cutlass_and_a_generator_init_then_build(
    tmp_path: Path,
) -> None:
    for name, text in TRIO.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    run = wheelforge("init", "--archs", "9.0", cwd=tmp_path)
    assert run.code == 0, run.err
    assert "nothing needs a hand" in " ".join(run.err.split())
    written = yaml.safe_load((tmp_path / "matrix.yaml").read_text())
    assert "extension" not in written
    module, library = written["extensions"]
    assert (module["name"], library["name"], library["kind"]) == ("trio._C", "trio._ops", "library")
    assert library["sources"] == ["trio/csrc/lib.cpp", "{gen}/answer.cpp"]
    assert "-DTRIO_LIB" in library["cxx-flags"] and "-DTRIO_LIB" not in module["cxx-flags"]
    assert written["header-libraries"] == [
        {"name": "cutlass", "path": "third_party/cutlass", "version": "3.9.2"}
    ]
    assert written["generate"] == [
        {
            "name": "gen",
            "run": ["{python}", "{project}/tools/gen_answer.py", "--out-dir", "{out}"],
            "inputs": ["tools/gen_answer.py"],
            "outputs": ["answer.cpp"],
        }
    ]
    shutil.rmtree(tmp_path / "gen")  # what setup.py's run wrote: the build makes its own
    build = wheelforge("build", cwd=tmp_path)
    assert build.code == 0, build.err
    out = " ".join((build.out + build.err).split())
    assert "GENERATE gen" in out and "2 shared objects:" in out
    assert "torch.ops.load_library('trio/_ops.so') ok" in out
    wheel = only_wheel(tmp_path / "dist")
    assert wheelforge("check", wheel, cwd=tmp_path).code == 0
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        sbom = json.loads(zf.read(next(n for n in names if n.endswith("wheelforge.cdx.json"))))
    assert {"trio/_C.abi3.so", "trio/_ops.so"} <= set(names)
    [cutlass] = [c for c in sbom["components"] if c["name"] == "cutlass"]
    assert cutlass["version"] == "3.9.2"


EXLLAMA_LIKE = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="exlike",
    version="0.2.8",
    packages=["exlike", "exlike.generator"],
    include_package_data=True,
    package_data={"": ["py.typed"]},
    ext_modules=[CUDAExtension("exlike_ext", ["exlike/ext/ext_bindings.cpp", "exlike/ext/q.cu"])],
    cmdclass={"build_ext": BuildExtension},
)
"""


def exllama_like(root: Path) -> Path:
    """exllamav2's shape: two listed packages, data in folders that are no package (hadamard/,
    the extension's sources), found by MANIFEST.in's recursive-include with
    include_package_data, and the manifest's excludes."""
    files = {
        "setup.py": EXLLAMA_LIKE,
        "MANIFEST.in": "recursive-include exlike *\nglobal-include *.typed\n"
        "global-exclude *.pyc\nglobal-exclude dni_*\n",
        "exlike/__init__.py": "",
        "exlike/py.typed": "",
        "exlike/generator/__init__.py": "",
        "exlike/generator/dni_scratch.txt": "left out by global-exclude dni_*",
        "exlike/hadamard/hadamard.py": "",
        "exlike/hadamard/hadamard_1.txt": "1",
        "exlike/hadamard/hadamard_100.txt": "100",
        "exlike/ext/ext_bindings.cpp": "// bindings\n",
        "exlike/ext/q.cu": "// kernel\n",
        "exlike/ext/dni_notes.md": "left out",
        "notes/outside.txt": "in no package",
        "LICENSE": "MIT\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


SETUPTOOLS_BUILD_PY = """\
import sys, types
from setuptools import Extension
from setuptools.command.build_ext import build_ext
cpp = types.ModuleType("torch.utils.cpp_extension")
cpp.CUDAExtension, cpp.BuildExtension = Extension, build_ext
sys.modules.update({"torch": types.ModuleType("torch"), "torch.utils": types.ModuleType("u"),
                    "torch.utils.cpp_extension": cpp})
sys.argv = ["setup.py", "-q", "build_py", "--build-lib", sys.argv[1]]
exec(compile(open("setup.py").read(), "setup.py", "exec"))
"""


def test_package_data_is_what_setuptools_ships_with_manifest_in(tmp_path: Path) -> None:
    """Issue 32: exllamav2's hadamard/*.txt (MANIFEST.in + include_package_data) were missing
    from the wheel. init asks setuptools' own build_py which data files it ships, and the
    packer ships exactly those: the member list equals setuptools' own wheel's."""
    from wheelforge.planning import selection

    root = exllama_like(tmp_path / "exlike")
    build = capture_setup(root, context())
    assert build.packages == ("exlike",)
    assert set(build.package_data) == {"py.typed", "ext/ext_bindings.cpp", "ext/q.cu", "hadamard/*"}
    found = selection.package_members(
        root / "exlike", data=build.package_data, exclude=(), project=root
    )
    members = {member.path for member in found}
    # What setuptools itself copies into the wheel's tree (build_py: the modules and package
    # data; the extension aside), with torch's classes standing in as setuptools' own.
    made = subprocess.run([sys.executable, "-c", SETUPTOOLS_BUILD_PY, str(tmp_path / "lib")],
                          cwd=root, capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, made.stderr
    theirs = {
        p.relative_to(tmp_path / "lib").as_posix()
        for p in (tmp_path / "lib").rglob("*")
        if p.is_file()
    }
    assert members == theirs


def _pip_download(name: str, dest: Path, *binary: str) -> Path:
    args = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
            *binary, name, "-d", str(dest)]  # fmt: skip
    made = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    (found,) = [p for p in dest.iterdir() if p.suffix in (".whl", ".gz")]
    return found


@pytest.mark.network
def test_a_pypi_projects_package_data_and_licenses_match_its_setuptools_wheel(
    tmp_path: Path,
) -> None:
    """certifi 2025.8.3 on PyPI: its sdist (setup.py with package_data, include_package_data and
    MANIFEST.in) and the wheel setuptools made of it. What init captures and the packer ships
    (the package's members, and LICENSE under .dist-info/licenses/ by setuptools' default
    globs) is setuptools' member list."""
    import tarfile

    from wheelforge.configuration.matrix.pyproject import default_license_files
    from wheelforge.planning import selection

    sdist = _pip_download("certifi==2025.8.3", tmp_path / "sdist", "--no-binary", ":all:")
    theirs = _pip_download("certifi==2025.8.3", tmp_path / "wheel", "--only-binary", ":all:")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (root,) = (tmp_path / "src").iterdir()
    build = capture_setup(root, context())
    ours = {m.path for folder in build.packages
            for m in selection.package_members(root / folder, data=build.package_data, exclude=(), project=root)}  # fmt: skip
    licenses = {
        f"certifi-2025.8.3.dist-info/licenses/{p.name}" for p in default_license_files(root)
    }
    with zipfile.ZipFile(theirs) as zf:
        names = set(zf.namelist())
    assert ours == {n for n in names if ".dist-info/" not in n}
    assert licenses == {n for n in names if ".dist-info/licenses/" in n} == {
        "certifi-2025.8.3.dist-info/licenses/LICENSE"}  # fmt: skip


TAMPERING = """\
import gc
from setuptools import setup
setup(name="tampering", version="1.0")
for d in gc.get_objects():
    if isinstance(d, dict) and "setup_calls" in d and "refused" in d:
        d["network"] = [{"where": "setup.py:7"}]
"""


def test_a_setup_py_that_breaks_the_childs_record_is_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    """The child's record is parsed once (adoption/record/childdocument.py): a setup.py that reaches
    into it (before: KeyError: 'detail', a traceback from buildsteps.py) is exit code 3, one
    line naming the field and setup.py, and nothing written."""
    (tmp_path / "setup.py").write_text(TAMPERING)
    run = wheelforge("init", cwd=tmp_path)
    assert run.code == 3, run.err
    said = " ".join(run.err.split())
    assert f"{tmp_path / 'setup.py'} (its run's record): network[0].detail is None" in said
    assert "Traceback" not in run.err and not (tmp_path / "matrix.yaml").exists()
