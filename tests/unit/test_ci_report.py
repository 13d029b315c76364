"""The build report and its schema, GitHub Actions output, and exit codes by class, in-process
(as cibuildwheel tests its GitHub output: with the environment variables set)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest

from wheelforge.binaries.inspection import inspect_paths
from wheelforge.binaries.sizecheck import check_size
from wheelforge.binaries.verify import check_binary
from wheelforge.build.results import BuildReport, VariantFailure, VariantResult
from wheelforge.cli import ci
from wheelforge.cli.app import main
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.settings import Flags, resolve
from wheelforge.documents.build_report_schema import KIND, build_report
from wheelforge.documents.kinds import document_text as report_json
from wheelforge.foundation import log
from wheelforge.foundation.diagnostics import Diagnostic, parse_compiler_output
from wheelforge.foundation.errors import BuildError

Project = Callable[..., Path]
packaged_schema, schema = KIND.packaged_schema, KIND.schema
DATA = Path(__file__).parents[1] / "data" / "fatbin"
WHEEL = "demo_ops-1.2.0-cp310-abi3-manylinux_2_34_x86_64.whl"


@pytest.fixture(autouse=True)
def _reset_log() -> object:
    yield
    log.set_ci(None)
    log.set_quiet(False)


def test_packaged_schema_is_the_generated_one() -> None:
    """Regenerate with: python -m wheelforge.documents.schemas"""
    assert packaged_schema() == schema()
    jsonschema.Draft202012Validator.check_schema(packaged_schema())


def _result(tmp_path: Path) -> BuildReport:
    arch_set = ArchSet("default", parse_arch_list("8.0 9.0a+PTX", source="test"))
    binaries = tuple(inspect_paths([DATA / "sm80_sm90a_ptx90.so"]))
    ok = VariantResult(
        variant_id="default-cu130", arch_set=arch_set, toolkit="13.0.88", torch="2.13.0+cpu",
        wheel=tmp_path / "dist" / WHEEL, wheel_size=4000, sha256="0" * 64, sources=3,
        compiled=("NVCC", "CXX"), reused=False, binaries=binaries,
        arch_checks=tuple(check_binary(b, arch_set) for b in binaries), abi_checks=(),
        size=check_size(wheel_size=4000, budget=10**8, binaries=binaries, toolkit=(13, 0), nvcc_flags=()),
        stages=(("compile", 12.5), ("package", 1.0)), seconds=13.5,
    )  # fmt: skip
    error = BuildError(
        "variant hopper-cu130: compiling csrc/k.cu failed",
        diagnostics=(Diagnostic(file=str(tmp_path / "csrc" / "k.cu"), line=7, message='expected a ";"'),),
    )  # fmt: skip
    bad = VariantFailure(variant_id="hopper-cu130", arch_set=arch_set, toolkit="13.0.88", torch="2.13.0+cpu",
                         error=error, size=None, stages=(("compile", 2.0),), seconds=2.0)  # fmt: skip
    return BuildReport(matrix=tmp_path / "matrix.yaml", target_version=(2, 10), built_against="2.13.0+cpu",
                       variants=(ok,), failures=(bad,), seconds=16.0)  # fmt: skip


def test_a_failed_build_report_validates_and_names_the_variant(
    tmp_path: Path, project: Project
) -> None:
    settings = resolve(Flags(matrix=project()))
    report = build_report(settings=settings, result=_result(tmp_path), error=None, seconds=16.0)
    doc = json.loads(report_json(report))
    jsonschema.validate(doc, packaged_schema(), cls=jsonschema.Draft202012Validator)
    assert doc["schema_version"] == 1 and doc["status"] == "failed" and doc["exit_code"] == 3
    built, failed = doc["variants"]
    assert built["wheel"]["tags"] == ["cp310-abi3-manylinux_2_34_x86_64"]
    assert {(c["arch"], c["stored"] > 0) for c in built["size"]["contributions"]} == {
        ("sm_80", True), ("sm_90a", True), ("compute_90", True)}  # fmt: skip
    compiled = {
        k: built["compile"][k] for k in ("sources", "compiled", "up_to_date", "generated", "cache")
    }
    assert compiled == {"sources": 3, "compiled": 2, "up_to_date": 1, "generated": 0, "cache": None}
    assert built["compile"]["jobs"] == [] and built["compile"]["peak_memory"] is None
    assert failed["id"] == "hopper-cu130" and failed["status"] == "failed"
    assert failed["error"]["kind"] == "build" and failed["error"]["diagnostics"][0]["line"] == 7
    # A report that breaks the schema is caught.
    doc["variants"][0]["status"] = "half-built"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, packaged_schema(), cls=jsonschema.Draft202012Validator)


def test_step_summary_markdown(
    tmp_path: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = resolve(Flags(matrix=project()))
    report = build_report(settings=settings, result=_result(tmp_path), error=None, seconds=16.0)
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    assert ci.append_step_summary(ci.step_summary(report)) == summary
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ wheelforge: demo-ops 1.2.0")
    assert (
        f"| default-cu130 | built | `{tmp_path / 'dist' / WHEEL}` | 3.9 KiB | 95.4 MiB | 13.5 s |"
        in text
    )
    assert "| `sm80_sm90a_ptx90.so` | SASS | sm_90a |" in text.replace(str(DATA) + "/", "")
    assert "| hopper-cu130 | failed |" in text and "| compile | package | total |" in text
    assert "- **hopper-cu130**: variant hopper-cu130: compiling csrc/k.cu failed" in text
    assert '  - `csrc/k.cu:7`: expected a ";"' in text


def test_annotations_are_escaped_and_workspace_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    diag = Diagnostic(
        file=str(tmp_path / "csrc" / "a,b.cu"), line=3, column=9, message="50% off\nnext"
    )
    assert log.annotation(diag) == "::error file=csrc/a%2Cb.cu,line=3,col=9::50%25 off%0Anext"
    assert log.annotation(Diagnostic(file="", severity="warning", message="w")) == "::warning::w"


def test_compiler_output_is_parsed() -> None:
    text = (
        '/p/csrc/k.cu(12): error: identifier "undefined_thing" is undefined\n'
        "/p/csrc/ops.cpp:4:10: fatal error: nope.h: No such file or directory\n"
        "/p/csrc/ops.cpp:9:1: warning: unused variable 'x' [-Wunused-variable]\n"
        "ninja: build stopped: subcommand failed.\n"
    )
    found = parse_compiler_output(text)
    assert [(d.file, d.line, d.column, d.severity) for d in found] == [
        ("/p/csrc/k.cu", 12, None, "error"), ("/p/csrc/ops.cpp", 4, 10, "error"),
        ("/p/csrc/ops.cpp", 9, 1, "warning")]  # fmt: skip


def test_matrix_errors_become_annotations_with_lines(
    capsys: pytest.CaptureFixture[str], project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    path = project("package: 3\nextension: {}\ntorch: '>=2.10'\narch-sets: '9.0'\nextra: 1\n")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(path.parent))
    assert main(["build", "--matrix", str(path)]) == 2
    err = capsys.readouterr().err
    assert "::error file=matrix.yaml,line=1::package must be a mapping" in err
    assert "::error file=matrix.yaml,line=5::the top level: unknown key 'extra'" in err


def test_warnings_are_annotated_in_github_mode(capsys: pytest.CaptureFixture[str]) -> None:
    log.set_ci("github")
    log.warning("replacing dist/x.whl")
    assert "::warning::replacing dist/x.whl" in capsys.readouterr().err
    log.set_ci(None)
    log.warning("quiet")
    assert "::warning" not in capsys.readouterr().err


def test_groups_only_in_github_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with log.group("v: compile"):
        log.info("inside")
    assert "::group::" not in capsys.readouterr().err
    log.set_ci("github")
    with log.group("v: compile"):
        log.info("inside")
    assert capsys.readouterr().err.splitlines() == ["::group::v: compile", "inside", "::endgroup::"]


def test_a_configuration_error_still_writes_the_report(
    capsys: pytest.CaptureFixture[str], project: Project, tmp_path: Path
) -> None:
    path = project("package: 3\nextension: {}\ntorch: '>=2.10'\narch-sets: '9.0'\n")
    assert main(["build", "--matrix", str(path), "--report", str(tmp_path / "r.json")]) == 2
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, packaged_schema(), cls=jsonschema.Draft202012Validator)
    assert doc["status"] == "failed" and doc["exit_code"] == 2 and doc["matrix"] is None
    assert doc["error"]["kind"] == "configuration"
    assert doc["error"]["diagnostics"][0] == {"file": str(path), "line": 1, "column": None, "severity": "error",
                                              "message": "package must be a mapping, got '3'"}  # fmt: skip


@pytest.mark.parametrize("spelling", ["plain", "dot", "symlink", "hardlink", "pyproject"])
def test_report_never_replaces_the_matrix_it_reads(
    capsys: pytest.CaptureFixture[str],
    project: Project,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spelling: str,
) -> None:
    """Issue 32: ``--report matrix.yaml`` replaced the matrix with the report. Refused before
    any work, however the matrix is spelled: ``./``, a symlink to it, a hard link to it (and
    pyproject.toml beside it, which the build reads too)."""
    import os

    path = project()
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["wheelforge"]\n')
    before = {p.name: p.read_bytes() for p in (path, tmp_path / "pyproject.toml")}
    monkeypatch.chdir(tmp_path)
    report = {
        "plain": str(path),
        "dot": "./matrix.yaml",
        "symlink": "report.json",
        "hardlink": "report.json",
        "pyproject": "pyproject.toml",
    }[spelling]
    if spelling == "symlink":
        (tmp_path / "report.json").symlink_to(path)
    elif spelling == "hardlink":
        os.link(path, tmp_path / "report.json")

    def no_build(*_args: object) -> None:
        raise AssertionError("the build ran")

    monkeypatch.setattr("wheelforge.configuration.settings.resolve", no_build)
    assert main(["build", "--matrix", "matrix.yaml", "--report", report]) == 2
    err = capsys.readouterr().err
    assert f"--report {Path(report)}: that is " in err and "which this command reads" in err
    assert len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in (path, tmp_path / "pyproject.toml")} == before
