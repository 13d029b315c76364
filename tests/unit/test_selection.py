"""One file selection (planning/selection.py, issue 34 item 5): the wheel's members are chosen
once, when the build is planned, by one walker under one set of rules that the sdist shares;
the packer writes what the plan lists, reads no folder, and fails in one line when a planned
member is not there."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from wheelforge.build import reuse
from wheelforge.build import variant as build
from wheelforge.build.compiling import Compiled
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import BuildError, ConfigError
from wheelforge.packaging import sdist, wheel
from wheelforge.planning import selection
from wheelforge.planning.selection import Member, ProjectFiles

from .conftest import GOOD_MATRIX
from .fakes import built_contents, plan_for, plan_inputs, toolkit

Project = Callable[..., Path]

DATA_MATRIX = GOOD_MATRIX.replace(
    "  packages: [demo_ops]\n",
    "  packages: [demo_ops]\n  package-data: ['tables/*', 'lib/*.so']\n  exclude: ['*_test.py']\n",
)


def data_project(project: Project, root: Path) -> Path:
    """demo_ops with package data, an excluded module, a vendored library (package data), an
    in-place build's stale extension, a link inside the project, and what no archive carries:
    VCS and tool folders, bytecode, sources that are not package data."""
    files = {
        "demo_ops/tables/a.txt": "a",
        "demo_ops/tables/deep/b.json": "{}",
        "demo_ops/lib/libvendored.so": "\x7fELF vendored",
        "demo_ops/_C.cpython-311-x86_64-linux-gnu.so": "stale in-place build",
        "demo_ops/sub/__init__.py": "",
        "demo_ops/x_test.py": "excluded",
        "demo_ops/notes.md": "not package data",
        "demo_ops/.git/config": "[core]",
        "demo_ops/tables/.hg/store": "x",
        "demo_ops/__pycache__/m.cpython-311.pyc": "junk",
        "demo_ops/tables/c.pyc": "junk",
        "demo_ops/meta.egg-info/PKG-INFO": "x",
        "shared.py": "X = 1\n",
        "LICENSE": "MIT\n",
        "pyproject.toml": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "demo_ops" / "inside.py").symlink_to(root / "shared.py")
    return project(DATA_MATRIX)


WHEEL_FILES = {
    "demo_ops/__init__.py": "module",
    "demo_ops/inside.py": "module",
    "demo_ops/sub/__init__.py": "module",
    "demo_ops/tables/a.txt": "package-data",
    "demo_ops/tables/deep/b.json": "package-data",
    "demo_ops/lib/libvendored.so": "package-data",
    "demo_ops-1.2.0.dist-info/licenses/LICENSE": "license",
}


def test_the_plan_lists_every_member_with_its_kind(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(data_project(project, tmp_path)), tmp_path)
    kinds = {m.path: m.kind for m in plan.wheel.members}
    dist_info = "demo_ops-1.2.0.dist-info"
    assert kinds == {
        **WHEEL_FILES,
        "demo_ops/_C.abi3.so": "binary",
        **{f"{dist_info}/{n}": "metadata" for n in ("METADATA", "WHEEL", "RECORD")},
        f"{dist_info}/sboms/wheelforge.cdx.json": "metadata",
        f"{dist_info}/wheelforge-build.json": "metadata",
    }
    assert [m.path for m in plan.wheel.members] == sorted(kinds)
    by_path = {m.path: m for m in plan.wheel.members}
    # The binary is the build's expected output, not a file of the project.
    assert by_path["demo_ops/_C.abi3.so"].source == plan.links[0].library
    assert by_path["demo_ops/inside.py"].source == tmp_path / "demo_ops" / "inside.py"
    assert by_path[f"{dist_info}/METADATA"].source is None


def test_the_sdist_carries_every_project_file_the_wheel_does(
    project: Project, tmp_path: Path
) -> None:
    """The sdist's walk is the wheel's: the same files left out, the same files taken (the
    vendored library too: a wheel built from the sdist has what one from the checkout has)."""
    matrix = load_matrix(data_project(project, tmp_path))
    plan = plan_for(matrix, tmp_path)
    files = dict(selection.sdist_files(matrix, tmp_path))
    from_project = [m for m in plan.wheel.members if m.kind in ("module", "package-data")]
    assert from_project and all(files[m.path] == m.source for m in from_project)
    assert files["LICENSE"] == tmp_path / "LICENSE"
    # What neither carries.
    for name in ("demo_ops/.git/config", "demo_ops/tables/.hg/store", "demo_ops/tables/c.pyc",
                 "demo_ops/__pycache__/m.cpython-311.pyc", "demo_ops/meta.egg-info/PKG-INFO",
                 "demo_ops/_C.cpython-311-x86_64-linux-gnu.so"):  # fmt: skip
        assert name not in files and name not in {m.path for m in plan.wheel.members}
    # The sdist carries the whole package folder but for build products; the wheel, its picks.
    assert "demo_ops/notes.md" in files and "demo_ops/x_test.py" in files


def test_one_walk_plans_every_variant_and_packing_walks_nothing(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = load_matrix(data_project(project, tmp_path))
    walked: list[Path] = []
    real = selection.walk

    def counted(folder: Path, **kwargs: object) -> Iterator[Path]:
        walked.append(folder)
        return real(folder, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(selection, "walk", counted)
    inputs = plan_inputs(matrix, tmp_path)
    assert walked == [tmp_path / "demo_ops"]  # one package folder, walked once
    plans = [
        plan_for(matrix, tmp_path, archs=archs, tk=toolkit(version), inputs=inputs)
        for archs, version in (("8.0", "13.0.88"), ("9.0", "12.8.93"))
    ]
    twin = plan_for(matrix, tmp_path, inputs=inputs.twin(tmp_path / "twin"))
    for plan in [*plans, twin]:
        wheel.pack(built_contents(plan), tmp_path / "out" / plan.variant.id)
    assert walked == [tmp_path / "demo_ops"]
    # The variants' wheels share the walk's files; each has its own build's shared object.
    shared = [[m for m in p.wheel.members if m.kind != "binary"] for p in (*plans, twin)]
    assert shared[0] == shared[1] == shared[2]
    binaries = {m.source for p in plans for m in p.wheel.members if m.kind == "binary"}
    assert binaries == {p.links[0].library for p in plans} and len(binaries) == 2


def test_a_file_made_after_planning_is_not_packed(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(data_project(project, tmp_path)), tmp_path)
    (tmp_path / "demo_ops" / "late.py").write_text("")
    (tmp_path / "demo_ops" / "tables" / "late.txt").write_text("matches package-data")
    made = wheel.pack(built_contents(plan), tmp_path / "out")
    with zipfile.ZipFile(made) as zf:
        names = set(zf.namelist())
    assert names == {m.path for m in plan.wheel.members}


def test_a_binary_the_build_did_not_make_fails_packing_in_one_line(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build ran but left no shared object where the plan expects it: the variant fails,
    naming the member and the file, and nothing is packed."""
    matrix = load_matrix(project())
    plan = plan_for(matrix, tmp_path)
    monkeypatch.setattr(build, "compile_confirmed", lambda p, _inputs, _settings: (p, Compiled()))
    extra = tuple((n, "{}") for n in selection.PROVENANCE_NAMES)
    monkeypatch.setattr(reuse, "dist_info_files", lambda _plan: extra)
    settings = SimpleNamespace(cache_dir=tmp_path / "cache", import_check=False)
    failure = build.build_variant(plan, plan_inputs(matrix, tmp_path), settings)  # type: ignore[arg-type]
    error = failure.error  # type: ignore[union-attr]
    assert isinstance(error, BuildError)
    assert error.message == (
        f"variant {plan.variant.id}: demo_ops/_C.abi3.so, planned into the wheel, is missing: the "
        f"build made no {plan.links[0].library} (the link's output); run the build again, and "
        "report it if it persists"
    )
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())


def test_a_project_file_removed_after_planning_fails_packing_in_one_line(
    project: Project, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(data_project(project, tmp_path)), tmp_path)
    gone = tmp_path / "demo_ops" / "tables" / "a.txt"
    gone.unlink()
    with pytest.raises(BuildError) as caught:
        built_contents(plan)
    message = caught.value.message
    assert message.startswith(f"variant {plan.variant.id}: demo_ops/tables/a.txt, planned into")
    assert f"{gone} was removed after the build was planned" in message
    assert len(message.splitlines()) == 1


def test_the_packer_writes_no_dist_info_file_the_plan_does_not_list(
    project: Project, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    built_contents(plan)  # the library written
    extra = tuple((n, "{}") for n in (*selection.PROVENANCE_NAMES, "unplanned.txt"))
    with pytest.raises(
        BuildError, match=r"differ from the plan's \(demo_ops-1.2.0.dist-info/unplanned.txt\)"
    ):
        wheel.contents(plan, "linux_x86_64", extra)
    with pytest.raises(BuildError, match=r"wheelforge-build.json\)"):
        wheel.contents(plan, "linux_x86_64", extra[:1])


def test_two_members_of_one_name_are_refused() -> None:
    files = ProjectFiles(
        members=(Member(path="pkg/_C.so", kind="package-data", source=Path("/p/pkg/_C.so")),),
        licenses=(),
    )
    with pytest.raises(ConfigError) as caught:
        selection.wheel_members(
            files, dist_info="pkg-1.dist-info", binaries=[("pkg/_C.so", Path("/b/_C.so"))]
        )
    assert caught.value.message == (
        "/p/pkg/_C.so and /b/_C.so would both be the wheel's pkg/_C.so; leave one out "
        "(package.exclude) or rename it"
    )


def test_a_link_out_of_the_project_is_refused_when_planning_by_wheel_and_sdist_alike(
    project: Project, tmp_path: Path
) -> None:
    path = data_project(project, tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text("secret")
    (tmp_path / "demo_ops" / "tables" / "leak.txt").symlink_to(secret)
    matrix = load_matrix(path)
    expected = rf"package.packages 'demo_ops': .*leak.txt is a symbolic link to {secret}"
    with pytest.raises(ConfigError, match=expected):
        plan_for(matrix, tmp_path)
    with pytest.raises(ConfigError, match=expected):
        sdist.write_sdist(matrix, tmp_path, tmp_path / "sdist")
    assert not (tmp_path / "sdist").exists()


def test_wheelforges_own_folders_beside_the_matrix_are_never_walked(
    project: Project, tmp_path: Path
) -> None:
    """build/ and dist/ beside matrix.yaml (the default build and output folders) hold no
    source, also where a package folder is the project's top (a flat layout's package dir)."""
    path = project(
        GOOD_MATRIX.replace("packages: [demo_ops]", "packages: [demo_ops]\n  package-data: ['**']")
    )
    matrix = load_matrix(path)
    for name in ("build/wheelforge/x.py", "dist/old.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    found = selection.package_members(
        tmp_path, data=("*",), exclude=(), project=tmp_path, skipped=selection.outputs(matrix)
    )
    names = {m.path for m in found}
    assert f"{tmp_path.name}/demo_ops/__init__.py" in names
    assert not [n for n in names if "/build/" in n or "/dist/" in n]


def test_the_dry_run_shows_every_planned_member(project: Project, tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from wheelforge.build.dryrun import PlannedVariant
    from wheelforge.cli.build_screen import print_dry_run

    plan = plan_for(load_matrix(data_project(project, tmp_path)), tmp_path)
    planned = PlannedVariant(
        variant_id=plan.variant.id,
        arch_set="default",
        archs="8.0 9.0+PTX",
        toolkit="CUDA 13.0.88",
        torch="2.13.0",
        commands=(),
        note="",
        members=plan.wheel.members,
        project=plan.project,
    )
    console = Console(file=io.StringIO(), width=80)
    print_dry_run([planned], console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = [line.rstrip() for line in text.splitlines()]
    at = lines.index(f"  wheel members ({len(plan.wheel.members)}), as the packer writes them:")
    shown = [line.split() for line in lines[at + 1 : -1]]
    assert [words for words in shown if words[0] != "built"] == [
        [m.kind, m.path] for m in plan.wheel.members
    ]
    binary = lines.index("    binary        demo_ops/_C.abi3.so")
    build_dir = plan.links[0].library.relative_to(tmp_path)
    assert lines[binary + 1] == f"                    built as {build_dir}"
