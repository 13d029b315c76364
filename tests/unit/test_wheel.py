from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

from wheel.wheelfile import WheelFile

from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.packaging import wheel

from .conftest import GOOD_MATRIX
from .fakes import built_contents, plan_for

Project = Callable[..., Path]


def make_contents(project: Project, tmp_path: Path, text: str = GOOD_MATRIX) -> wheel.WheelContents:
    plan = plan_for(load_matrix(project(text)), tmp_path)
    # Made after planning: the packer reads no folder, so none of these is packed.
    pkg = tmp_path / "demo_ops"
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"junk")
    (pkg / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"stale in-place build")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "data.txt").write_text("data")
    (pkg / "late.py").write_text("")
    return built_contents(plan)


def test_contents(project: Project, tmp_path: Path) -> None:
    c = make_contents(project, tmp_path)
    assert c.filename == "demo_ops-1.2.0-cp310-abi3-linux_x86_64.whl"
    assert [arc for arc, _ in c.files] == [
        "demo_ops/_C.abi3.so",
        "demo_ops/__init__.py",
    ]
    assert "Tag: cp310-abi3-linux_x86_64" in c.wheel and "Root-Is-Purelib: false" in c.wheel
    assert "Name: demo-ops\n" in c.metadata and "Version: 1.2.0\n" in c.metadata
    assert "Requires-Dist: torch>=2.10\n" in c.metadata
    assert "Requires-Python: >=3.10\n" in c.metadata


def test_pack_is_valid_and_reproducible(project: Project, tmp_path: Path) -> None:
    c = make_contents(project, tmp_path)
    first = wheel.pack(c, tmp_path / "a")
    second = wheel.pack(c, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    with WheelFile(first) as wf:  # checks every member against RECORD
        for name in wf.namelist():
            if not name.endswith("RECORD"):
                wf.read(name)
        record = wf.read("demo_ops-1.2.0.dist-info/RECORD").decode()
    assert "demo_ops/_C.abi3.so,sha256=" in record
    with zipfile.ZipFile(first) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in infos.values())
        assert infos["demo_ops/_C.abi3.so"].external_attr >> 16 & 0o777 == 0o755


def test_source_date_epoch(project: Project, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    built = wheel.pack(make_contents(project, tmp_path), tmp_path / "a")
    with zipfile.ZipFile(built) as zf:
        assert {i.date_time[0] for i in zf.infolist()} == {2023}


def test_digest_changes_with_inputs(project: Project, tmp_path: Path) -> None:
    c = make_contents(project, tmp_path)
    before = c.digest()
    (tmp_path / "demo_ops" / "__init__.py").write_text("changed")
    assert c.digest() != before


def test_symlinks_leading_out_of_the_project_are_refused_not_packed(
    project: Project, tmp_path: Path
) -> None:
    """Issue 21: `notes.txt -> /etc/shadow` (package-data) and `helpers.py -> /etc/passwd` put
    those files into the wheel, silently. A link inside the project is followed, as before."""
    import pytest

    from wheelforge.foundation.errors import ConfigError

    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text("root:x:0:0\n")
    (tmp_path / "shared.py").write_text("X = 1\n")
    (tmp_path / "demo_ops").mkdir(exist_ok=True)
    (tmp_path / "demo_ops" / "inside.py").symlink_to(tmp_path / "shared.py")
    (tmp_path / "demo_ops" / "helpers.py").symlink_to(secret)
    with pytest.raises(
        ConfigError, match=r"helpers.py is a symbolic link to .*secret.txt, outside the project"
    ):
        make_contents(project, tmp_path)
    (tmp_path / "demo_ops" / "helpers.py").unlink()
    c = built_contents(plan_for(load_matrix(tmp_path / "matrix.yaml"), tmp_path))
    assert "demo_ops/inside.py" in [arc for arc, _ in c.files]


def test_a_license_of_several_lines_keeps_metadata_whole(project: Project, tmp_path: Path) -> None:
    """Issue 21: a multi-line license: ended the headers, and every parser then lost
    Requires-Dist and Requires-Python (the build exited 0; `wheelforge check` failed it)."""
    from packaging.metadata import parse_email

    text = GOOD_MATRIX.replace(
        "  summary: demo", '  summary: demo\n  license: "MIT License\\n\\nCopyright (c) 2026 x\\n"'
    )
    c = built_contents(plan_for(load_matrix(project(text)), tmp_path))
    raw, unparsed = parse_email(c.metadata)
    assert raw.get("requires_dist") == ["torch>=2.10"] and raw.get("requires_python") == ">=3.10"
    assert not unparsed
    assert raw.get("license", "").split() == ["MIT", "License", "Copyright", "(c)", "2026", "x"]
