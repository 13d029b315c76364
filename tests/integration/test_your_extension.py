"""Issue 9: the shapes of real extensions, each as the smallest project that shows it. One
project that builds (Python.h and cuda_runtime.h in a .cpp, a bare PyInit, link keys, metadata
from pyproject.toml, no package section and no arch-sets), and the failing shapes with the
message each must give. C++ only (no nvcc run): every build here takes seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.integration.helpers import (
    TINY_ARCH_ENV,
    TINY_MATRIX,
    TINY_OP_CPP,
    Run,
    needs_nvcc,
    only_wheel,
    tiny,
    wheelforge,
)

pytestmark = needs_nvcc


def build(root: Path, *args: str) -> Run:
    return wheelforge("build", *args, cwd=root, env=TINY_ARCH_ENV)


def test_the_common_shapes_build_import_and_carry_pyproject_metadata(tmp_path: Path) -> None:
    root = tiny(tmp_path)
    run = build(root)
    assert run.code == 0, run.err
    assert "import check: import tinyext ok under torch" in run.out
    assert "; import tinyext._C ok under torch" in run.out
    # A C++-only extension owes no arch: no "SASS sm_90 ... MISSING" above "1 wheel(s) built".
    assert "MISSING" not in run.out
    assert "no device code: the extension compiles no .cu source" in run.out
    wheel = only_wheel(root / "dist")
    assert wheel.name.startswith("tinyext-0.3.0-cp310-abi3-manylinux_")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        metadata = zf.read("tinyext-0.3.0.dist-info/METADATA").decode()
    assert not any(n.endswith(".cpp") for n in names), names  # sources stay out (defect 6)
    for line in (
        "Name: tinyext",
        "Summary: A tiny stable-ABI extension",
        "License-Expression: MIT",
        # as pyproject-metadata writes it
        'Author-Email: "A. Person" <a.person@example.org>',
        "Classifier: Programming Language :: Python :: 3",
        "Project-URL: Homepage, https://example.org/tinyext",
        "Requires-Dist: numpy>=1.26",
        "Provides-Extra: test",
        "Description-Content-Type: text/markdown",
        "The long description.",
    ):
        assert line in metadata, (line, metadata)
    assert metadata.count("Requires-Dist: torch") == 1 and "Requires-Dist: torch>=2.10" in metadata
    check = wheelforge("check", wheel, cwd=root)
    assert check.code == 0, check.err
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = (
        "import torch, tinyext; x = torch.linspace(0, 1, 5); "
        "assert torch.allclose(torch.ops.tinyext.cosine(x), torch.cos(x)); print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, cwd=site)  # fmt: skip
    assert proc.stdout.strip() == "ok", proc.stderr


def test_hidden_pyinit_is_refused_before_publishing(tmp_path: Path) -> None:
    root = tiny(tmp_path, extra_flags=", -fvisibility=hidden")
    run = build(root)
    assert run.code != 0
    assert "defines PyInit__C but does not export it" in run.err
    assert not list((root / "dist").glob("*.whl")), "an unimportable wheel was published"


def test_an_undefined_symbol_fails_the_build_before_the_import_check(tmp_path: Path) -> None:
    source = TINY_OP_CPP.replace(
        "static torch::stable::Tensor cosine",
        'extern "C" int tiny_missing(void);\nextern "C" int tiny_use(void) { return tiny_missing(); }\n'
        "static torch::stable::Tensor cosine",
    )
    root = tiny(tmp_path, source)
    for run in (build(root), build(root, "--no-import-check")):
        # check's unresolved-symbol rule reads it from the binary: no import needed to know
        assert run.code == 4, run.err
        assert "tiny_missing" in run.err and "add the source that defines it" in run.err
        assert not list((root / "dist").glob("*.whl"))


def test_import_check_refuses_an_unloadable_module(tmp_path: Path) -> None:
    # A module whose init fails: nothing in the binary says so, only importing it does.
    source = TINY_OP_CPP.replace(
        "return PyModule_Create(&tiny_module);",
        'PyErr_SetString(PyExc_ImportError, "tiny refuses to load"); return NULL;',
    )
    assert source != TINY_OP_CPP
    root = tiny(tmp_path, source)
    run = build(root)
    assert run.code != 0
    assert "'import tinyext' fails under torch" in run.err  # its __init__ imports _C
    assert "tiny refuses to load" in run.err
    assert not list((root / "dist").glob("*.whl"))
    skipped = build(root, "--no-import-check")
    assert skipped.code == 0, skipped.err
    assert "import check: skipped" in skipped.out


def test_a_compile_error_shows_its_first_errors_and_the_log(tmp_path: Path) -> None:
    many = "\n".join(f"int late_{i} = undefined_late_{i};" for i in range(80))
    root = tiny(tmp_path, f"int first = undefined_first_name;\n{many}\n")
    run = build(root)
    assert run.code != 0
    assert "compiling tinyext/csrc/op.cpp failed" in run.err
    assert "undefined_first_name" in run.err
    assert "earlier lines not shown" not in run.err
    log = next(root.glob("build/wheelforge/*/build.log"))
    assert str(log) in run.err.replace("\n", "")
    assert "undefined_late_79" in log.read_text()
    # The verdict is the last line, after the compiler's noise: the first error and the log.
    last = run.err.rstrip().splitlines()[-1]
    assert last.startswith("error: variant ") and "undefined_first_name" in last
    assert last.endswith(f"the whole log is {log}")


def test_a_defined_pyinit_with_module_init_on_gets_a_hint(tmp_path: Path) -> None:
    root = tiny(tmp_path, matrix=TINY_MATRIX.replace("  module-init: false\n", ""))
    run = build(root)
    assert run.code != 0
    assert "multiple definition of" in run.err
    assert "set 'module-init: false'" in run.err


def test_a_name_the_target_version_hides_gets_a_hint(tmp_path: Path) -> None:
    source = TINY_OP_CPP + "\nstatic torch::stable::Generator* tiny_generator = nullptr;\n"
    root = tiny(tmp_path, source)
    run = build(root)
    assert run.code != 0
    text = " ".join(run.err.split())
    assert "hint: Generator exists in torch 2.13 and newer" in text
    assert "target version 2.10" in text


def test_flags_given_as_a_string_name_the_key_and_line(tmp_path: Path) -> None:
    root = tiny(tmp_path, matrix=TINY_MATRIX.replace("[-DTINY_WITH_CUDA{extra_flags}]", "-O3 -DX"))
    run = build(root)
    assert run.code == 2
    assert "matrix.yaml:5: extension.cxx-flags must be a list of strings" in run.err
    assert "write [-O3, -DX]" in run.err
