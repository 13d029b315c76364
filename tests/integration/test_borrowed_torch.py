"""A wheel installed into a borrowed torch's environment (--torch-from, issue 20) on a machine
with no index: the interpreter's packages are the user's, taken as they are; only the wheel's
own unmet requirements are asked of pip. Real pip and venvs; a stand-in torch, no download."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.unit.fakes import with_record
from wheelforge.foundation.errors import ToolError
from wheelforge.toolchain import envs


def _dist(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "RECORD").write_text("")


def _borrowed_interpreter(tmp_path: Path) -> Path:
    """A Python whose torch (a stand-in) requires a package that is not installed and that no
    index is asked for: an image's torch beside a setuptools it does not accept."""
    base = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", base], check=True)
    python = base / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        "__version__ = '2.11.0+cu130'\n"
        "class version: cuda = '13.0'\n"
        "class cuda:\n    is_available = staticmethod(lambda: False)\n"
    )
    _dist(
        site, "torch", "2.11.0+cu130", ("wf-absent-everywhere<82", 'wf-win-only; os_name == "nt"')
    )
    _dist(site, "wf-present", "1.4")
    return python


def _wheel(tmp_path: Path, requires: tuple[str, ...]) -> Path:
    path = tmp_path / "wfpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("wfpkg/__init__.py", "")
        zf.writestr(
            "wfpkg-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: wfpkg\nVersion: 1.0\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        )
        zf.writestr(
            "wfpkg-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    return with_record(path)


def test_a_wheel_goes_into_a_borrowed_torch_without_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The H200's image (issue 20): its torch's own requirement is unmet there and the machine
    has no index. pip resolving the wheel's dependencies walked torch's too and went to the
    network; the wheel's own requirements are met, so nothing is downloaded."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    env = envs.ensure_env(envs.EnvSpec(torch_from=_borrowed_interpreter(tmp_path)), tmp_path / "c")
    assert env.torch == "2.11.0+cu130"
    wheel = _wheel(tmp_path, ("torch==2.11.*", "wf-present>=1.2", 'wf-win-only; os_name == "nt"'))
    envs.install_wheel(env, wheel, "wfpkg")
    assert envs.unmet_requirements(env.python, "wfpkg") == []
    # A requirement of the wheel's own that the environment lacks is still asked of pip.
    (tmp_path / "other").mkdir()
    other = _wheel(tmp_path / "other", ("wf-present>=2", "torch"))
    with pytest.raises(ToolError, match="pip install wf-present>=2"):
        envs.install_wheel(env, other, "wfpkg")
