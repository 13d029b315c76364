"""`wheelforge cache list --json` and `cache prune` run as a user runs them, on a cache of their
own (--cache-dir; the real ~/.cache/wheelforge is never touched)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.integration.helpers import wheelforge
from wheelforge.toolchain import envs
from wheelforge.toolchain import toolkits as toolkit


def _aged(path: Path, days: float) -> None:
    when = time.time() - days * 86400
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.utime(Path(folder, name), (when, when))
    os.utime(path, (when, when))


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    for key, torch, days in (
        ("torch-2.10.0-old", "2.10.0", 45.0),
        ("torch-2.13.0-new", "2.13.0", 1.0),
    ):
        env = root / envs.ENVS / key
        (env / "bin").mkdir(parents=True)
        (env / "bin" / "python").write_bytes(b"\x7fELF" + b"\0" * 20000)
        (env / envs.MARKER).write_text(
            json.dumps({"torch": torch, "python": "3.12", "cuda": False})
        )
        _aged(env, days)
    kit = root / toolkit.TOOLKITS / "cuda-13.0-pypi"
    kit.mkdir(parents=True)
    (kit / toolkit.TOOLKIT_JSON).write_text(json.dumps({"release": "13.0", "source": "pypi"}))
    _aged(kit, 60)
    return root


def test_list_then_prune(cache: Path, tmp_path: Path) -> None:
    listed = wheelforge("cache", "list", "--cache-dir", cache, "--json", cwd=tmp_path)
    assert listed.code == 0, listed.err
    document = json.loads(listed.out)
    assert document["schema_version"] == 4  # 3: "not wheelforge's"; 4: job costs, sccache-dist
    names = {Path(e["path"]).name: e for e in document["entries"]}
    assert set(names) == {"torch-2.10.0-old", "torch-2.13.0-new", "cuda-13.0-pypi"}
    assert names["torch-2.10.0-old"]["name"].startswith("torch 2.10.0, Python 3.12")
    assert names["torch-2.10.0-old"]["size"] >= 20000
    assert document["total"] == sum(e["size"] for e in document["entries"])

    dry = wheelforge("cache", "prune", "--cache-dir", cache, "--dry-run", cwd=tmp_path)
    assert dry.code == 0, dry.err
    assert "would remove" in dry.out and "would free" in dry.out
    assert (cache / envs.ENVS / "torch-2.10.0-old").is_dir()
    planned = wheelforge(
        "cache", "prune", "--cache-dir", cache, "--dry-run", "--json", cwd=tmp_path
    )
    assert planned.code == 0, planned.err
    plan = json.loads(planned.out)
    assert (plan["schema_version"], plan["dry_run"], plan["unused_for_days"]) == (4, True, 30)
    assert {Path(e["path"]).name for e in plan["removed"]} == {"torch-2.10.0-old", "cuda-13.0-pypi"}
    assert plan["busy"] == [] and plan["freed"] == sum(e["size"] for e in plan["removed"])
    assert (cache / envs.ENVS / "torch-2.10.0-old").is_dir()

    pruned = wheelforge("cache", "prune", "--cache-dir", cache, cwd=tmp_path)
    assert pruned.code == 0, pruned.err
    assert "torch-2.10.0-old" in pruned.out and "freed" in pruned.out
    assert not (cache / envs.ENVS / "torch-2.10.0-old").exists()
    assert not (cache / toolkit.TOOLKITS / "cuda-13.0-pypi").exists()
    assert (cache / envs.ENVS / "torch-2.13.0-new" / envs.MARKER).is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("prune", "--unused-for", "-1"),
            "error: --unused-for -1 is negative; give a number of days",
        ),
        (("list", "--cache-dir", "{file}"), "is a file, not a folder; pass --cache-dir a folder"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "a-file").write_text("")
    argv = [a.format(file=tmp_path / "a-file") for a in args]
    run = wheelforge("cache", *argv, cwd=tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert run.code == 2
    assert run.err.strip().splitlines() == [run.err.strip()]
    assert message in run.err
    assert not (tmp_path / "xdg").exists()


def test_a_missing_cache_lists_and_prunes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "none"
    listed = wheelforge("cache", "list", "--cache-dir", missing, cwd=tmp_path)
    assert (listed.code, listed.out.strip()) == (0, f"no cache at {missing}")
    pruned = wheelforge("cache", "prune", "--all", "--cache-dir", missing, cwd=tmp_path)
    assert pruned.code == 0
    assert not missing.exists()


def test_prune_leaves_a_folder_a_user_put_into_the_cache(cache: Path, tmp_path: Path) -> None:
    """Issue 32: a folder in envs/ without wheelforge's marker was pruned as an "incomplete"
    environment. What has no marker wheelforge wrote is listed, skipped and said so, however
    old, with --all and by name."""
    mine = [
        cache / envs.ENVS / "my-venv",
        cache / toolkit.TOOLKITS / "cuda-12.4-by-hand",
        cache / "repairs" / "my-wheels",
        cache / "probes" / "nvcc" / "notes",
    ]
    for folder in mine:
        (folder / "src").mkdir(parents=True)
        (folder / "src" / "work.py").write_text("precious = True\n")
        _aged(folder, 400)
    dry = wheelforge("cache", "prune", "--cache-dir", cache, "--all", "--dry-run", cwd=tmp_path)
    assert dry.code == 0, dry.err
    for folder in mine:
        assert f"skipped {folder}: not made by wheelforge" in dry.out.replace("\n", " ")
    assert "no wheelforge-env.json" in dry.out and "no toolkit.json" in dry.out
    pruned = wheelforge("cache", "prune", "--cache-dir", cache, "--all", "--json", cwd=tmp_path)
    assert pruned.code == 0, pruned.err
    document = json.loads(pruned.out)
    assert {Path(e["path"]) for e in document["foreign"]} == set(mine)
    assert {Path(e["path"]).name for e in document["removed"]} == {
        "torch-2.10.0-old", "torch-2.13.0-new", "cuda-13.0-pypi"}  # fmt: skip
    assert all((folder / "src" / "work.py").read_text() == "precious = True\n" for folder in mine)
    named = wheelforge("cache", "prune", "--cache-dir", cache, "my-venv", cwd=tmp_path)
    assert named.code == 2 and "is not wheelforge's (no wheelforge-env.json)" in named.err
    assert len(named.err.strip().splitlines()) == 1 and (mine[0] / "src" / "work.py").is_file()
