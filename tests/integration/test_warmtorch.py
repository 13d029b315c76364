"""Warm torch children (toolchain/warmtorch.py): one torch import answers the probe and one
import check; each check gets a process of its own; unused children are stopped; and the
import check's cache (build/importcheck.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import TINY_ARCH_ENV, tiny
from tests.unit.fakes import plan_for
from wheelforge.build import importcheck
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import VerificationError
from wheelforge.toolchain import probecache, torchprobe, warmtorch

pytest.importorskip("torch")
PYTHON = Path(sys.executable)


@pytest.fixture(autouse=True)
def _stop_children() -> object:
    with warmtorch.session():
        yield


def _module(tmp: Path, body: str, name: str = "mod") -> Path:
    """A module in the folder *tmp* (the wheel's folder, as installed), to import by *name*."""
    path = tmp / f"{name}.py"
    path.write_text(body)
    return path


def test_one_child_answers_the_probe_then_imports_after_torch(tmp_path: Path) -> None:
    probe = warmtorch.probe(PYTHON)
    info = json.loads(probe.stdout)
    assert probe.returncode == 0 and info["torch_file"].endswith("torch/__init__.py")
    pid = tmp_path / "pid"
    body = f"import os, sys\nassert 'torch' in sys.modules\nopen({str(pid)!r}, 'w').write(str(os.getpid()))\n"
    result = warmtorch.import_modules(
        PYTHON, tmp_path, [("module", "mod", _module(tmp_path, body))]
    )
    assert result.returncode == 0
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [None]
    first = int(pid.read_text())
    assert first != os.getpid()
    # The child that imported is gone; the next check gets a fresh one.
    warmtorch.import_modules(PYTHON, tmp_path, [("module", "mod", tmp_path / "mod.py")])
    assert int(pid.read_text()) != first


def test_the_loaders_message_and_a_crash_are_the_childs(tmp_path: Path) -> None:
    failing = warmtorch.import_modules(
        PYTHON, tmp_path, [("module", "mod", _module(tmp_path, "raise ImportError('boom')\n"))]
    )
    assert json.loads(failing.stdout.strip().splitlines()[-1]) == [
        {"said": "ImportError: boom", "missing": None, "ok": False}
    ]
    crash = warmtorch.import_modules(
        PYTHON, tmp_path, [("module", "mod", _module(tmp_path, "import os\nos._exit(7)\n"))]
    )
    assert crash.returncode == 7


def test_every_shared_object_is_loaded_in_order_a_library_by_torch_ops(tmp_path: Path) -> None:
    """A wheel's shared objects in one child: each answer its own, a library loaded with
    torch.ops.load_library (a file that is no shared object: its loader's message)."""
    order = tmp_path / "order"
    first = _module(tmp_path, f"open({str(order)!r}, 'a').write('first ')\n")
    second = tmp_path / "second.py"
    second.write_text(f"open({str(order)!r}, 'a').write('second')\n")
    garbage = tmp_path / "_ops.so"
    garbage.write_text("not an ELF file\n")
    result = warmtorch.import_modules(
        PYTHON,
        tmp_path,
        [("module", "mod", first), ("module", "second", second), ("library", "x._ops", garbage)],
    )
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers[:2] == [None, None] and order.read_text() == "first second"
    assert answers[2]["said"].startswith("OSError: ") and "_ops.so" in answers[2]["said"]


def test_a_python_without_torch_says_so(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    bare = venv / "bin" / "python"
    bare.parent.mkdir(parents=True)
    bare.symlink_to(
        Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    )
    if subprocess.run([bare, "-c", "import torch"], capture_output=True).returncode == 0:
        pytest.skip("the base Python has torch of its own")
    result = warmtorch.probe(bare)
    assert result.returncode != 0 and "No module named 'torch'" in result.stderr


def test_an_unused_child_is_stopped_when_the_session_ends() -> None:
    with warmtorch.session():
        warmtorch.warm(PYTHON)
        [child] = warmtorch._WARM[PYTHON]
        assert child.popen.poll() is None
    assert child.popen.poll() is not None
    assert not child.folder.exists()


def _wheel(tmp: Path, plan_library: str, body: str) -> Path:
    wheel = tmp / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(f"{plan_library.partition('/')[0]}/__init__.py", "")
        zf.writestr(plan_library, body)
    return wheel


def _stand_in_plan(tmp_path: Path) -> object:
    """The repository's plan, with a Python module standing in for its extension (at the
    extension's dotted path), and the torch of this Python."""
    matrix_file = Path(__file__).resolve().parents[2] / "matrix.yaml"
    plan = plan_for(load_matrix(matrix_file), tmp_path)
    watched = tmp_path / "site-packages"
    watched.mkdir()
    link = plan.links[0]
    stand_in = link.extension.name.replace(".", "/") + ".py"
    plan = dataclasses.replace(
        plan,
        torch=dataclasses.replace(plan.torch, python=PYTHON, watch=(str(watched),)),
        links=(dataclasses.replace(link, wheel_path=stand_in),),
    )
    plan.build_dir.mkdir(parents=True)
    return plan


def test_an_import_check_success_is_cached_by_the_wheels_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _stand_in_plan(tmp_path)
    watched = Path(plan.torch.watch[0])
    wheel = _wheel(tmp_path, plan.links[0].wheel_path, "x = 1\n")
    calls: list[Path] = []
    real = warmtorch.import_modules

    def counting(python: Path, site: Path, loads: list[warmtorch.Load], **kw: object) -> object:
        calls.append(loads[0][2])
        return real(python, site, loads, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(warmtorch, "import_modules", counting)
    cache = tmp_path / "cache"
    assert importcheck.check_import(wheel, plan, cache_dir=cache)[0].startswith("import ")
    assert importcheck.check_import(wheel, plan, cache_dir=cache)[0].startswith("import ")
    assert len(calls) == 1  # the same bytes under the same torch: not imported again
    (watched / "new-package").mkdir()  # a package installed: the torch may differ now
    importcheck.check_import(wheel, plan, cache_dir=cache)
    assert len(calls) == 2
    broken = _wheel(tmp_path, plan.links[0].wheel_path, "raise ImportError('boom')\n")
    for _ in range(2):  # a failure is never cached
        with pytest.raises(VerificationError, match="ImportError: boom"):
            importcheck.check_import(broken, plan, cache_dir=cache)
    assert len(calls) == 4


def test_torchs_files_read_as_torch_itself_answers(tmp_path: Path) -> None:
    """The early answer (torch located and read, not imported) is what torch's own helpers say:
    were torch to move its headers or libraries, this fails (and builds would compile twice)."""
    early = torchprobe.probe_torch(PYTHON, cache=tmp_path, early=True)
    assert probecache.lookup(tmp_path, "torch", torchprobe.probe_key(PYTHON)) is None  # not yet
    own = torchprobe.probe_torch(PYTHON, cache=None)
    assert torchprobe.confirm(early, cache=tmp_path) == early == own
    assert (
        probecache.lookup(tmp_path, "torch", torchprobe.probe_key(PYTHON)) is not None
    )  # cached now
    again = torchprobe.probe_torch(PYTHON, cache=tmp_path, early=True)
    assert torchprobe.confirm(again, cache=tmp_path) == again


def test_a_wrong_early_answer_is_compiled_again_with_torchs_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from wheelforge.cli.app import main

    real = torchprobe._layout
    bogus = tmp_path / "not-torch-lib"

    def misread(python: Path) -> dict[str, object] | None:
        info = real(python)
        assert info is not None
        return {**info, "library_dirs": [str(bogus)]}

    monkeypatch.setattr(torchprobe, "_layout", misread)
    root = tiny(tmp_path / "project")
    monkeypatch.chdir(root)
    for name, value in {**TINY_ARCH_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(name, value)
    code = main(["build"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "answered otherwise than its files read: compiling again" in err
    # the variant's (the shared folder of its C++ compiles, host-*, links nothing)
    (ninja_file,) = (
        p for p in (root / "build" / "wheelforge").glob("*/build.ninja")
        if not p.parent.name.startswith("host-")
    )  # fmt: skip
    assert str(bogus) not in ninja_file.read_text()  # linked with torch's own answer


def test_a_relative_python_path_works_from_the_childs_own_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child runs in a folder of its own: --python .venv/bin/python must still be found."""
    monkeypatch.chdir(PYTHON.parent.parent.parent)
    relative = PYTHON.relative_to(PYTHON.parent.parent.parent)
    assert warmtorch.probe(relative).returncode == 0


@pytest.mark.parametrize("pythonpath", ["{extra}:", ":{extra}", "{extra}::{extra}", "."])
def test_a_pythonpath_with_an_empty_entry_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pythonpath: str
) -> None:
    """An empty PYTHONPATH entry is the current folder: the warm child's own, thrown away after
    the probe, was on the answer's sys.path and so in the cache's watch list, and no later run
    found the entry valid. Now the entry means the folder wheelforge runs in, as it does to
    the user who set it, and the second probe of the same torch is the cache's."""
    extra, project, cache = tmp_path / "extra", tmp_path / "project", tmp_path / "cache"
    extra.mkdir()
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", pythonpath.format(extra=extra))
    with warmtorch.session():
        first = torchprobe.probe_torch(PYTHON, cache=cache)
    hit = probecache.lookup(cache, "torch", torchprobe.probe_key(PYTHON))
    assert hit is not None
    assert str(project) in hit["sys_path"]  # the entry as the user meant it
    assert not [p for p in hit["sys_path"] if "wheelforge-torch-" in p]  # no throwaway folder
    assert torchprobe.probe_torch(PYTHON, cache=cache) == first
