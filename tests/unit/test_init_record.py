"""init's setup.py record (adoption/record/setuprun.py, read by childdocument.py): the child's JSON document parsed once
into a typed SetupRun; a document that breaks the child's shape is one line naming the field,
a setup() argument setuptools cannot use one line naming it; the static reading gives the
same record; every key the child writes is read, or named as unread."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from wheelforge.adoption.child import SCRIPT
from wheelforge.adoption.record import childdocument, setuprun
from wheelforge.adoption.record.setuprun import ExtensionArgs, MalformedRecord, SetupArgs
from wheelforge.foundation.errors import ConfigError, ToolError

# A document as the child writes it (setup_child.RECORD's keys, filled).
CHILD_DOCUMENT: dict[str, object] = {
    "setup_calls": [
        {
            "name": "demo",
            "version": 1.5,
            "install_requires": ["numpy", "torch>=2.9"],
            "packages": ["demo", "demo.sub"],
            "package_dir": {"": "src"},
            "package_data": {"demo": ["*.json"]},
            "keywords": "cuda, torch",
            "entry_points": {"console_scripts": ["demo=demo:main"]},
        }
    ],
    "extensions": [
        {
            "name": "demo._C",
            "kind": "CUDAExtension",
            "where": "setup.py:12",
            "dlink": False,
            "sources": ["csrc/a.cu", 7],
            "define_macros": [["WITH_CUDA", None], ["N", 4], []],
            "undef_macros": None,
            "extra_compile_args": {"cxx": ["-O3"], "nvcc": ["-O3", "--use_fast_math"]},
            "extra_objects": ["prebuilt.o"],
            "library_dirs": None,
        }
    ],
    "cmdclass": [
        {"name": "build_ext", "class": "BuildExtension", "base": "build_ext", "overrides": [],
         "where": "", "source": ""},
    ],
    "network": [{"detail": "example.com:443", "where": "setup.py:20"}],
    "refused": [{"detail": "write /etc/x", "where": "setup.py:21"}],
    "writes": ["demo/_version.py"],
    "written": [
        {"path": "/p/gen/k.cu", "by": "gen/kernels.py",
         "entry": {"function": "main", "module": "gen.kernels", "args": ["out", 3, None]}},
        {"path": "/p/demo/_version.py", "by": "setup.py"},
    ],
    "generators": [{"argv": ["python", "gen.py", "-o", "out"], "cwd": "/p", "script": "gen.py",
                    "where": "setup.py:30", "exit": 0}],
    "stub_missing": ["torch.utils.cpp_extension.ROCM_HOME", {"name": "import torch.nn", "where": "setup.py:9"}],
    "torch": {"version": "2.10.0", "real": False, "cuda": "13.0"},
    "torch_nvcc_flags": ["-D__CUDA_NO_HALF_OPERATORS__"],
    "ninja": {"demo._C": "ninja_required_version = 1.3\n"},
    "ninja_replaced_at": "setup.py:40",
    "build_ext_options": [{"class": "BuildExtension", "where": "setup.py:50",
                           "options": {"extra_files": {"lib.json": "{}"}}}],
    "package_files": ["src/demo/a.json"],
    "error": {"type": "RuntimeError", "message": "no GPU", "where": "setup.py:60", "traceback": "",
              "cause": {"type": "ImportError", "message": "cannot import name 'nn'"}},
}  # fmt: skip


def test_the_childs_document_is_one_typed_record() -> None:
    run = childdocument.parse(CHILD_DOCUMENT)
    assert run.setup is not None and run.setup.version == "1.5"
    assert run.setup.packages == ("demo", "demo.sub") and run.setup.package_dir == (("", "src"),)
    assert run.setup.package_data == (("demo", ("*.json",)),)
    assert run.setup.keywords == "cuda, torch"  # split by the reading, as setuptools does
    assert run.setup.entry_points == {"console_scripts": ["demo=demo:main"]}  # shown as given
    [ext] = run.extensions
    assert ext.label == "CUDAExtension demo._C (setup.py:12)"
    assert ext.sources == ("csrc/a.cu", "7")
    assert ext.define_macros == (("WITH_CUDA", None), ("N", "4"))
    assert (ext.cxx_args, ext.nvcc_args) == (("-O3",), ("-O3", "--use_fast_math"))
    assert ext.extra_objects == ["prebuilt.o"] and ext.library_dirs == ()
    assert run.network[0].detail == "example.com:443" and run.refused[0].where == "setup.py:21"
    assert run.written[0].entry.args == ("out", 3, None) and run.written[1].entry.module is None
    assert run.generators[0].argv == ("python", "gen.py", "-o", "out")
    assert run.torch is not None and (run.torch.version, run.torch.real) == ("2.10.0", False)
    assert dict(run.ninja) == {"demo._C": "ninja_required_version = 1.3\n"}
    assert run.build_ext_options[0].options == (("extra_files", {"lib.json": "{}"}),)
    assert run.package_files == ("src/demo/a.json",)
    # A name the stand-in lacks: as a name (before), or with the line that asked for it.
    assert [(m.name, m.where) for m in run.stub_missing] == [
        ("torch.utils.cpp_extension.ROCM_HOME", ""),
        ("import torch.nn", "setup.py:9"),
    ]
    assert run.error is not None and run.error.cause is not None
    assert (run.error.where, run.error.cause.type) == ("setup.py:60", "ImportError")


def test_a_list_of_compile_args_is_both_compilers_and_absent_keys_take_defaults() -> None:
    run = childdocument.parse({"extensions": [{"name": "m", "extra_compile_args": ["-O2"]}]})
    [ext] = run.extensions
    assert (ext.kind, ext.where, ext.cxx_args, ext.nvcc_args) == (
        "Extension",
        "setup.py",
        ("-O2",),
        ("-O2",),
    )
    assert run.setup is None and run.torch is None and run.package_files is None


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"extensions": {"name": "m"}}, "extensions is {'name': 'm'}, where a list belongs"),
        ({"extensions": ["m"]}, "extensions[0] is 'm', where an object belongs"),
        ({"network": [{"where": "setup.py:3"}]}, "network[0].detail is None, where a string"),
        ({"written": [{"path": 5}]}, "written[0].path is 5, where a string belongs"),
        ({"written": [{"path": "/p/x", "entry": {"args": "x"}}]}, "written[0].entry.args is 'x'"),
        ({"torch": {"real": True}}, "torch.version is None, where a version belongs"),
        ({"cmdclass": [{"name": "build"}]}, "cmdclass[0].class is None"),
        ({"stub_missing": [1]}, "stub_missing[0] is 1, where an object belongs"),
        ({"error": {"cause": "x"}}, "error.cause is 'x', where an object belongs"),
        ({"setup_calls": "setup"}, "setup_calls is 'setup', where a list belongs"),
        ([], "the document is [], where an object belongs"),
    ],
)
def test_a_document_that_breaks_the_childs_shape_is_one_line_naming_the_field(
    document: object, field: str
) -> None:
    with pytest.raises(MalformedRecord) as caught:
        childdocument.parse(document, source="record.json")
    message = caught.value.message
    assert isinstance(caught.value, ToolError) and caught.value.exit_code == 3
    assert message.startswith(f"record.json: {field}") and "\n" not in message
    assert "wheelforge init --no-run" in message


def test_a_record_file_that_is_not_json_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_text('{"setup_calls": [')
    with pytest.raises(MalformedRecord) as caught:
        childdocument.load(path)
    assert caught.value.message.startswith(
        f"{path}: the record init's setup.py child wrote is not JSON"
    )
    path.write_text(json.dumps(CHILD_DOCUMENT))
    assert childdocument.load(path) == childdocument.parse(CHILD_DOCUMENT)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"package_data": ["*.json"]}, "setup(package_data=['*.json']): setuptools takes a dict"),
        ({"packages": 5}, "setup(packages=5): setuptools takes a list of strings"),
    ],
)
def test_a_setup_argument_setuptools_cannot_use_is_one_line(
    args: dict[str, object], needle: str
) -> None:
    """Before: AttributeError: 'list' object has no attribute 'items' (a traceback)."""
    with pytest.raises(ConfigError) as caught:
        childdocument.parse({"setup_calls": [args]})
    assert caught.value.message.startswith(needle) and "fix setup.py" in caught.value.message


def test_the_static_reading_and_the_child_give_the_same_extension() -> None:
    """staticsetup.py builds ExtensionArgs from its scan; the child's description of the same
    Extension(...) call parses to the same value."""
    described = {
        "name": "demo._C", "kind": "CUDAExtension", "where": "setup.py:4", "dlink": False,
        "sources": ["k.cu"], "include_dirs": ["csrc"], "define_macros": [], "undef_macros": [],
        "library_dirs": [], "libraries": ["cuda"], "runtime_library_dirs": None,
        "extra_objects": None, "extra_compile_args": {"cxx": ["-O3"], "nvcc": ["-lineinfo"]},
        "extra_link_args": ["-Wl,--no-as-needed"], "depends": [], "language": None,
        "py_limited_api": True,
    }  # fmt: skip
    assert ExtensionArgs.given(described) == ExtensionArgs(
        name="demo._C",
        kind="CUDAExtension",
        where="setup.py:4",
        sources=("k.cu",),
        include_dirs=("csrc",),
        cxx_args=("-O3",),
        nvcc_args=("-lineinfo",),
        libraries=("cuda",),
        extra_link_args=("-Wl,--no-as-needed",),
    )
    assert SetupArgs.given({}) == SetupArgs()


def _child_keys() -> set[str]:
    """Every top-level key the child's files write into the record."""
    keys: set[str] = set()
    for path in SCRIPT.parent.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        keys |= set(re.findall(r"\b(?:RECORD|record)\[\"(\w+)\"\]", text))
        keys |= set(re.findall(r"\brecord\.setdefault\(\"(\w+)\"", text))
    popped = set(re.findall(r"\bRECORD\.pop\(\"(\w+)\"", SCRIPT.read_text(encoding="utf-8")))
    literal = SCRIPT.read_text(encoding="utf-8").split("RECORD: dict[str, Any] = {", 1)[1]
    keys |= set(re.findall(r"^    \"(\w+)\":", literal.split("\n}", 1)[0], re.M))
    return keys - popped  # a function handed between two steps, gone before the file is written


def test_every_key_the_child_writes_is_read_or_named_unread() -> None:
    keys = _child_keys()
    assert {"setup_calls", "extensions", "written", "torch", "package_files"} <= keys
    # The document's reader, and the record's constructors of setup()'s and each Extension's
    # arguments that it calls.
    parser = "".join(
        Path(m.__file__).read_text(encoding="utf-8") for m in (childdocument, setuprun)
    )
    unread = sorted(k for k in keys - childdocument.UNREAD if f'"{k}"' not in parser)
    assert unread == [], "keys the child writes that record/childdocument.py does not read"
    assert keys >= childdocument.UNREAD  # no stale name among the unread
