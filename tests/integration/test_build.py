"""End-to-end builds of the bundled kernels with the real nvcc, ninja and auditwheel."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from elftools.elf.elffile import ELFFile

from tests.integration.helpers import (
    REPO,
    Run,
    brought_up_to_date,
    copy_kernels,
    needs_nvcc,
    only_wheel,
    wheelforge,
)
from wheelforge.configuration import coremetadata
from wheelforge.configuration.archs import ArchSet
from wheelforge.documents.build_report_schema import KIND

pytestmark = needs_nvcc

packaged_schema = KIND.packaged_schema


WHEEL_RE = re.compile(r"^wheelforge_kernels-0\.1\.0-cp310-abi3-manylinux_\d+_\d+_x86_64\.whl$")
ARCHS = "7.5 9.0+PTX"


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository's payload, so builds never touch the checkout."""
    return copy_kernels(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="session")
def first_build(project: Path) -> Run:
    return wheelforge("build", "--archs", ARCHS, cwd=project)


def extension_elf(wheel: Path, tmp_path: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        data = zf.read("wheelforge_kernels/_C.abi3.so")
    path = tmp_path / "_C.abi3.so"
    path.write_bytes(data)
    return path


def test_build_makes_one_repaired_abi3_wheel(first_build: Run, project: Path) -> None:
    assert first_build.code == 0, first_build.err
    wheel = only_wheel(project / "dist")
    assert WHEEL_RE.match(wheel.name), wheel.name
    assert brought_up_to_date(first_build.err) == (6, 6), first_build.err
    for arch in ("sm_75", "sm_90", "compute_90"):
        assert arch in first_build.out
    assert "missing" not in first_build.out
    assert not list((project / "dist").glob(".*")), "temporary files left in dist/"
    # imported as its user imports it: the package, then the extension by its dotted name
    said = " ".join(first_build.out.split())
    assert "import check: import wheelforge_kernels ok under torch" in said
    assert "; import wheelforge_kernels._C ok under torch" in said


def test_wheel_is_on_the_stable_abi(first_build: Run, project: Path, tmp_path: Path) -> None:
    so = extension_elf(only_wheel(project / "dist"), tmp_path)
    with so.open("rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        undefined = {
            s.name: s["st_info"]["bind"]
            for s in dynsym.iter_symbols()
            if s["st_shndx"] == "SHN_UNDEF" and s.name
        }
        needed = {
            t.needed
            for t in elf.get_section_by_name(".dynamic").iter_tags()
            if t.entry.d_tag == "DT_NEEDED"
        }
        exported = {
            s.name
            for s in dynsym.iter_symbols()
            if s["st_shndx"] != "SHN_UNDEF" and s["st_info"]["bind"] == "STB_GLOBAL"
        }
    mangled = [n for n in undefined if re.match(r"_ZN(3c10|2at|5torch|6caffe2)", n)]
    assert mangled == []
    assert undefined["aoti_torch_get_current_cuda_stream"] == "STB_WEAK"
    assert "torch_library_impl" in undefined  # a 2.10 shim: the target version is in force
    assert {"libtorch.so", "libtorch_cpu.so", "libc10.so"} <= needed
    assert not any(n.startswith("libcudart") for n in needed), needed
    assert "PyInit__C" in exported
    assert not any(n.startswith("cuda") for n in exported), "static cudart leaks its symbols"


def test_wheel_metadata(first_build: Run, project: Path) -> None:
    with zipfile.ZipFile(only_wheel(project / "dist")) as zf:
        metadata = zf.read("wheelforge_kernels-0.1.0.dist-info/METADATA").decode()
        wheel = zf.read("wheelforge_kernels-0.1.0.dist-info/WHEEL").decode()
        names = zf.namelist()
    assert "Requires-Dist: torch>=2.10" in metadata
    assert coremetadata.problems(metadata) == ()  # PyPI takes it
    assert re.search(r"^Tag: cp310-abi3-manylinux_\d+_\d+_x86_64$", wheel, re.M)
    assert not any(".libs/" in n for n in names), "auditwheel grafted libraries"


def test_rebuild_runs_no_compiler(first_build: Run, project: Path) -> None:
    before = only_wheel(project / "dist").read_bytes()
    again = wheelforge("build", "--archs", ARCHS, cwd=project)
    assert again.code == 0, again.err
    assert "nothing to compile: up to date" in again.err
    assert "is up to date" in again.err
    assert "NVCC" not in again.err and "CXX" not in again.err
    assert only_wheel(project / "dist").read_bytes() == before


# What a no-op build never needs, so never imports (its start-up is most of its time; the
# speed itself is shown by bench/bench_build.py --baseline): the packers, repairer, ELF reader,
# variant and SBOM libraries, and wheelforge's modules for building, failing, reports and other
# commands.
NOT_IMPORTED_BY_A_NOOP = (
    "abi3info",
    "auditwheel",
    "concurrent.futures",
    "configparser",
    "ctypes",
    "cyclonedx",
    "elftools",
    "importlib.metadata",
    "jsonschema",
    "pyproject_metadata",
    "rich.live",
    "rich.progress",
    "variantlib",
    "wheel",
    "zstandard",
    "wheelforge.binaries.inspection",
    "wheelforge.foundation.progress",
    "wheelforge.cli.ci",
    "wheelforge.documents",
    "wheelforge.cli.inspect_screen",
    "wheelforge.packaging.sbom",
    "wheelforge.packaging.simpleindex",
    "wheelforge.packaging.wheel_variants",
    "wheelforge.build.diagnose",
    "wheelforge.build.dryrun",
    "wheelforge.build.jobwatch",
    "wheelforge.build.reproduce",
    "wheelforge.toolchain.downloads",
)


def test_noop_rebuild_imports_only_what_it_needs(
    first_build: Run, project: Path, tmp_path: Path
) -> None:
    listed = tmp_path / "modules.json"
    code = (
        "import json, sys\n"
        "from wheelforge.cli.app import main\n"
        f"status = main(['build', '--archs', {ARCHS!r}])\n"
        f"open({str(listed)!r}, 'w').write(json.dumps([status, sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"})  # fmt: skip
    status, modules = json.loads(listed.read_text())
    assert status == 0, proc.stderr
    assert "nothing to compile: up to date" in proc.stderr and "is up to date" in proc.stderr
    loaded = [
        m for m in modules if any(m == n or m.startswith(f"{n}.") for n in NOT_IMPORTED_BY_A_NOOP)
    ]
    assert not loaded, f"a no-op build imported {loaded}"


def test_touching_one_source_recompiles_only_it(first_build: Run, project: Path) -> None:
    source = project / "kernels" / "csrc" / "ops.cpp"
    source.write_text(source.read_text() + "\n// touched\n")
    again = wheelforge("build", "--archs", ARCHS, "-v", cwd=project)
    assert again.code == 0, again.err
    assert brought_up_to_date(again.err) == (1, 6), again.err


def test_cpu_tests_pass_against_the_built_wheel(
    first_build: Run, project: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(only_wheel(project / "dist")) as zf:
        zf.extractall(site)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project / "kernels" / "tests")],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary


def test_arch_the_toolkit_cannot_build_fails_before_compiling(
    project: Path, tmp_path: Path
) -> None:
    """Only CUDA 13 around and no downloads allowed: sm_70 is refused before anything compiles."""
    run = wheelforge(
        "build", "--archs", "7.0 8.0 9.0+PTX", "--offline", "--cache-dir", tmp_path / "empty-cache",
        "--out", tmp_path / "out", "--build-dir", tmp_path / "build", cwd=project,
    )  # fmt: skip
    assert run.code == 5  # an environment problem: the toolkit is not installed
    assert "needs CUDA 12.4, which is not installed" in run.err
    assert "for 7.0 (sm_70), which none of them builds" in run.err
    assert "wheelforge toolkit install 12.4" in run.err
    assert not (tmp_path / "build").exists() and not (tmp_path / "out").exists()


def test_compile_error_shows_compiler_output(tmp_path: Path) -> None:
    shutil.copytree(
        REPO / "kernels" / "wheelforge_kernels", tmp_path / "pkg" / "wheelforge_kernels"
    )
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "bad.cu").write_text(
        "#include <cstdio>\n\n__global__ void k(float* x) {\n  x[0] = undefined_thing;\n}\n"
    )
    (tmp_path / "matrix.yaml").write_text(
        "package: {name: broken, version: '1.0', packages: [pkg/wheelforge_kernels]}\n"
        "extension: {name: wheelforge_kernels._C, sources: [csrc/bad.cu]}\n"
        "torch: '>=2.10'\narch-sets: '8.0'\n"
    )
    summary = tmp_path / "summary.md"
    github = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    run = wheelforge("build", "--report", "r.json", cwd=tmp_path, env=github)
    assert run.code == 3  # a compile failure
    assert "variant default-cu130: compiling csrc/bad.cu failed" in run.err
    assert 'bad.cu(4): error: identifier "undefined_thing" is undefined' in run.err
    # The file as the project names it, in the compiler's lines and the verdict (issue 33: the
    # command's ../../../csrc/bad.cu, relative to the build folder).
    said = " ".join(run.err.split())
    assert (
        'compiling csrc/bad.cu failed: csrc/bad.cu(4): error: identifier "undefined_thing"' in said
    )
    assert "../" not in run.err
    assert not (tmp_path / "dist").exists() or not list((tmp_path / "dist").iterdir())
    # GitHub Actions: the stage in a group, the compiler's error as an annotation on its line.
    lines = run.err.splitlines()
    assert "::group::default-cu130: compile for 8.0 with CUDA 13.0.88" in lines[1]
    assert "::endgroup::" in lines
    assert '::error file=csrc/bad.cu,line=4::identifier "undefined_thing" is undefined' in lines
    assert "| default-cu130 | failed |" in summary.read_text()
    # The report says which variant failed and why.
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(report, packaged_schema(), cls=jsonschema.Draft202012Validator)
    [variant] = report["variants"]
    assert (
        report["exit_code"] == 3
        and variant["id"] == "default-cu130"
        and variant["status"] == "failed"
    )
    assert variant["error"]["kind"] == "build"
    assert variant["error"]["diagnostics"][0] == {"file": str(tmp_path / "csrc" / "bad.cu"), "line": 4,
        "column": None, "severity": "error", "message": 'identifier "undefined_thing" is undefined'}  # fmt: skip


def test_missing_arch_in_the_binary_fails_the_build(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Simulate nvcc flags that lose an arch: the fatbin check must refuse the wheel. One small
    kernel under the payload's extension name (the check reads the binary, whatever it holds)."""
    from wheelforge.cli.app import main

    project = tmp_path / "project"
    (project / "pkg" / "wheelforge_kernels").mkdir(parents=True)
    (project / "pkg" / "wheelforge_kernels" / "__init__.py").write_text("")
    (project / "csrc").mkdir()
    (project / "csrc" / "scale.cu").write_text(
        "__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }\n"
        'extern "C" void launch(float* x) { scale<<<1, 32>>>(x, 2.0f); }\n'
    )
    (project / "matrix.yaml").write_text(
        "package: {name: one-kernel, version: '1.0', packages: [pkg/wheelforge_kernels]}\n"
        "extension: {name: wheelforge_kernels._C, sources: [csrc/scale.cu]}\n"
        "torch: '>=2.10'\n"
    )

    real = ArchSet.gencode

    def drop_sm90_sass(self: ArchSet) -> str:
        return shlex.join(f for f in shlex.split(real(self)) if not f.endswith("code=sm_90"))

    monkeypatch.setattr(ArchSet, "gencode", drop_sm90_sass)
    monkeypatch.chdir(project)
    code = main(
        [
            "build",
            "--archs",
            "8.0 9.0+PTX",
            "--out",
            str(tmp_path / "out"),
            "--build-dir",
            str(tmp_path / "build"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 4  # a verification failure
    assert "wheelforge_kernels/_C.abi3.so lacks SASS sm_90" in err
    assert not (tmp_path / "out").exists()  # nothing published, and no empty folder made


def test_report_progress_and_size_budget(first_build: Run, project: Path, tmp_path: Path) -> None:
    """The first build printed a line per finished job with its time (no terminal, no redraw);
    a rebuild's report validates against the shipped schema and has each arch's sizes; a tiny
    budget fails with exit 4, naming the largest arch entries, and publishes nothing."""
    assert re.search(
        r"^  \[\d+/\d+\] NVCC kernels/csrc/norm_cuda\.cu \d+\.\ds$", first_build.err, re.M
    )
    wheel = only_wheel(project / "dist")
    # the whole path, named from the working folder (the project) as the summary names a wheel
    # below it: `dist/<name>.whl`, which fits beside its label at 80 columns
    assert f"wheel {wheel.relative_to(project)}\n" in first_build.out
    run = wheelforge("build", "--archs", ARCHS, "--report", "-", "--quiet", cwd=project)
    assert run.code == 0, run.err
    report = json.loads(run.out)
    jsonschema.validate(report, packaged_schema(), cls=jsonschema.Draft202012Validator)
    [variant] = report["variants"]
    assert variant["wheel"]["path"] == str(wheel) and variant["status"] == "up-to-date"
    sizes = {(c["kind"], c["arch"]): c for c in variant["size"]["contributions"]}
    assert set(sizes) == {("sass", "sm_75"), ("sass", "sm_90"), ("ptx", "compute_90")}
    assert all(c["stored"] > 0 and c["uncompressed"] >= c["stored"] for c in sizes.values())
    assert {e["arch"] for b in variant["binaries"] for e in b["fatbins"]} == {
        "sm_75",
        "sm_90",
        "compute_90",
    }

    out = tmp_path / "out"
    small = wheelforge("build", "--archs", ARCHS, "--size-budget", "100KiB", "--out", out,
                       "--report", tmp_path / "small.json", cwd=project)  # fmt: skip
    assert small.code == 4, small.err
    assert not out.exists()  # nothing published, and no empty folder made
    [failed] = json.loads((tmp_path / "small.json").read_text())["variants"]
    assert failed["status"] == "failed" and failed["error"]["kind"] == "size-budget"
    top = failed["size"]["contributions"][0]  # measured: the bytes each arch takes in the wheel
    assert 0 < top["in_wheel"] < top["stored"] or top["compression"] != "none"
    assert (
        f"over its size budget of 100.0 KiB; nothing was published; largest: {top['arch']}"
        in small.err
    )
    assert "drop SASS sm_75 from the arch set: saves" in small.err
    assert "nvcc-flags: [--compress-mode=size]: saves" in small.err


def test_dry_run_prints_the_commands_and_builds_nothing(project: Path, tmp_path: Path) -> None:
    run = wheelforge("build", "--archs", ARCHS, "--dry-run", "--build-dir", tmp_path / "b",
                     "--out", tmp_path / "o", cwd=project)  # fmt: skip
    assert run.code == 0, run.err
    assert "sm75-90ptx-cu130: arch set sm75-90ptx (7.5 9.0+PTX)" in run.out
    nvcc = [ln for ln in run.out.splitlines() if "activation_cuda.cu" in ln and "nvcc" in ln]
    assert len(nvcc) == 1 and "-gencode=arch=compute_90,code=compute_90" in nvcc[0]
    assert not (tmp_path / "b").exists() and not (tmp_path / "o").exists()
