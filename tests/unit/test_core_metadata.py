"""METADATA as PyPI takes it (configuration/coremetadata.py, packaging/wheel.py): written
with no header folded, every field a matrix or pyproject.toml gives validated by packaging (what
twine and PyPI run) and by PyPI's own rules before anything compiles, and ``check``'s
pypi-metadata rule on wheels whose METADATA PyPI refuses."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.metadata import Metadata, parse_email

from tests.unit.conftest import GOOD_MATRIX
from tests.unit.fakes import plan_for, with_record
from wheelforge.binaries import abicheck
from wheelforge.cli.app import main
from wheelforge.configuration import coremetadata
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging import wheel

# The package sections `wheelforge init` wrote for two real projects (torch-sparse 0.6.18's
# setup.py from its PyPI sdist; nvdiffrast's setup.py): their summaries are over 70 characters,
# which main folded over two lines ("'summary' must be a single line").
TORCH_SPARSE = """\
package:
  name: torch_sparse
  version: 0.6.18
  summary: PyTorch Extension Library of Optimized Autograd Sparse Matrix Operations
  dependencies:
  - scipy
  authors:
  - Matthias Fey <matthias.fey@tu-dortmund.de>
  urls:
    Homepage: https://github.com/rusty1s/pytorch_sparse
  keywords:
  - pytorch
  - sparse
  - sparse-matrices
  - autograd
  packages: [demo_ops]
"""
NVDIFFRAST = """\
package:
  name: nvdiffrast
  version: 0.3.3
  summary: nvdiffrast - modular primitives for high-performance differentiable rendering
  dependencies: [numpy]
  authors: [Samuli Laine <slaine@nvidia.com>]
  urls: {Homepage: "https://github.com/NVlabs/nvdiffrast"}
  classifiers:
  - "Programming Language :: Python :: 3"
  - "Operating System :: OS Independent"
  packages: [demo_ops]
"""
REST = GOOD_MATRIX[GOOD_MATRIX.index("extension:") :]


def _metadata(project: Callable[[str], Path], package: str, tmp_path: Path) -> str:
    return wheel.metadata_text(plan_for(load_matrix(project(package + REST)), tmp_path))


@pytest.mark.parametrize("package", [TORCH_SPARSE, NVDIFFRAST], ids=["torch_sparse", "nvdiffrast"])
def test_a_long_summary_stays_one_line_and_pypi_takes_the_metadata(
    project: Callable[[str], Path], tmp_path: Path, package: str
) -> None:
    text = _metadata(project, package, tmp_path)
    summary = next(line for line in package.splitlines() if "summary:" in line).split(": ", 1)[1]
    assert len(summary) > 70
    assert f"Summary: {summary}\n" in text
    meta = Metadata.from_email(text, validate=True)  # what twine check and PyPI run
    assert meta.summary == summary
    assert coremetadata.problems(text) == ()


def test_every_field_reads_back_as_written(project: Callable[[str], Path], tmp_path: Path) -> None:
    """Long values, several authors, a multi-line License, non-ASCII, and a readme body with a
    line that starts with 'From ' all read back unchanged by packaging's parser."""
    url = "https://example.org/" + "long-path/" * 12
    package = f"""\
package:
  name: demo-ops
  version: 1.2.0
  summary: "Démo ops: {"a long summary " * 6}end"
  license: "Copyright (c) Ünïcode\\nAll rights reserved."
  authors: [Ann Example <ann@example.org>, Bob Example <bob@example.org>, Carl, Dee]
  urls: {{Homepage: "{url}", Bug Tracker: "https://example.org/issues"}}
  classifiers: ["Programming Language :: Python :: 3", "License :: OSI Approved :: MIT License"]
  keywords: [cuda, torch]
  packages: [demo_ops]
"""
    text = _metadata(project, package, tmp_path)
    raw, unparsed = parse_email(text)
    assert unparsed == {}
    assert raw["summary"].startswith("Démo ops: a long summary") and "\n" not in raw["summary"]
    assert raw["author"] == "Carl, Dee"  # one Author field, one Author-email: both single fields
    assert raw["author_email"] == "Ann Example <ann@example.org>, Bob Example <bob@example.org>"
    assert raw["project_urls"] == {"Homepage": url, "Bug Tracker": "https://example.org/issues"}
    assert raw["license"].splitlines()[0] == "Copyright (c) Ünïcode"
    assert coremetadata.problems(text) == ()
    body = "# demo\n\nFrom here on, the long description.\n"
    written = coremetadata.render(
        [("Metadata-Version", "2.1"), ("Name", "x"), ("Version", "1")], body
    )
    assert Metadata.from_email(written).description == body


BAD_FIELDS = [
    ("urls: {Homepage: \"https://example.org\\nX-Evil: 1\"}", "package.urls.Homepage", "one line"),
    ("authors: [\"Ann\\nX-Evil: 1\"]", "package.authors", "one line"),
    ("classifiers: [\"Programming Language :: Python :: 3\\nX: y\"]", "package.classifiers", "one line"),
    ("keywords: [\"a\\nb\"]", "package.keywords", "one line"),
    ("classifiers: [\"Programing Language :: Python :: 3\"]", "package.classifiers",
     "did you mean 'Programming Language :: Python :: 3'"),
    ("classifiers: [\"License :: OSI Approved :: Intel Open Source License\"]",
     "package.classifiers", "deprecated"),
    ("urls: {A label far longer than thirty-two chars: \"https://example.org\"}", "package.urls",
     "32 characters"),
    ("urls: {Homepage: \"example.org\"}", "package.urls.Homepage", "not an http(s) URL"),
    ("authors: [\"Ann <ann@>\"]", "package.authors", "not an email address"),
    (f"summary: \"{'x' * 513}\"", "package.summary", "at most 512"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "where", "said"), BAD_FIELDS)
def test_a_field_pypi_refuses_is_a_matrix_error_naming_it(
    project: Callable[[str], Path], line: str, where: str, said: str
) -> None:
    text = GOOD_MATRIX.replace("  summary: demo\n", f"  summary: demo\n  {line}\n")
    if line.startswith("summary:"):
        text = GOOD_MATRIX.replace("  summary: demo\n", f"  {line}\n")
    with pytest.raises(ConfigError) as caught:
        load_matrix(project(text))
    message = str(caught.value)
    assert "matrix.yaml:" in message and where in message and said in message, message


def test_a_pyproject_field_pypi_refuses_names_the_project_key(tmp_path: Path) -> None:
    (tmp_path / "demo_ops").mkdir()
    (tmp_path / "demo_ops" / "__init__.py").write_text("")
    (tmp_path / "matrix.yaml").write_text("extension: {name: demo_ops._C, sources: [x.cpp]}\n")
    (tmp_path / "x.cpp").write_text("")
    for key, value, said in (
        ("description", '"two\\nlines"', "[project] description"),
        ("classifiers", '["Not :: A :: Classifier"]', "[project] classifiers"),
        ("urls", '{Homepage = "ftp://example.org"}', "[project] urls"),
    ):
        (tmp_path / "pyproject.toml").write_text(
            f'[project]\nname = "demo-ops"\nversion = "1.0"\n{key} = {value}\n'
        )
        with pytest.raises(ConfigError, match="pyproject.toml") as caught:
            load_matrix(tmp_path / "matrix.yaml")
        assert said in str(caught.value), str(caught.value)


def _wheel(tmp_path: Path, metadata: str, name: str = "pkg-1.0-py3-none-any.whl") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("pkg-1.0.dist-info/METADATA", metadata)
    return with_record(path)


GOOD = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nSummary: {summary}\n"
FOLDED = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nSummary: first half\n second half\n"


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        (FOLDED, "Summary"),  # what main wrote for a summary over ~70 characters
        (GOOD.format(summary="s").replace("2.1", "3.0"), "Metadata-Version"),
        (GOOD.format(summary="s").replace("Name: pkg", "Name: -pkg-"), "Name"),
        (GOOD.format(summary="s").replace("Version: 1.0", "Version: one"), "Version"),
        (GOOD.format(summary="s") + "Classifier: Framework :: Nonesuch\n", "Classifier"),
        (GOOD.format(summary="s") + "Project-URL: Homepage\n", "Project-URL"),
        (GOOD.format(summary="s") + "Requires-Dist: x @ https://e.org/x.whl\n", "Requires-Dist"),
        # twine 6 refuses a 2.4 field under 2.2 (opt_einsum's hatchling wheels, 2025)
        (
            GOOD.format(summary="s").replace("2.1", "2.2") + "License-Expression: MIT\n",
            "License-Expression",
        ),
    ],
    ids=[
        "folded",
        "metadata-version",
        "name",
        "version",
        "classifier",
        "url",
        "direct-url",
        "license-expression-under-2.2",
    ],
)
def test_check_fails_a_wheel_whose_metadata_pypi_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], metadata: str, field: str
) -> None:
    path = _wheel(tmp_path, metadata)
    [check] = abicheck.check_wheel(path, torch=None, guards={})
    found = [v for v in check.violations if v.rule == "pypi-metadata"]
    assert found and found[0].severity == "error" and found[0].symbol == field, check.violations
    assert main(["check", str(path)]) == 4
    assert "PyPI refuses the upload" in " ".join(capsys.readouterr().err.split())


def test_check_passes_metadata_pypi_takes(tmp_path: Path) -> None:
    """A long one-line summary, a trove classifier, and setuptools' License-File under
    Metadata-Version 2.1 (years of released wheels: twine drops it from what it uploads)."""
    classifier = "Classifier: Programming Language :: Python :: 3\nLicense-File: LICENSE\n"
    path = _wheel(tmp_path, GOOD.format(summary="x " * 60) + classifier)
    checks = abicheck.check_wheel(path, torch=None, guards={})
    assert [v for c in checks for v in c.violations if v.rule == "pypi-metadata"] == []
    assert main(["check", str(path)]) == 0


def test_the_build_refuses_metadata_pypi_refuses_before_compiling(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """The whole METADATA is held to PyPI's rules with the plan, before any compile: a header
    the matrix reader has no key for (one pyproject-metadata wrote) is caught there too."""
    import dataclasses

    plan = plan_for(load_matrix(project()), tmp_path)
    package = dataclasses.replace(
        plan.wheel.package, extra_metadata=(("Classifier", "Framework :: Nonesuch"),)
    )
    bad = dataclasses.replace(plan, wheel=dataclasses.replace(plan.wheel, package=package))
    wheel.require_valid_metadata(plan, Path("matrix.yaml"))  # the good one passes
    with pytest.raises(ConfigError, match=r"matrix.yaml: package: the wheel's METADATA Classifier"):
        wheel.require_valid_metadata(bad, Path("matrix.yaml"))


def test_init_leaves_out_what_pypi_refuses_and_says_so(tmp_path: Path) -> None:
    """setup() metadata PyPI would refuse (a classifier it does not list, a URL that is no
    http(s) one, a two-line description) does not make init write a matrix its reader refuses:
    each is left out, or made one line, and said."""
    from wheelforge.adoption.record.captured import (
        CapturedBuild,
        CapturedExtension,
        CapturedSource,
        ProjectMetadata,
    )
    from wheelforge.adoption.writer.matrixfile import InitChoices, render

    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "__init__.py").write_text("")
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cu").write_text("// ops\n")
    meta = ProjectMetadata(
        name="demo",
        version="0.1",
        summary="Demo ops:\nfast ones",
        url="git@github.com:example/demo.git",
        project_urls=(("Docs", "https://example.org/docs"),),
        classifiers=("Programming Language :: Python :: 3", "Topic :: Nonesuch"),
        author="Ann",
        author_email="ann@example.org",
    )
    build = CapturedBuild(
        root=tmp_path,
        front_door="setup.py",
        extensions=(
            CapturedExtension(
                name="demo._C",
                kind="CUDAExtension",
                where="setup.py:1",
                sources=(CapturedSource(path="csrc/ops.cu"),),
            ),
        ),
        metadata=meta,
        packages=("demo",),
    )
    result = render(build, InitChoices(archs="9.0"))
    (tmp_path / "matrix.yaml").write_text(result.text)
    package = load_matrix(tmp_path / "matrix.yaml").package  # the reader takes it
    assert package.summary == "Demo ops: fast ones"
    assert package.classifiers == ("Programming Language :: Python :: 3",)
    assert package.urls == (("Docs", "https://example.org/docs"),)
    assert package.authors == ("Ann", "ann@example.org")  # Author, Author-email: setuptools'
    assert package.home_page is None
    done = " ".join(result.done)  # type: ignore[attr-defined]
    assert "classifiers: left 'Topic :: Nonesuch' out: it is not a trove classifier" in done
    assert (
        "home-page: left 'git@github.com:example/demo.git' out" in done
        and "summary: its line breaks made spaces" in done
    )
