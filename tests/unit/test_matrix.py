from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError

from .conftest import GOOD_MATRIX

Project = Callable[..., Path]


def error_of(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    assert err.value.exit_code == 2
    return err.value


def all_lines(err: ConfigError) -> str:
    return "\n".join([*err.problems, err.message, err.details or ""])


def test_good_matrix(project: Project) -> None:
    m = load_matrix(project())
    assert m.package.name == "demo-ops" and m.package.version == "1.2.0"
    assert m.package.wheel_name == "demo_ops"
    assert [p.name for p in m.package.packages] == ["demo_ops"]
    assert m.extension.name == "demo_ops._C" and m.extension.leaf == "_C"
    assert m.extension.package_path == "demo_ops"
    assert m.extension.module_init is True
    assert m.abi == "stable" and m.python_abi == "cp310"
    assert m.limited_api_macro == "0x030a0000"
    assert m.requires_python == ">=3.10"
    assert m.torch.target == (2, 10)
    assert [a.name for a in m.arch_sets] == ["default"]
    assert str(m.arch_sets[0]) == "8.0 9.0+PTX"


def test_the_repositorys_own_matrix_loads() -> None:
    repo = Path(__file__).resolve().parents[2]
    m = load_matrix(repo / "matrix.yaml")
    assert m.extension.name == "wheelforge_kernels._C"
    assert m.torch.target == (2, 10)


def test_unknown_key_names_line_and_suggests(project: Project) -> None:
    text = GOOD_MATRIX.replace("arch-sets:", "arch-set:")
    err = error_of(project(text))
    text_all = all_lines(err)
    assert (
        "matrix.yaml:11: the top level: unknown key 'arch-set'; did you mean 'arch-sets'?"
        in text_all
    )
    # arch-sets itself is optional (--archs or TORCH_CUDA_ARCH_LIST may give the archs).
    assert "needs 'arch-sets'" not in text_all


def test_every_error_is_reported_at_once(project: Project) -> None:
    text = (
        GOOD_MATRIX.replace("version: 1.2.0", "version: one")
        .replace("include-dirs: [csrc]", "include-dir: [csrc]")
        .replace('"8.0 9.0+PTX"', '"8.0 sm_90"')
    )
    err = error_of(project(text))
    # Each its own error line, in the file's line order; the message counts them.
    assert len(err.problems) == 3, err.problems
    assert err.message.endswith("matrix.yaml: 3 problems, above in line order")
    assert "matrix.yaml:3: package.version 'one' is not a PEP 440 version" in err.problems[0]
    assert (
        "matrix.yaml:9: extension: unknown key 'include-dir'; did you mean 'include-dirs'?"
        in err.problems[1]
    )
    assert (
        "matrix.yaml:12: arch-sets.default: 'sm_90' is not a CUDA arch; did you mean '9.0'?"
        in err.problems[2]
    )


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        (
            "packages: [demo_ops]",
            "packages: [nowhere]",
            "package.packages: 'nowhere' is not a folder",
        ),
        ("packages: [demo_ops]", "packages: [csrc]", "'csrc' has no __init__.py"),
        ("name: demo_ops._C", "name: demo-ops._C", "must be a module name"),
        ("name: demo_ops._C", "name: other._C", "is not inside any of package.packages (demo_ops)"),
        ("[csrc/*.cpp, csrc/*.cu]", "[csrc/*.cpp, src/*.cu]", "'src/*.cu' matches no file"),
        ("[csrc/*.cpp, csrc/*.cu]", "[csrc/*]", "not a source"),
        ("[csrc/*.cpp, csrc/*.cu]", "[]", "extension.sources is empty; list the files"),
        ('torch: ">=2.10"', 'torch: "<2.15"', "no lower bound"),
        ('torch: ">=2.10"', 'torch: ">=2.8"', "the stable ABI needs torch >= 2.9"),
        ('torch: ">=2.10"', "torch: {min: 2.10}", "must be a string"),
        ("summary: demo", "summary: [a, b]", "package.summary must be a string, got a list"),
        ("name: demo-ops", "name: demo ops!", "not a valid distribution name"),
        ('default: "8.0 9.0+PTX"', 'Default: "8.0"', "name 'Default' must be lower-case"),
        (
            "arch-sets:\n  default:",
            "abi: unstable\narch-sets:\n  default:",
            "builds once per torch version, so list them",
        ),
        (
            "arch-sets:\n  default:",
            "python-abi: py3\narch-sets:\n  default:",
            "python-abi must name",
        ),
    ],
)
def test_field_errors(project: Project, old: str, new: str, fragment: str) -> None:
    text = GOOD_MATRIX.replace(old, new)
    assert text != GOOD_MATRIX
    err = error_of(project(text))
    assert fragment in all_lines(err)
    assert err.message.startswith(str(Path("matrix.yaml"))) or "matrix.yaml" in err.message


def test_yaml_syntax_error_has_line(project: Project) -> None:
    err = error_of(project(GOOD_MATRIX + "extra: [unclosed\n"))
    assert "invalid YAML" in err.message and "matrix.yaml:" in err.message


def test_missing_and_empty_file(tmp_path: Path) -> None:
    assert "was not found" in error_of(tmp_path / "matrix.yaml").message
    (tmp_path / "matrix.yaml").write_text("")
    assert "is empty" in error_of(tmp_path / "matrix.yaml").message


def test_arch_sets_forms(project: Project) -> None:
    single = GOOD_MATRIX.replace('arch-sets:\n  default: "8.0 9.0+PTX"', 'arch-sets: "Hopper"')
    assert [str(a) for a in load_matrix(project(single)).arch_sets] == ["9.0+PTX"]
    listed = GOOD_MATRIX.replace(
        'default: "8.0 9.0+PTX"', 'default: ["8.0", "9.0a"]\n  big: "Blackwell"'
    )
    m = load_matrix(project(listed))
    assert [(a.name, str(a)) for a in m.arch_sets] == [
        ("default", "8.0 9.0a"),
        ("big", "10.0 10.3 12.0 12.1+PTX"),
    ]


def test_torch_list_and_dependencies(project: Project) -> None:
    text = GOOD_MATRIX.replace('torch: ">=2.10"', 'torch: ["2.11", "2.13"]').replace(
        "summary: demo", "summary: demo\n  dependencies: [numpy>=1.26]\n  requires-python: '>=3.11'"
    )
    m = load_matrix(project(text))
    assert m.torch.target == (2, 11)
    assert m.package.dependencies == ("numpy>=1.26",)
    assert m.requires_python == ">=3.11"
    bad = GOOD_MATRIX.replace("summary: demo", "summary: demo\n  dependencies: [torch>=2.1]")
    assert "leave torch out" in all_lines(error_of(project(bad)))


def test_version_numbers_stay_as_written(project: Project) -> None:
    text = GOOD_MATRIX.replace("version: 1.2.0", "version: 1.10").replace('">=2.10"', "2.10")
    m = load_matrix(project(text))
    assert m.package.version == "1.10"
    assert m.torch.target == (2, 10)
