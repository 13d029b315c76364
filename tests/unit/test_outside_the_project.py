"""Nothing outside the project is packed (issue 32): a symlink (or a ``../`` path) leading out of
the project is refused in one line naming the key and the link, for each place that puts a file
into a wheel or an sdist: ``package.modules``, ``package.packages``, the readme, the license
files, the sdist's members. A link inside the project that stays inside is followed. And
build.toml's ``name`` cannot make init write outside the project."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.adoption import adopt as init
from wheelforge.adoption.doors import buildtoml
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import ConfigError, WheelforgeError
from wheelforge.planning import selection

from .conftest import GOOD_MATRIX
from .fakes import built_contents, plan_for

BUILD_TOML = """\
[general]
name = "my-act"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.act]
backend = "cuda"
depends = ["torch"]
src = ["act/act.cu"]
"""


def kernel_project(root: Path) -> None:
    """A kernel-builder project (build.toml, its sources and package folder)."""
    for name in ("torch-ext/torch_binding.cpp", "act/act.cu", "torch-ext/my_act/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("// x\n")
    (root / "build.toml").write_text(BUILD_TOML)


Project = Callable[..., Path]


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside the project (the project is tmp_path)."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "id_rsa.py").write_text("PRIVATE = 'key'\n")
    return outside / "id_rsa.py"


def wheel_members(matrix_path: Path, tmp_path: Path) -> list[str]:
    return [arc for arc, _ in built_contents(plan_for(load_matrix(matrix_path), tmp_path)).files]


def with_modules(text: str, *modules: str) -> str:
    return text.replace(
        "  packages: [demo_ops]", f"  packages: [demo_ops]\n  modules: [{', '.join(modules)}]"
    )


def test_a_module_linked_out_of_the_project_is_refused_naming_the_key_and_link(
    project: Project, tmp_path: Path, secret: Path
) -> None:
    (tmp_path / "helpers.py").symlink_to(secret)
    with pytest.raises(ConfigError) as refused:
        load_matrix(project(with_modules(GOOD_MATRIX, "helpers.py")))
    message = refused.value.message
    assert (
        "package.modules: " in message
        and f"{tmp_path / 'helpers.py'} is a symbolic link" in message
    )
    assert str(secret) in message and "outside the project" in message
    assert len(message.splitlines()) == 1
    (tmp_path / "helpers.py").unlink()
    (tmp_path / "ok.py").write_text("")
    up = f"../{secret.parent.name}/id_rsa.py"  # no link: a path that leaves the project
    with pytest.raises(
        ConfigError, match=r"package.modules: .*id_rsa.py leads to .*outside the project"
    ):
        load_matrix(project(with_modules(GOOD_MATRIX, "ok.py", up)))


def test_a_module_linked_inside_the_project_ships_under_its_own_name(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "real_name.py").write_text("X = 1\n")
    (tmp_path / "helpers.py").symlink_to(tmp_path / "lib" / "real_name.py")
    members = wheel_members(project(with_modules(GOOD_MATRIX, "helpers.py")), tmp_path)
    assert "helpers.py" in members and "real_name.py" not in members


def test_a_package_folder_linked_out_of_the_project_is_refused(
    project: Project, tmp_path: Path, secret: Path
) -> None:
    (secret.parent / "__init__.py").write_text("")
    (tmp_path / "stolen").symlink_to(secret.parent)
    text = GOOD_MATRIX.replace("packages: [demo_ops]", "packages: [demo_ops, stolen]")
    with pytest.raises(ConfigError, match=r"package.packages: .*stolen is a symbolic link to "):
        load_matrix(project(text))


def pyproject(root: Path, extra: str) -> None:
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "demo-ops"\nversion = "1.2.0"\n{extra}\n'
    )


@pytest.mark.parametrize(
    ("extra", "link", "key"),
    [
        ('readme = "README.md"', "README.md", "readme"),
        ('readme = {file = "README.md", content-type = "text/markdown"}', "README.md", "readme"),
        ('license = {file = "LICENSE"}', "LICENSE", "license"),
        ('license-files = ["LICENSE*"]', "LICENSE.txt", "license-files"),
        ('license-files = ["licenses/*"]', "licenses", "license-files"),
    ],
)
def test_a_readme_or_license_linked_out_of_the_project_is_refused(
    project: Project, tmp_path: Path, secret: Path, extra: str, link: str, key: str
) -> None:
    (tmp_path / link).symlink_to(secret.parent if link == "licenses" else secret)
    pyproject(tmp_path, extra)
    with pytest.raises(ConfigError) as refused:
        load_matrix(project(GOOD_MATRIX.replace("  name: demo-ops\n  version: 1.2.0\n", "")))
    message = str(refused.value)
    assert f"[project] {key}: " in message and "outside the project" in message
    assert str(tmp_path / link) in message and str(secret.parent) in message


def test_a_readme_and_license_linked_inside_the_project_are_read(
    project: Project, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "intro.md").write_text("# The demo\n")
    (tmp_path / "docs" / "COPYING").write_text("MIT\n")
    (tmp_path / "README.md").symlink_to(tmp_path / "docs" / "intro.md")
    (tmp_path / "LICENSE").symlink_to(tmp_path / "docs" / "COPYING")
    pyproject(tmp_path, 'readme = "README.md"\nlicense-files = ["LICENSE"]')
    path = project(GOOD_MATRIX.replace("  name: demo-ops\n  version: 1.2.0\n", ""))
    matrix = load_matrix(path)
    assert matrix.package.description == "# The demo\n"
    assert "demo_ops-1.2.0.dist-info/licenses/LICENSE" in wheel_members(path, tmp_path)


def test_a_default_license_file_linked_out_of_the_project_is_refused(
    project: Project, tmp_path: Path, secret: Path
) -> None:
    """No license-files given: setuptools' default globs (LICEN[CS]E*, COPYING*, ...) pick
    LICENSE up, so a LICENSE linked to elsewhere is refused as an explicit one is."""
    (tmp_path / "COPYING").symlink_to(secret)
    with pytest.raises(ConfigError) as refused:
        load_matrix(project())
    assert "license file COPYING (the default globs LICEN[CS]E*, COPYING*" in refused.value.message
    assert f"{tmp_path / 'COPYING'} is a symbolic link to {secret}" in refused.value.message


@pytest.mark.parametrize("member", ["README.md", "README.rst", "csrc/extra.cu", "tests/test_x.py"])
def test_an_sdist_member_linked_out_of_the_project_is_refused(
    project: Project, tmp_path: Path, secret: Path, member: str
) -> None:
    text = GOOD_MATRIX
    if member == "tests/test_x.py":
        (tmp_path / "tests").mkdir()
        text += "tests:\n  path: tests\n"
    path = project(text)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / member).symlink_to(secret)
    with pytest.raises(ConfigError) as refused:
        selection.sdist_files(load_matrix(path), tmp_path)
    message = refused.value.message
    assert message.startswith(
        f"sdist member {member}: {tmp_path / member} is a symbolic link to {secret}"
    )
    (tmp_path / member).unlink()
    (tmp_path / member).symlink_to(tmp_path / "csrc" / "ops.h")  # inside: carried by content
    assert member in dict(selection.sdist_files(load_matrix(path), tmp_path))


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/b", ".."])
def test_a_build_toml_name_that_is_a_path_is_refused_before_anything_is_written(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    kernel_project(root)
    text = (root / "build.toml").read_text().replace('name = "my-act"', f'name = "{name}"')
    (root / "build.toml").write_text(text)
    with pytest.raises(
        ConfigError, match=r"build.toml: \[general\] name .* is not a Python package name"
    ):
        buildtoml.read_build_toml(root)
    request = init.InitRequest(root=root, python=Path(sys.executable))
    with pytest.raises(WheelforgeError):
        init.init_project(request)
    written = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    assert written == {p.relative_to(tmp_path) for p in root.rglob("*") if p.is_file()}
    assert not (root / "matrix.yaml").exists() and not any(tmp_path.rglob("_ops.py"))
