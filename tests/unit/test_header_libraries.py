"""Header libraries as dependencies (issue 19): read from the matrix, found (a folder, a git
checkout or submodule read from its files), recorded in the build info and the SBOM, and
followed by the build (a stamp every compile depends on, its text the content digest)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation import gitfiles
from wheelforge.foundation.errors import ConfigError
from wheelforge.packaging import provenance
from wheelforge.planning import ninjafile
from wheelforge.toolchain import headerlibs

from .conftest import GOOD_MATRIX
from .fakes import plan_for, plan_inputs

Project = Callable[..., Path]
COMMIT = "7127592069c2fe01b041e174ba4345ef9b279671"
OTHER = "b" * 40


def _cutlass(root: Path) -> Path:
    lib = root / "third_party" / "cutlass"
    (lib / "include" / "cute").mkdir(parents=True, exist_ok=True)
    (lib / "include" / "cute" / "tensor.hpp").write_text("#pragma once\n")
    (lib / "tools" / "util" / "include").mkdir(parents=True, exist_ok=True)
    return lib


LIBRARY = """\
header-libraries:
  - name: cutlass
    path: third_party/cutlass
    include: [include, tools/util/include]
"""


def test_a_folder_library_is_read(project: Project, tmp_path: Path) -> None:
    _cutlass(tmp_path)
    matrix = load_matrix(project(GOOD_MATRIX + LIBRARY))
    [lib] = matrix.header_libraries
    assert lib.name == "cutlass" and lib.path == tmp_path / "third_party" / "cutlass"
    assert lib.include == ("include", "tools/util/include")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{name: cutlass}", "needs one of 'path'"),
        (
            "{name: cutlass, path: csrc, pypi: 'nvidia-cutlass==4.2.0.0'}",
            "needs one of 'path'",
        ),
        ("{name: cutlass, pypi: nvidia-cutlass>=4}", "must name one version with '=='"),
        ("{name: cutlass, path: csrc}", "'include' is not a folder in"),
        ("{name: Cutlass, path: csrc, include: ['.']}", "lower-case letters"),
    ],
)
def test_a_bad_library_is_one_clear_error(project: Project, entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_matrix(project(GOOD_MATRIX + f"header-libraries: [{entry}]\n"))
    assert message in f"{raised.value.message}\n{raised.value.details}"


def _git_checkout(folder: Path, commit: str, *, packed: bool = False) -> None:
    """A checkout's git folder as git writes it: HEAD on a branch, its ref loose or packed."""
    git = folder / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    if packed:
        (git / "packed-refs").write_text(f"# pack-refs with: peeled\n{commit} refs/heads/main\n")
    else:
        (git / "refs" / "heads" / "main").write_text(commit + "\n")


def test_the_commit_of_a_checkout_is_read_from_its_files(tmp_path: Path) -> None:
    loose, packed, detached = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _git_checkout(loose, COMMIT)
    _git_checkout(packed, OTHER, packed=True)
    (detached / ".git").mkdir(parents=True)
    (detached / ".git" / "HEAD").write_text(COMMIT + "\n")
    assert gitfiles.git_commit(loose) == COMMIT
    assert gitfiles.git_commit(packed) == OTHER
    assert gitfiles.git_commit(detached) == COMMIT
    assert gitfiles.git_commit(tmp_path) is None  # no checkout


def test_a_submodule_names_its_git_folder_and_its_url(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submodule's .git is a file naming .git/modules/<path> of the superproject (with no git
    installed: the gitlink it pins is then not asked)."""
    monkeypatch.setattr(gitfiles.shutil, "which", lambda _name: None)
    lib = _cutlass(tmp_path)
    modules = tmp_path / ".git" / "modules" / "third_party" / "cutlass"
    modules.mkdir(parents=True)
    (modules / "HEAD").write_text(COMMIT + "\n")
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (lib / ".git").write_text("gitdir: ../../.git/modules/third_party/cutlass\n")
    (tmp_path / ".gitmodules").write_text(
        '[submodule "third_party/cutlass"]\n\tpath = third_party/cutlass\n'
        "\turl = https://github.com/NVIDIA/cutlass.git\n"
    )
    matrix = load_matrix(project(GOOD_MATRIX + LIBRARY))
    [found] = headerlibs.resolve(
        matrix.header_libraries,
        root=tmp_path,
        cache=tmp_path / "cache",
        download=False,
        offline=False,
    )
    assert found.origin == "git" and found.commit == COMMIT and found.version == COMMIT
    assert found.url == "https://github.com/NVIDIA/cutlass.git"
    assert found.purl == f"pkg:github/nvidia/cutlass@{COMMIT}"
    assert found.include_dirs == (lib / "include", lib / "tools" / "util" / "include")


def test_the_digest_follows_the_content_not_the_times(tmp_path: Path) -> None:
    lib = _cutlass(tmp_path)
    folders = [lib / "include"]
    header = lib / "include" / "cute" / "tensor.hpp"
    before = headerlibs.content_digest(folders, cache=tmp_path / "cache")
    header.touch()  # another time, the same content
    assert headerlibs.content_digest(folders, cache=tmp_path / "cache") == before
    header.write_text("#pragma once // 2\n")
    assert headerlibs.content_digest(folders, cache=tmp_path / "cache") != before
    (lib / "include" / "new.h").write_text("")
    assert headerlibs.content_digest(folders, cache=None) not in (before,)


def _plan_with_library(project: Project, tmp_path: Path, commit: str) -> object:
    lib = _cutlass(tmp_path)
    if not (lib / ".git").exists():
        _git_checkout(lib, commit)
    else:
        (lib / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")
    matrix = load_matrix(project(GOOD_MATRIX + LIBRARY))
    libraries = headerlibs.resolve(
        matrix.header_libraries,
        root=tmp_path,
        cache=tmp_path / "cache",
        download=False,
        offline=False,
    )
    import dataclasses

    return plan_for(
        matrix,
        tmp_path,
        inputs=dataclasses.replace(plan_inputs(matrix, tmp_path), header_libraries=libraries),
    )


def test_every_compile_sees_the_library_and_depends_on_its_stamp(
    project: Project, tmp_path: Path
) -> None:
    plan = _plan_with_library(project, tmp_path, COMMIT)
    flags = shlex.split(plan.compile.flag_sets[0].nvcc)  # type: ignore[attr-defined]
    includes = [f for f in flags if f.startswith("-I")]
    # the extension's own folder, then the library's, then torch's
    assert includes[:3] == [
        "-I../../csrc",
        "-I../../third_party/cutlass/include",
        "-I../../third_party/cutlass/tools/util/include",
    ]
    maps = [f for f in flags if "prefix-map" in f and "third_party/cutlass" in f]
    assert maps == [
        "-Xcompiler=-ffile-prefix-map=../../third_party/cutlass=header-libraries/cutlass"
    ]
    stamp = plan.compile.header_stamp  # type: ignore[attr-defined]
    assert stamp is not None and stamp.text.startswith(f"cutlass {COMMIT} ")
    text = ninjafile.render(plan)  # type: ignore[arg-type]
    compiles = [ln for ln in text.splitlines() if ln.startswith("build obj/")]
    assert compiles and all("| gen/header-libraries.txt" in ln for ln in compiles)


def test_another_commit_is_another_stamp(project: Project, tmp_path: Path) -> None:
    first = _plan_with_library(project, tmp_path, COMMIT).compile.header_stamp  # type: ignore[attr-defined]
    again = _plan_with_library(project, tmp_path, COMMIT).compile.header_stamp  # type: ignore[attr-defined]
    other = _plan_with_library(project, tmp_path, OTHER).compile.header_stamp  # type: ignore[attr-defined]
    assert first.text == again.text and first.text != other.text


def test_the_build_info_and_sbom_name_the_library(project: Project, tmp_path: Path) -> None:
    from wheelforge.packaging import sbom

    from .fakes import build_info

    plan = _plan_with_library(project, tmp_path, COMMIT)
    [lib] = plan.compile.header_libraries  # type: ignore[attr-defined]
    recorded = provenance.header_library(lib)
    assert recorded.commit == COMMIT and recorded.origin == "git"
    assert recorded.sha256 == lib.digest
    inputs = {
        "header-libraries/cutlass/include/cute/tensor.hpp": "0" * 64,
        "./csrc/ops.cpp": "1" * 64,
    }
    info = build_info("default-cu130", "8.0")
    document = json.loads(sbom.sbom(plan, info, inputs, epoch=0, build_info_name="b.json"))
    [component] = [c for c in document["components"] if c["name"] == "cutlass"]
    assert component["version"] == COMMIT
    assert component["purl"] == f"pkg:generic/cutlass@{COMMIT}"
    assert component["hashes"] == [{"alg": "SHA-256", "content": lib.digest}]
    files = [c["name"] for c in document["components"] if c["type"] == "file"]
    assert files == ["./csrc/ops.cpp"]  # the library's headers are its component, not files


def test_offline_a_pypi_library_not_in_the_cache_is_named(project: Project, tmp_path: Path) -> None:
    matrix = load_matrix(
        project(
            GOOD_MATRIX + "header-libraries: [{name: cutlass, pypi: 'nvidia-cutlass==4.2.0.0'}]\n"
        )
    )
    from wheelforge.foundation.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="--offline forbids downloading"):
        headerlibs.resolve(
            matrix.header_libraries,
            root=tmp_path,
            cache=tmp_path / "cache",
            download=False,
            offline=True,
        )
    # a dry run names the folder it will be in, with no digest
    [planned] = headerlibs.resolve(
        matrix.header_libraries,
        root=tmp_path,
        cache=tmp_path / "cache",
        download=False,
        offline=False,
    )
    assert planned.root == tmp_path / "cache" / "header-libraries" / "nvidia-cutlass-4.2.0.0"
    assert planned.digest is None and planned.version == "4.2.0.0"
    assert planned.purl == "pkg:pypi/nvidia-cutlass@4.2.0.0"
