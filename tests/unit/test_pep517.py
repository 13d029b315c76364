"""The PEP 517 backend's decisions, without building: config settings, the arch list of the one
wheel, the narrowed matrix, the local GPU's answer, the metadata and the build requirements."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from wheelforge import build_meta
from wheelforge.build import pep517
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError, VerificationError
from wheelforge.toolchain import gpu

from . import fakes
from .conftest import GOOD_MATRIX

Project = Callable[..., Path]


def never() -> str | None:
    raise AssertionError("the local GPU must not be asked")


def test_arch_list_precedence() -> None:
    env = {"TORCH_CUDA_ARCH_LIST": "8.0"}
    assert pep517.choose_archs(env, "9.0", never) == ("8.0", "TORCH_CUDA_ARCH_LIST")
    assert pep517.choose_archs({}, "9.0", never) == ("9.0", "-C archs")
    assert pep517.choose_archs({"TORCH_CUDA_ARCH_LIST": ""}, None, lambda: "9.0") == (
        "9.0",
        "the local GPU",
    )
    assert pep517.choose_archs({}, None, lambda: None) == (None, "the matrix's first arch set")


def test_capabilities_from_torch_or_nvidia_smi() -> None:
    assert gpu.parse_capabilities("9.0 9.0\n") == "9.0"
    assert gpu.parse_capabilities("12.0\n8.6\n9.0\n") == "8.6 9.0 12.0"
    assert gpu.parse_capabilities("") is None
    assert gpu.parse_capabilities("[N/A]\nNo devices were found\n") is None


def test_one_variant_matrix(project: Project) -> None:
    text = GOOD_MATRIX.replace(
        '  default: "8.0 9.0+PTX"', '  default: "8.0 9.0+PTX"\n  hopper: "9.0a"'
    )
    matrix = load_matrix(project(text + "wheel-variants: {}\n"))
    assert matrix.variant_wheels
    first = pep517.one_variant_matrix(matrix, None, "x")
    assert [a.name for a in first.arch_sets] == ["default"]
    assert not first.variant_wheels  # pip takes no variant wheel
    local = pep517.one_variant_matrix(matrix, "8.6", "the local GPU")
    assert [str(a) for a in local.arch_sets] == ["8.6"]
    with pytest.raises(ConfigError, match="-C archs"):
        pep517.one_variant_matrix(matrix, "8.6 banana", "-C archs")


def test_an_arch_list_from_the_environment_needs_no_arch_sets_in_the_matrix(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip wheel with TORCH_CUDA_ARCH_LIST (or -C archs) of a matrix that names no arch-sets, as
    `wheelforge build` takes it: the list given is the wheel's."""
    matrix = project(GOOD_MATRIX.split("arch-sets:")[0])
    monkeypatch.setattr(pep517.toolkit, "discover", lambda cache: [fakes.toolkit()])
    monkeypatch.setattr(pep517.gpu, "local_capabilities", lambda python: None)  # no GPU here
    options = pep517.BackendOptions(matrix=matrix)
    for env, config, source in (
        ({"TORCH_CUDA_ARCH_LIST": "9.0"}, None, "TORCH_CUDA_ARCH_LIST"),
        ({}, "9.0", "-C archs"),
    ):
        options = dataclasses.replace(options, archs=config)
        settings = pep517.backend_settings(options, tmp_path / "out", env=env)
        assert [str(s) for a in settings.matrix.arch_sets for s in a.specs] == ["9.0"]
        assert settings.arch_source == source
    with pytest.raises(ConfigError, match="names no archs"):
        pep517.backend_settings(dataclasses.replace(options, archs=None), tmp_path / "out", env={})


def test_config_settings(project: Project) -> None:
    root = project().parent
    options = pep517.parse_config_settings({"archs": "8.0", "offline": "true", "jobs": "3",
                                            "build-dir": "b", "only": "default-cu130"}, root)  # fmt: skip
    assert options == pep517.BackendOptions(matrix=root / "matrix.yaml", archs="8.0",
                                            only="default-cu130", offline=True,
                                            build_dir=root / "b", jobs=3)  # fmt: skip
    with pytest.raises(
        ConfigError, match="-C arch: wheelforge.build_meta has no such setting; it takes archs:"
    ):
        pep517.parse_config_settings({"arch": "8.0"}, root)
    with pytest.raises(ConfigError, match="-C offline=maybe: write true or false"):
        pep517.parse_config_settings({"offline": "maybe"}, root)
    with pytest.raises(ConfigError, match="-C jobs=0"):
        pep517.parse_config_settings({"jobs": "0"}, root)
    with pytest.raises(ConfigError, match="-C archs was given 2 times"):
        pep517.parse_config_settings({"archs": ["8.0", "9.0"]}, root)


def test_matrix_from_pyproject(project: Project) -> None:
    root = project().parent
    (root / "pyproject.toml").write_text('[tool.wheelforge]\nmatrix = "sub/m.yaml"\n')
    assert pep517.parse_config_settings({}, root).matrix == root / "sub" / "m.yaml"
    assert pep517.parse_config_settings({"matrix": "x.yaml"}, root).matrix == root / "x.yaml"
    (root / "pyproject.toml").write_text("[tool.wheelforge]\nmatrix = 3\n")
    with pytest.raises(ConfigError, match="tool.wheelforge.matrix must be a path string"):
        pep517.parse_config_settings({}, root)


@pytest.mark.parametrize(
    ("pyproject", "needle"),
    [
        (
            '[tool]\nwheelforge = "text"\n',
            "tool.wheelforge must be a table ([tool.wheelforge]), not str",
        ),
        ("tool = 3\n", "tool.wheelforge must be a table ([tool.wheelforge]), not int"),
        ("[tool.wheelforge\n", "pyproject.toml could not be read: "),
        (b"\xff", "pyproject.toml could not be read: it is not UTF-8 text"),
    ],
)
def test_a_hostile_pyproject_is_one_line(
    project: Project, pyproject: str | bytes, needle: str
) -> None:
    """Issue 21: `[tool] wheelforge = "text"` was an AttributeError traceback."""
    root = project().parent
    path = root / "pyproject.toml"
    path.write_bytes(pyproject if isinstance(pyproject, bytes) else pyproject.encode())
    with pytest.raises(ConfigError) as caught:
        pep517.parse_config_settings({}, root)
    assert needle in caught.value.message and "\n" not in caught.value.message


@pytest.mark.parametrize("jobs", ["²", "٤", "9" * 5000, "-1", "1.5"])
def test_jobs_setting_is_ascii_digits_and_bounded(project: Project, jobs: str) -> None:
    """Issue 21: `-C jobs=²` passed isdigit() and failed int() with a traceback."""
    with pytest.raises(ConfigError, match="-C jobs=.*must be a positive whole number"):
        pep517.parse_config_settings({"jobs": jobs}, project().parent)


def test_metadata_without_compiling(project: Project, tmp_path: Path) -> None:
    options = pep517.BackendOptions(matrix=project())
    name = pep517.prepare_metadata(options, tmp_path / "meta")
    assert name == "demo_ops-1.2.0.dist-info"
    text = (tmp_path / "meta" / name / "METADATA").read_text()
    assert "Name: demo-ops\nVersion: 1.2.0\n" in text and "Requires-Dist: torch>=2.10" in text


def test_build_requirements(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    options = pep517.BackendOptions(matrix=project())
    assert pep517.torch_requires(options) == []  # this venv has torch
    monkeypatch.setattr(pep517.importlib.util, "find_spec", lambda name: None)
    assert pep517.torch_requires(options) == ["torch>=2.10"]


def test_hook_errors_are_one_line_and_an_exit_code(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project().parent)
    with pytest.raises(SystemExit) as exit_:
        build_meta.build_wheel("out", {"arch": "8.0"})
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: -C arch: wheelforge.build_meta has no such setting")
    assert "Traceback" not in err


def test_a_failed_wheel_is_one_line_not_a_traceback(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = VerificationError("variant sm80-cu130: the wheel lacks SASS sm_80")
    report = SimpleNamespace(variants=(), first_error=failure)
    monkeypatch.setattr(pep517, "backend_settings", lambda options, out: None)
    monkeypatch.setattr(pep517, "run_build", lambda settings: report)
    monkeypatch.chdir(project().parent)
    with pytest.raises(SystemExit) as exit_:
        build_meta.build_wheel("out", {})
    assert exit_.value.code == failure.exit_code
    err = capsys.readouterr().err
    assert err.startswith("error: variant sm80-cu130: the wheel lacks SASS sm_80")
    assert "Traceback" not in err


def test_a_wheel_must_have_the_metadata_prepared_for_it(tmp_path: Path) -> None:
    """Issue 21: build_wheel ignored a metadata_directory whose metadata differs from what it
    builds; PEP 517 says the wheel must have that metadata."""
    import zipfile

    wheel = tmp_path / "demo_ops-1.2.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("demo_ops-1.2.0.dist-info/METADATA", "Name: demo-ops\nVersion: 1.2.0\n")
    meta = tmp_path / "meta" / "demo_ops-1.2.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Name: demo-ops\nVersion: 1.2.0\n")
    pep517.same_metadata(wheel, meta)  # the same: fine
    pep517.same_metadata(wheel, meta.parent)  # a frontend passing the folder above: fine too
    (meta / "METADATA").write_text("Name: demo-ops\nVersion: 1.3.0\n")
    with pytest.raises(
        ConfigError, match=r"METADATA differs .*'Version: 1.2.0' where it said 'Version: 1.3.0'"
    ):
        pep517.same_metadata(wheel, meta)


def test_the_backend_names_its_own_settings_in_errors() -> None:
    """Issue 21: -C errors named CLI flags (--only) instead of -C only."""
    from wheelforge.planning import variants

    with pytest.raises(ConfigError, match="^-C only nope: no such variant"):
        variants.select([], ("nope",), flag="-C only")
