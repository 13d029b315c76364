"""wheelforge init's front doors (issue 19) without a process: the flags sorted into archs and
what stays, the one writer, kernel-builder's build.toml, CMake's compile commands read. The
setup.py capture (a child process) and CMake's configure are in
tests/integration/test_init_front_doors.py."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from wheelforge.adoption import adopt as init
from wheelforge.adoption.child import capture_packagedata
from wheelforge.adoption.doors import buildtoml, cmake, packagedata
from wheelforge.adoption.doors.buildsteps import BuildSteps
from wheelforge.adoption.doors.flags import sort_flags
from wheelforge.adoption.record import childdocument
from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
    ProjectMetadata,
)
from wheelforge.adoption.writer.matrixfile import InitChoices, render
from wheelforge.configuration.archs import parse_arch_list
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging.wheel import core_metadata


def archs(text: str) -> tuple[object, ...]:
    return parse_arch_list(text, source="test")


# -- flags ----------------------------------------------------------------------------------------


def test_arch_flags_become_archs_in_every_spelling_nvcc_takes() -> None:
    flags = [
        "-O3",
        "-gencode", "arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "--generate-code=arch=compute_100,code=[compute_100,sm_100]",
        "--use_fast_math",
    ]  # fmt: skip
    sorted_ = sort_flags(flags)
    assert sorted_.archs == archs("8.0 9.0a 10.0+PTX")
    assert sorted_.kept == ("-O3", "--use_fast_math")
    assert sort_flags(["-arch=sm_86"]).archs == archs("8.6+PTX")  # nvcc: SASS and PTX
    assert sort_flags(["-arch=compute_80", "-code=sm_80,sm_86"]).archs == archs("8.0 8.6")
    only_ptx = sort_flags(["-gencode", "arch=compute_90,code=compute_90"])
    assert (only_ptx.archs, only_ptx.ptx_only) == (archs("9.0+PTX"), ("compute_90",))


def test_flags_wheelforge_sets_are_left_out_and_named() -> None:
    sorted_ = sort_flags([
        "--threads", "4", "-DTORCH_TARGET_VERSION=0x0209000000000000", "-DPy_LIMITED_API=0x03090000",
        "-std=c++14", "-Xcompiler=-fvisibility=hidden", "-DUSE_DISTRIBUTED", "-DKEEP=1", "-std=c++20",
    ])  # fmt: skip
    # torch's own CMake target's macros (-DUSE_DISTRIBUTED) are what the project compiles with
    assert sorted_.kept == ("-DUSE_DISTRIBUTED", "-DKEEP=1", "-std=c++20")
    assert (sorted_.torch_target, sorted_.limited_api) == ("2.9", "3.9")
    assert sorted_.owned[0] == "--threads 4 (nvcc's threads)"
    assert any("-std=c++14 (C++17 at least" in o for o in sorted_.owned)


def test_an_arch_that_depends_on_the_machine_is_a_choice() -> None:
    assert sort_flags(["-arch=native"]).problems == ("-arch=native",)
    assert sort_flags(["-arch=native"]).archs == ()


# -- the writer -----------------------------------------------------------------------------------


def captured(root: Path, **ext: object) -> CapturedBuild:
    """A build as the setup.py door gives it (MegaBlocks' shape), without running anything."""
    for name, text in {
        "demo/__init__.py": "import torch\n",
        "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
        "tests/test_demo.py": "def test_it():\n    pass\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    extension = CapturedExtension(
        name="demo_ops", kind="CUDAExtension", where="setup.py:30",
        sources=(CapturedSource(path="csrc/ops.cu"),), include_dirs=("csrc",),
        cxx_flags=("-fopenmp",), nvcc_flags=("--optimize=2",), archs=archs("9.0"),
    )  # fmt: skip
    return CapturedBuild(
        root=root, front_door="setup.py", extensions=(dataclasses.replace(extension, **ext),),
        metadata=ProjectMetadata(
            name="demo", version="0.7.1", author="A. Author", author_email="a@example.com",
            url="https://example.com/demo", classifiers=("Programming Language :: Python :: 3",),
            dependencies=("numpy",), torch_requirement="torch>=2.7.0,<2.7.1",
        ),
        packages=("demo",), tests="tests",
    )  # fmt: skip


def test_init_writes_the_build_pythons_torch_tests_and_a_final_newline(tmp_path: Path) -> None:
    result = render(captured(tmp_path), InitChoices(build_torch="2.13.0"))
    assert result.text.endswith("\n") and not result.text.endswith("\n\n")
    written = yaml.safe_load(result.text)
    assert written["torch"] == ["2.13.0"]
    assert written["tests"]["path"] == "tests"
    assert written["extension"]["module-init"] is False  # PYBIND11_MODULE in the sources
    assert written["arch-sets"] == {"default": "9.0"}
    assert any("asks for 'torch>=2.7.0,<2.7.1'" in h for h in result.hand)
    (tmp_path / "matrix.yaml").write_text(result.text)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert matrix.package.authors == ("A. Author", "a@example.com")
    assert matrix.package.home_page == "https://example.com/demo"
    metadata = core_metadata(
        matrix.package, matrix.requires_python, version="0.7.1", torch_requirement="torch==2.13.*"
    )
    # As setuptools writes setup(author=, author_email=, url=): apart, and url as Home-page.
    assert "Author: A. Author\nAuthor-email: a@example.com\n" in metadata
    assert "Home-page: https://example.com/demo" in metadata
    assert "Classifier: Programming Language :: Python :: 3" in metadata


def test_archs_come_from_archs_then_the_project_then_torch_cuda_arch_list(tmp_path: Path) -> None:
    build = captured(tmp_path)

    def arch_set(choices: InitChoices, b: CapturedBuild = build) -> object:
        return yaml.safe_load(render(b, choices).text).get("arch-sets")

    assert arch_set(InitChoices(torch=("2.13.0",), archs="8.0")) == {"default": "8.0"}
    assert arch_set(InitChoices(torch=("2.13.0",), env_archs="7.5")) == {"default": "9.0"}
    bare = dataclasses.replace(
        build, extensions=(dataclasses.replace(build.extensions[0], archs=()),)
    )
    assert arch_set(InitChoices(torch=("2.13.0",), env_archs="7.5"), bare) == {"default": "7.5"}
    assert arch_set(InitChoices(torch=("2.13.0",)), bare) is None  # a comment says how


def test_the_projects_source_list_stays_a_list(tmp_path: Path) -> None:
    """Issue 40: a glob naming exactly the listed files today takes in a file added tomorrow,
    which the project's own build leaves out."""
    build = captured(tmp_path)

    def sources(b: CapturedBuild) -> object:
        return yaml.safe_load(render(b, InitChoices(torch=("2.13.0",))).text)["extension"][
            "sources"
        ]

    assert sources(build) == ["csrc/ops.cu"]
    for name in ("k_sm90.cu", "l_sm90.cu", "m.cu"):
        (tmp_path / "csrc" / name).write_text("// k\n")
    hopper = archs("9.0a")
    ext = dataclasses.replace(build.extensions[0], sources=(
        CapturedSource(path="csrc/ops.cu"), CapturedSource(path="csrc/m.cu"),
        CapturedSource(path="csrc/k_sm90.cu", archs=hopper), CapturedSource(path="csrc/l_sm90.cu", archs=hopper),
    ))  # fmt: skip
    assert sources(dataclasses.replace(build, extensions=(ext,))) == [
        "csrc/ops.cu", "csrc/m.cu",
        {"files": "csrc/k_sm90.cu", "archs": "9.0a"}, {"files": "csrc/l_sm90.cu", "archs": "9.0a"},
    ]  # fmt: skip


def test_a_stable_abi_target_in_the_flags_becomes_the_torch_floor(tmp_path: Path) -> None:
    build = captured(tmp_path, torch_target="2.9", limited_api="3.9")
    (tmp_path / "csrc" / "ops.cu").write_text("#include <torch/csrc/stable/library.h>\n")
    result = render(build, InitChoices())
    written = yaml.safe_load(result.text)
    assert (written["abi"], written["torch"]) == ("stable", ">=2.9")
    assert written["extension"]["module-init"] is True
    assert "python-abi" not in written  # Py_LIMITED_API 3.9 is older than torch's CPython
    # the project's own Py_LIMITED_API is kept per extension; the tag stays cp310-abi3
    assert written["extension"]["limited-api"] == "3.9"
    assert any("limited-api: 3.9 (the project's Py_LIMITED_API)" in d for d in result.done)


def two_extensions(root: Path, **second: object) -> CapturedBuild:
    """Two stable extensions of one setup.py (issue 32): the second differs by *second*."""
    build = captured(root, torch_target="2.10", limited_api="3.10")
    (root / "csrc" / "ops.cu").write_text("#include <torch/csrc/stable/library.h>\n")
    (root / "csrc" / "hopper.cu").write_text("#include <torch/csrc/stable/library.h>\n")
    other = dataclasses.replace(
        build.extensions[0],
        name="demo_hopper",
        sources=(CapturedSource(path="csrc/hopper.cu"),),
        **second,
    )
    return dataclasses.replace(build, extensions=(build.extensions[0], other))


def test_extensions_whose_flags_name_different_archs_keep_them_each(tmp_path: Path) -> None:
    build = two_extensions(tmp_path, archs=archs("9.0a+PTX"))
    result = render(build, InitChoices())
    written = yaml.safe_load(result.text)
    assert [e.get("archs") for e in written["extensions"]] == ["9.0", "9.0a+PTX"]
    assert written["arch-sets"] == {"default": "9.0 9.0a+PTX"}
    assert any("each keeps its own (extensions[].archs)" in d for d in result.done)
    (tmp_path / "demo" / "__init__.py").write_text("import torch\n")
    (tmp_path / "matrix.yaml").write_text(result.text)
    matrix = load_matrix(tmp_path / "matrix.yaml")  # what init wrote, read back
    assert [str(e.archs[0]) for e in matrix.extensions if e.archs] == ["9.0", "9.0a+PTX"]
    # --archs replaces the project's archs for every extension: none keeps its own
    chosen = yaml.safe_load(render(build, InitChoices(archs="8.0 9.0")).text)
    assert [e.get("archs") for e in chosen["extensions"]] == [None, None]
    # the same archs for both: the arch set alone says them
    same = yaml.safe_load(render(two_extensions(tmp_path), InitChoices()).text)
    assert [e.get("archs") for e in same["extensions"]] == [None, None]


def test_extensions_whose_flags_name_different_targets_keep_them_each(tmp_path: Path) -> None:
    """extensions[].torch-target (issue 32): each extension keeps the -DTORCH_TARGET_VERSION its
    flags name; torch is the range from the oldest; the wheel requires the newest. Py_LIMITED_API
    is one per wheel (its abi3 tag): the newest is the floor of all."""
    build = two_extensions(tmp_path, torch_target="2.11", limited_api="3.12")
    result = render(build, InitChoices())
    written = yaml.safe_load(result.text)
    assert [e.get("torch-target") for e in written["extensions"]] == ["2.10", "2.11"]
    assert (written["torch"], written["python-abi"]) == (">=2.10", "cp312")
    said = " ".join(result.done)
    assert (
        "the extensions name different -DTORCH_TARGET_VERSION (demo_ops: 2.10, demo_hopper: 2.11)"
        ": each keeps its own (extensions[].torch-target)" in said
    )
    assert "the wheel requires torch>=2.11" in said
    assert "different Py_LIMITED_API (demo_ops: 3.10, demo_hopper: 3.12)" in said
    (tmp_path / "demo" / "__init__.py").write_text("import torch\n")
    (tmp_path / "matrix.yaml").write_text(result.text)
    matrix = load_matrix(tmp_path / "matrix.yaml")  # what init wrote, read back
    assert [e.torch_target for e in matrix.extensions] == [(2, 10), (2, 11)]
    assert matrix.torch.requirement == "torch>=2.11"
    # --torch replaces the project's targets for every extension: none keeps its own
    chosen = yaml.safe_load(render(build, InitChoices(torch=(">=2.12",))).text)
    assert [e.get("torch-target") for e in chosen["extensions"]] == [None, None]
    assert chosen["torch"] == ">=2.12"
    # the same target for both: the top-level torch alone says it
    same = yaml.safe_load(render(two_extensions(tmp_path), InitChoices()).text)
    assert [e.get("torch-target") for e in same["extensions"]] == [None, None]
    assert same["torch"] == ">=2.10"


# -- kernel-builder's build.toml ----------------------------------------------------------------

BUILD_TOML = """\
[general]
name = "my-act"
version = 1
license = "Apache-2.0"
backends = ["cuda", "metal"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[torch.stable-abi]
cuda = "2.10"

[kernel.act]
backend = "cuda"
depends = ["torch"]
src = ["act/act.cu", "act/act.h"]

[kernel.act_hopper]
backend = "cuda"
depends = ["torch", "cutlass_3_8"]
cuda-capabilities = ["9.0a"]
src = ["act/act_sm90.cu"]

[kernel.act_metal]
backend = "metal"
depends = ["torch"]
src = ["act_metal/act.mm"]
"""


def kernel_project(root: Path) -> Path:
    for name in ("torch-ext/torch_binding.cpp", "act/act.cu", "act/act_sm90.cu", "torch-ext/my_act/__init__.py"):  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("// x\n")
    (root / "build.toml").write_text(BUILD_TOML)
    return root


def test_a_build_toml_gives_sources_archs_torch_and_the_generated_files(tmp_path: Path) -> None:
    root = kernel_project(tmp_path)
    assert buildtoml.is_kernel_builder(root / "build.toml")
    build = buildtoml.read_build_toml(root)
    [ext] = build.extensions
    assert ext.name == "my_act._my_act_cuda"
    assert {s.path: s.archs for s in ext.sources} == {
        "torch-ext/torch_binding.cpp": None,
        "act/act.cu": None,
        "act/act_sm90.cu": archs("9.0a"),
    }
    assert ext.torch_target == "2.10"
    assert "-DCUDA_KERNEL" in ext.defines and "--expt-relaxed-constexpr" in ext.nvcc_flags
    assert [g.path for g in build.generated] == [
        "torch-ext/registration.h",
        "torch-ext/my_act/_ops.py",
        "torch-ext/my_act/metadata.json",
    ]
    assert "ops = torch.ops._my_act_cuda" in build.generated[1].text
    # kernel-builder's cutlass_3_8 is CUTLASS 3.8.0, released on PyPI as nvidia-cutlass 3.8.0.0
    assert [lib.pypi for lib in build.header_libraries] == ["nvidia-cutlass==3.8.0.0"]
    assert not any("cutlass" in h for h in build.hand)
    assert any("act_metal (metal)" in d for d in build.done)
    result = render(build, InitChoices())
    written = yaml.safe_load(result.text)
    assert written["header-libraries"] == [
        {
            "name": "cutlass",
            "pypi": "nvidia-cutlass==3.8.0.0",
            "include": [
                "cutlass_library/source/include",
                "cutlass_library/source/tools/util/include",
            ],
        }
    ]
    assert written["torch"] == ">=2.10"
    assert {"files": "act/act_sm90.cu", "archs": "9.0a"} in written["extension"]["sources"]


def test_archs_replace_kernel_builders_default_capabilities_and_their_note(tmp_path: Path) -> None:
    build = buildtoml.read_build_toml(kernel_project(tmp_path))
    default = render(build, InitChoices())
    assert any(d.startswith("arch-sets: kernel-builder's default") for d in default.done)
    assert yaml.safe_load(default.text)["arch-sets"]["default"] != "9.0"
    chosen = render(build, InitChoices(archs="9.0"))
    assert yaml.safe_load(chosen.text)["arch-sets"] == {"default": "9.0"}
    assert not any(d.startswith("arch-sets:") for d in chosen.done)


def test_init_writes_a_build_tomls_generated_files_once(tmp_path: Path) -> None:
    root = kernel_project(tmp_path)
    request = init.InitRequest(root=root, python=Path(sys.executable))
    result = init.init_project(request)
    assert result.front_door == "build.toml"
    assert (root / "torch-ext" / "registration.h").read_text() == buildtoml.REGISTRATION_H
    load_matrix(root / "matrix.yaml")  # the package folder, sources and keys all read
    (root / "torch-ext" / "registration.h").write_text("// mine\n")
    (root / "matrix.yaml").unlink()
    with pytest.raises(ConfigError, match="registration.h exists and differs"):
        init.init_project(request)
    assert not (root / "matrix.yaml").exists()


# -- CMake's compile commands -------------------------------------------------------------------


def test_a_download_message_for_a_dependency_given_a_folder_is_no_refusal() -> None:
    output = "-- Downloading pybind11\n-- pybind11 is downloaded to /src/pybind11\n-- Downloading cutlass\n"
    assert cmake.download_lines(output, {"pybind11"}) == ["-- Downloading cutlass"]
    assert cmake.download_lines(output, set()) == [
        "-- Downloading pybind11",
        "-- Downloading cutlass",
    ]


def test_a_compile_command_without_cmakes_plumbing(tmp_path: Path) -> None:
    entry = {
        "directory": str(tmp_path / "build"),
        "file": str(tmp_path / "src" / "k.cu"),
        "command": f"/usr/bin/nvcc -forward-unknown-to-host-compiler -DFOO -I{tmp_path}/include "
        f"-isystem=/opt/torch/include -O3 --generate-code=arch=compute_90,code=[compute_90,sm_90] "
        f"-Xcompiler=-fPIC -std=c++17 -MD -MT k.o -MF k.o.d -x cu -c {tmp_path}/src/k.cu -o k.o",
    }
    command = cmake._command(entry)
    assert command.flags == ("-DFOO", "-O3", "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-std=c++17")  # fmt: skip
    assert command.includes == (str(tmp_path / "include"), "/opt/torch/include")
    assert command.cuda


def test_the_module_of_a_cmake_target_is_where_the_package_imports_it(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import _ops\n")
    assert cmake._module_name(tmp_path, "_ops") == "pkg._ops"
    assert cmake._module_name(tmp_path, "_other") == "_other"


def test_choose_door(tmp_path: Path) -> None:
    assert init.choose_door(tmp_path) == "sources"
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    assert init.choose_door(tmp_path) == "cmake"
    (tmp_path / "setup.py").write_text("")
    assert init.choose_door(tmp_path) == "setup.py"
    kernel_project(tmp_path)
    assert init.choose_door(tmp_path) == "build.toml"


def test_a_captured_build_with_nothing_to_compile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="builds no extension"):
        render(CapturedBuild(root=tmp_path, front_door="setup.py", extensions=()), InitChoices())


def test_the_package_modules_key_ships_top_level_modules(tmp_path: Path) -> None:
    root = captured(tmp_path).root
    (root / "helpers.py").write_text("X = 1\n")
    (root / "matrix.yaml").write_text(
        textwrap.dedent("""\
        package: {name: demo, version: '1.0', packages: [demo], modules: [helpers.py]}
        extension: {name: demo._C, sources: [csrc/ops.cu]}
        torch: ">=2.10"
    """)
    )
    assert [p.name for p in load_matrix(root / "matrix.yaml").package.modules] == ["helpers.py"]
    (root / "matrix.yaml").write_text(
        (root / "matrix.yaml").read_text().replace("helpers.py", "nope.py")
    )
    with pytest.raises(ConfigError, match="'nope.py' is not a .py file"):
        load_matrix(root / "matrix.yaml")


def test_what_the_tests_import_becomes_their_requirements(tmp_path: Path) -> None:
    build = captured(tmp_path)
    (tmp_path / "tests" / "test_demo.py").write_text(
        "import os\nimport einops\nimport composer\nimport demo\nfrom tests.helpers import x\n"
        "try:\n    import mtia\nexcept ImportError:\n    mtia = None\n"
        "def test_on_mtia():\n    import mtia.device\n"
    )
    (tmp_path / "tests" / "helpers.py").write_text("x = 1\n")
    with_extra = dataclasses.replace(
        build,
        metadata=dataclasses.replace(build.metadata, extras=(("testing", ("composer>=0.2",)),)),
    )
    result = render(with_extra, InitChoices(torch=("2.13.0",)))
    assert yaml.safe_load(result.text)["tests"]["requires"] == ["pytest", "composer>=0.2", "einops"]
    assert not any("mtia" in h for h in result.hand)  # its try/except ImportError guards it
    result = render(build, InitChoices(torch=("2.13.0",)))
    assert "tests: they import composer; add the distributions" in " ".join(result.hand)


def test_a_failing_setup_py_is_shown_in_short_lines_without_a_traceback_header(
    tmp_path: Path,
) -> None:
    """Issue 21: a setup.py with a 400 kB literal printed that line whole; its own traceback
    is the project's, shown as its frames and error, each line cut."""
    from wheelforge.adoption.doors import setupcapture

    trace = (
        'Traceback (most recent call last):\n  File "setup.py", line 2, in <module>\n'
        f"    setup(version=v('{'a' * 400_000}'))\nNameError: name 'v' is not defined\n"
    )
    error = {"type": "NameError", "message": "name 'v' is not defined", "where": "setup.py:2"}
    failure = setupcapture._failure(
        tmp_path, childdocument.parse({"error": {**error, "traceback": trace}})
    )
    assert "setup.py failed at line 2: NameError" in failure.message
    assert failure.details is not None
    assert "Traceback (most recent call last)" not in failure.details
    assert max(len(line) for line in failure.details.splitlines()) < 300
    assert "(400,024 characters)" in failure.details  # its frame line, cut


def test_a_cmdclass_that_fetches_is_named_with_its_call_closed(tmp_path: Path) -> None:
    source = "class Fetching:\n    def run(self):\n        urllib.request.urlretrieve(url, name)\n"
    record = {
        "cmdclass": [
            {"name": "bdist_wheel", "class": "Fetching", "overrides": ["run"], "source": source}
        ]
    }
    [refusal] = BuildSteps(tmp_path, childdocument.parse(record)).commands()
    assert refusal.detail == "cmdclass bdist_wheel=Fetching fetches (urlretrieve(...))"


@pytest.mark.parametrize("flag", ["-std=c++" + "1" * 5000, "-std=c++²", "-std=c++١٤"])
def test_a_standard_flag_of_other_digits_or_5000_digits_is_kept_not_a_traceback(flag: str) -> None:
    """Issue 21's integers: the C++ standard of a captured flag is ASCII digits, bounded (int()
    of 5,000 digits, or of '²', raised ValueError)."""
    from wheelforge.adoption.doors import flags

    assert flags._owner(flag) is None  # not a standard wheelforge sets: the flag is kept


# -- folders a setup.py names (issue 32) --------------------------------------------------------


def test_include_and_library_folders_are_split_out_of_flags_in_every_spelling() -> None:
    from wheelforge.adoption.doors.flags import LIBRARY_FLAGS, split_folders

    flags = [
        "-O3",
        "-I/p/a",
        "-I",
        "/p/b",
        "--include-path=/p/c",
        "-isystem",
        "/p/d",
        "-include",
        "x.h",
    ]
    assert split_folders(flags) == (["/p/a", "/p/b", "/p/c", "/p/d"], ["-O3", "-include", "x.h"])
    assert split_folders(["-L/p/lib", "-lfoo", "--library-path", "/q"], LIBRARY_FLAGS) == (
        ["/p/lib", "/q"],
        ["-lfoo"],
    )


def test_folders_are_written_relative_to_the_project_or_its_checkout_or_said(
    tmp_path: Path,
) -> None:
    from wheelforge.adoption.doors.projectpaths import ProjectPaths

    checkout = tmp_path / "repo"
    (checkout / ".git").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    project = checkout / "hopper"
    for folder in ("csrc", "../csrc/cutlass/include", "../../elsewhere/inc", "../../cuda/include"):
        (project / folder).mkdir(parents=True, exist_ok=True)
    (tmp_path / "cuda" / "include" / "cuda_runtime.h").write_text("")
    hand: list[str] = []
    done: list[str] = []
    paths = ProjectPaths(project, hand=hand, done=done, missing=[])
    given = [
        str(project / "csrc"),  # absolute, inside: relative
        "csrc/../csrc",
        str(checkout / "csrc" / "cutlass" / "include"),  # above it, in its checkout: ../
        str(tmp_path / "elsewhere" / "inc"),  # outside both: absolute, and said
        str(tmp_path / "cuda" / "include"),  # the toolkit's: left out
    ]
    assert paths.paths(given, "include_dirs", must_exist=False) == [
        "csrc",
        "csrc",
        "../csrc/cutlass/include",
        str(tmp_path / "elsewhere" / "inc"),
    ]
    assert any("the CUDA toolkit's include folder" in d for d in done)
    assert any(
        "lies outside the project and its checkout: written as this absolute path" in h
        for h in hand
    )


def test_a_link_commands_libraries_are_read_as_names_and_folders() -> None:
    assert cmake.link_library("-lcublas") == ("cublas", None)
    assert cmake.link_library("-l:libcublasLt.so.13") == ("cublasLt", None)
    assert cmake.link_library("/usr/local/cuda/lib64/libcublas.so") == (
        "cublas",
        "/usr/local/cuda/lib64",
    )
    assert cmake.link_library("/x/lib/libculibos.a") == ("culibos", "/x/lib")
    assert cmake.link_library("/x/lib/libcublasLt.so.13.0.2") == ("cublasLt", "/x/lib")
    assert cmake.link_library("/usr/lib/libpython3.12.so") is None  # Python's, not the project's
    assert cmake.link_library("-Wl,-rpath,/x/lib") is None
    assert cmake.link_library("CMakeFiles/x.dir/a.o") is None


def test_a_plain_librarys_visibility_flags_stay_the_projects() -> None:
    flags = ("-O3", "-fvisibility-inlines-hidden", "-fvisibility=hidden")
    assert sort_flags(flags).kept == ("-O3",)
    assert sort_flags(flags, own_exports=True).kept == flags


def test_a_sources_own_flags_are_written_beside_it(tmp_path: Path) -> None:
    from wheelforge.adoption.writer.sourceglobs import sources_entries

    for name in ("a.cu", "b.cu", "c.cu"):
        (tmp_path / name).write_text("// x\n")
    ext = CapturedExtension(
        name="pkg._C",
        kind="CMake module_library",
        where="CMake target _C",
        sources=(
            CapturedSource(path="a.cu"),
            CapturedSource(path="b.cu", flags=("-static-global-template-stub=false",)),
            CapturedSource(path="c.cu"),
        ),
    )
    entries = sources_entries(tmp_path, ext)
    assert [e for e in entries if isinstance(e, str)] == ["a.cu", "c.cu"]  # no glob takes b.cu
    assert {"files": "b.cu", "flags": ["-static-global-template-stub=false"]} in entries


def test_archs_given_to_cmakes_configure_keep_the_projects_ptx_per_source(tmp_path: Path) -> None:
    # vLLM for TORCH_CUDA_ARCH_LIST=8.0: its marlin kernels add PTX, the others are limited to 8.0
    build = captured(tmp_path)
    ext = dataclasses.replace(
        build.extensions[0],
        archs=archs("8.0+PTX"),
        sources=(CapturedSource(path="csrc/ops.cu", archs=archs("8.0")),),
    )
    cmake_build = dataclasses.replace(build, front_door="CMake", extensions=(ext,))

    def arch_set(b: CapturedBuild, given: str) -> object:
        return yaml.safe_load(render(b, InitChoices(torch=("2.13.0",), archs=given)).text)[
            "arch-sets"
        ]

    assert arch_set(cmake_build, "8.0") == {"default": "8.0+PTX"}
    assert arch_set(cmake_build, "9.0") == {"default": "9.0"}  # not what it compiled: --archs
    assert arch_set(dataclasses.replace(cmake_build, front_door="setup.py"), "8.0") == {
        "default": "8.0"
    }


# -- setup.py beside a CMakeLists.txt (bitsandbytes, issue 40 item 2) ---------------------------


def _setup_beside_cmake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metadata: ProjectMetadata, *, plain: bool
) -> tuple[init.InitRequest, CapturedExtension]:
    """A setup.py whose setup() gives *metadata*, package demo and no extension, and CMake's
    library demo.libdemo_cuda, both captures stood in; init's request and that library."""
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    from_setup = CapturedBuild(
        root=tmp_path, front_door="setup.py", extensions=(), metadata=metadata, packages=("demo",)
    )
    library = CapturedExtension(
        name="demo.libdemo_cuda", kind="plain", where="CMake target demo", plain=plain,
        sources=(CapturedSource(path="csrc/ops.cu"),),
    )  # fmt: skip
    from_cmake = CapturedBuild(root=tmp_path, front_door="CMake", extensions=(library,))
    monkeypatch.setattr(init.setupcapture, "capture_setup", lambda root, context: from_setup)
    monkeypatch.setattr(init.cmake, "capture_cmake", lambda root, context, **kw: from_cmake)
    monkeypatch.setattr(init, "_toolkit", lambda env, cache: None)
    return init.InitRequest(root=tmp_path, python=Path(sys.executable), sandbox="off"), library


def test_a_setup_py_that_builds_no_extension_hands_over_to_cmake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bitsandbytes: setup() gets no ext_modules (scikit-build-core's setuptools plugin runs
    CMake); init keeps setup.py's packages and takes CMake's library."""
    metadata = ProjectMetadata(name="demo", version="1.2")
    request, library = _setup_beside_cmake(tmp_path, monkeypatch, metadata, plain=False)
    from_setup = init.setupcapture.capture_setup(tmp_path, None)

    assert init.capture(request, "setup.py", {}) is from_setup  # no CMakeLists.txt: its own
    (tmp_path / "CMakeLists.txt").write_text("project(demo)\n")
    build = init.capture(request, "setup.py", {})
    assert build.front_door == "setup.py + CMake"
    assert (build.extensions, build.packages, build.metadata) == ((library,), ("demo",), metadata)


def test_the_cmake_door_takes_setup_pys_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--from cmake`` beside a setup.py whose setup() computes the version (no pyproject
    attr to read it from): setup.py runs, in the sandbox, for its metadata; CMake's library
    stays the extension. A setup.py that cannot run leaves it, said as needing a hand."""
    (tmp_path / "CMakeLists.txt").write_text("project(demo)\n")
    metadata = ProjectMetadata(name="demo", version="1.2", torch_requirement="torch>=2.4,<3")
    request, library = _setup_beside_cmake(tmp_path, monkeypatch, metadata, plain=True)
    build = init.capture(request, "cmake", {})
    assert (build.front_door, build.extensions, build.metadata) == ("CMake", (library,), metadata)
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cu").write_text('extern "C" int demo(void) { return 1; }\n')
    result = render(build, InitChoices())
    written = yaml.safe_load(result.text)
    assert written["package"]["version"] == "1.2" and result.hand == ()
    # no binary uses torch: the project's own range, not a stable-ABI floor
    assert written["torch"] == "<3,>=2.4"
    assert any("the project's own (setup()'s install_requires)" in d for d in result.done)

    def refused(root: Path) -> None:
        raise ConfigError("setup.py: not Python")

    monkeypatch.setattr(init.setupcapture, "check_parses", refused)
    build = init.capture(request, "cmake", {})
    assert build.metadata == ProjectMetadata() and build.extensions == (library,)
    assert build.hand == ("setup.py: not run for its metadata (setup.py: not Python); "
                          "pyproject.toml's, if any, is used",)  # fmt: skip


def test_a_ctypes_librarys_wheel_requires_the_projects_own_torch(tmp_path: Path) -> None:
    """bitsandbytes: its binaries use no torch (kind: plain), so init writes pyproject.toml's
    own torch range, the matrix takes it below the stable ABI's 2.9, and the wheel requires it
    as the project's own wheel does (torch<3,>=2.4)."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "1.0"\ndependencies = ["torch>=2.4,<3", "numpy"]\n'
    )
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cu").write_text('extern "C" int demo(void) { return 1; }\n')
    library = CapturedExtension(
        name="demo.libdemo_cuda", kind="plain", where="CMake target demo", plain=True,
        sources=(CapturedSource(path="csrc/ops.cu"),),
    )  # fmt: skip
    build = CapturedBuild(root=tmp_path, front_door="CMake", extensions=(library,))
    result = render(build, InitChoices(archs="8.0"))
    assert yaml.safe_load(result.text)["torch"] == "<3,>=2.4"
    assert "# No binary uses torch (every extension is kind: plain)" in result.text
    said = next(d for d in result.done if d.startswith("torch:"))
    assert "pyproject.toml [project] dependencies" in said and "no stable-ABI floor" in said
    (tmp_path / "matrix.yaml").write_text(result.text)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert not matrix.uses_torch
    from wheelforge.configuration import abi

    requirement = abi.of(matrix.abi).requirement(matrix)
    assert requirement == "torch<3,>=2.4"
    text = core_metadata(
        matrix.package, matrix.requires_python, version="1.0", torch_requirement=requirement
    )
    assert [ln for ln in text.splitlines() if ln.startswith("Requires-Dist")] == [
        "Requires-Dist: torch<3,>=2.4",
        "Requires-Dist: numpy",
    ]
    # a project that names no torch: written as the default, said as needing a hand
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1.0"\n')
    result = render(build, InitChoices(archs="8.0"))
    assert yaml.safe_load(result.text)["torch"] == ">=2.10"
    assert any("the project requires no torch" in h for h in result.hand)


def test_the_cmake_door_ships_the_package_data_of_tool_setuptools(tmp_path: Path) -> None:
    """bitsandbytes' ``package-data = { "*" = ["libbitsandbytes*.*", "py.typed"] }``: the files
    there now, in every package; a folder without __init__.py is no package."""
    for name in ("pkg/__init__.py", "pkg/py.typed", "pkg/libpkg_cpu.so", "pkg/sub/__init__.py",
                 "pkg/sub/py.typed", "pkg/sub/notes.txt", "pkg/data/py.typed"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-data = { "*" = ["libpkg*.*", "py.typed"], '
        '"pkg.sub" = ["*.txt"] }\n'
    )
    globs = packagedata.pyproject_package_data(tmp_path, ["pkg"])
    assert globs == ("libpkg_cpu.so", "py.typed", "sub/*")
    assert packagedata.pyproject_package_data(tmp_path, ["nothere"]) == ()
    (tmp_path / "pyproject.toml").write_text("[tool]\nsetuptools = 1\n")
    assert packagedata.pyproject_package_data(tmp_path, ["pkg"]) == ()


def test_pyproject_tomls_packages_win_over_setups_as_setuptools_applies_them(
    tmp_path: Path,
) -> None:
    """bitsandbytes: setup.py's find_packages() finds tests/ too; pyproject.toml's
    ``packages.find include = ["bitsandbytes*"]`` is what setuptools packs."""
    for name in ("pkg/__init__.py", "tests/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    given = {"name": "pkg", "version": "1.0", "packages": ["pkg", "tests"]}
    assert capture_packagedata.configured_packages(given, str(tmp_path)) == {}
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "pkg"\ndynamic = ["version"]\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["pkg*"]\n'
    )
    found = capture_packagedata.configured_packages(given, str(tmp_path))
    assert found == {"packages": ["pkg"]}
