"""`wheelforge cache list` / `cache prune` on a fake cache: what is listed, how large and how old,
what is removed, and that an entry another wheelforge holds is never touched."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock
from packaging.version import Version

from wheelforge.build import caches as running_cache
from wheelforge.build.caches import ENV, PROBE, REPAIR, TOOLKIT, UNFINISHED
from wheelforge.foundation.errors import ConfigError
from wheelforge.toolchain import envs, provision
from wheelforge.toolchain import toolkits as toolkit
from wheelforge.toolchain.choice import ToolkitChoice, ensure_toolkit

NOW = time.time()
# Named as repair.py (<32 hex>/) and probecache.py (<kind>/<24 hex>.json) name them.
OLD_REPAIR, NEW_REPAIR = "0" * 31 + "a", "0" * 31 + "b"
OLD_PROBE, NEW_PROBE = "0" * 23 + "a.json", "0" * 23 + "b.json"
DAY = 86400.0


def _age(path: Path, seconds: float) -> None:
    """Set the mtime of *path* and everything under it to *seconds* ago."""
    when = NOW - seconds
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            os.utime(Path(folder, name), (when, when))
    os.utime(path, (when, when))


def _env(cache: Path, key: str, torch: str, *, days: float) -> Path:
    path = cache / envs.ENVS / key
    (path / "lib").mkdir(parents=True)
    (path / "lib" / "torch.so").write_bytes(os.urandom(64 * 1024))
    info = {"spec": torch, "torch": f"{torch}+cpu", "cuda": False, "python": "3.12",
            "made_from": envs._made_from(envs.EnvSpec(torch=torch))}  # fmt: skip
    (path / envs.MARKER).write_text(json.dumps(info))
    _age(path, days * DAY)
    return path


def _toolkit(cache: Path, folder: str, release: str, *, days: float) -> Path:
    path = cache / toolkit.TOOLKITS / folder
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "nvcc").write_bytes(b"\0" * 8192)
    info = {"release": release, "source": "pypi", "nvcc": "bin/nvcc"}  # as provision.py writes
    (path / toolkit.TOOLKIT_JSON).write_text(json.dumps(info))
    _age(path, days * DAY)
    return path


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """Old and recent entries of every kind, and temporary folders of interrupted creations."""
    root = tmp_path / "cache"
    _env(root, "torch-2.10.0-aaaaaaaaaa", "2.10.0", days=40)
    _env(root, "torch-2.13.0-bbbbbbbbbb", "2.13.0", days=1)
    _env(root, "torch-2.11.0-cccccccccc", "2.11.0", days=40)
    _toolkit(root, "cuda-13.0-pypi", "13.0", days=90)
    _toolkit(root, "cuda-13.1-pypi", "13.1", days=2)
    for name, age in (
        (".cuda-11.8-debian.4242.tmp", 2 * 3600.0),
        (".torch-2.12.0-dddd.77.tmp", 600.0),
    ):
        parent = root / (toolkit.TOOLKITS if "cuda" in name else envs.ENVS)
        (parent / name / "bin").mkdir(parents=True)
        (parent / name / "bin" / "half").write_bytes(b"x" * 5000)
        _age(parent / name, age)
    for key, days in ((OLD_REPAIR, 45.0), (NEW_REPAIR, 0.5)):
        (root / "repairs" / key).mkdir(parents=True)
        (root / "repairs" / key / "demo-1.0-cp310-abi3-manylinux_2_28_x86_64.whl").write_bytes(
            b"w" * 3000
        )
        _age(root / "repairs" / key, days * DAY)
    for kind, name, days in (("nvcc", OLD_PROBE, 31.0), ("torch", NEW_PROBE, 3.0)):
        (root / "probes" / kind).mkdir(parents=True, exist_ok=True)
        (root / "probes" / kind / name).write_text("{}")
        _age(root / "probes" / kind / name, days * DAY)
    return root


@pytest.fixture
def busy(cache: Path) -> Iterator[Path]:
    """The torch 2.11 environment (old) while another wheelforge holds its lock."""
    path = cache / envs.ENVS / "torch-2.11.0-cccccccccc"
    lock = FileLock(envs.lock_path(path))
    lock.acquire(timeout=0)
    try:
        yield path
    finally:
        lock.release()


def _names(entries: tuple[running_cache.CacheEntry, ...]) -> set[str]:
    return {e.path.name for e in entries}


def test_list_names_each_entry_with_its_size_and_last_use(cache: Path) -> None:
    listing = running_cache.list_cache(cache)
    by_name = {e.path.name: e for e in listing.entries}
    env = by_name["torch-2.10.0-aaaaaaaaaa"]
    assert env.kind == ENV
    assert env.name == "torch 2.10.0+cpu, Python 3.12 (torch-2.10.0-aaaaaaaaaa)"
    assert env.last_used == pytest.approx(NOW - 40 * DAY, abs=2)
    assert env.size >= 64 * 1024  # the payload is random bytes: not sparse
    assert by_name["cuda-13.0-pypi"].kind == TOOLKIT
    assert by_name["cuda-13.0-pypi"].name == "CUDA 13.0 from pypi (cuda-13.0-pypi)"
    assert by_name[".cuda-11.8-debian.4242.tmp"].kind == UNFINISHED
    assert by_name["repairs"].kind == REPAIR
    assert by_name["repairs"].name == "2 kept repaired wheels"
    assert by_name["repairs"].last_used == pytest.approx(NOW - 0.5 * DAY, abs=2)
    assert by_name["probes"].kind == PROBE
    assert len(listing.entries) == 9  # lock files are no entries
    assert listing.total == sum(e.size for e in listing.entries)


def test_sizes_count_blocks_once_per_inode_and_never_follow_symlinks(tmp_path: Path) -> None:
    big = tmp_path / "elsewhere.bin"
    big.write_bytes(os.urandom(1 << 20))
    root = tmp_path / "cache"
    env = _env(root, "torch-2.10.0-aaaaaaaaaa", "2.10.0", days=1)
    alone = running_cache.list_cache(root).entries[0].size
    os.link(env / "lib" / "torch.so", env / "lib" / "torch-again.so")
    (env / "lib" / "big.bin").symlink_to(big)
    (env / "linked-folder").symlink_to(tmp_path, target_is_directory=True)
    with_links = running_cache.list_cache(root).entries[0].size
    assert alone <= with_links < alone + 64 * 1024  # two symlinks' inodes at most, not 1 MiB
    every = [env] + [Path(d, n) for d, dirs, files in os.walk(env) for n in [*dirs, *files]]
    assert with_links == sum(p.lstat().st_blocks * 512 for p in every if p.name != "torch-again.so")


def test_prune_removes_what_was_not_used_and_skips_a_busy_entry(cache: Path, busy: Path) -> None:
    result = running_cache.prune(cache, unused_for=30, now=NOW)
    assert _names(result.removed) == {
        "torch-2.10.0-aaaaaaaaaa",
        "cuda-13.0-pypi",
        ".cuda-11.8-debian.4242.tmp",
        OLD_REPAIR,
        OLD_PROBE,
    }
    assert _names(result.busy) == {busy.name}
    assert busy.is_dir()
    assert result.freed == sum(e.size for e in result.removed)
    left = {p.name for p in cache.rglob("*")}
    assert not left & _names(result.removed)
    assert {"torch-2.13.0-bbbbbbbbbb", "cuda-13.1-pypi", ".torch-2.12.0-dddd.77.tmp", NEW_REPAIR,
            NEW_PROBE} <= left  # fmt: skip
    assert not [p for p in cache.rglob("*") if p.name.endswith(".removing")]


def test_dry_run_removes_nothing(cache: Path, busy: Path) -> None:
    before = sorted(cache.rglob("*"))
    dry = running_cache.prune(cache, unused_for=30, dry_run=True, now=NOW)
    assert sorted(cache.rglob("*")) == before
    assert _names(dry.busy) == {busy.name}
    assert _names(dry.removed) == _names(running_cache.prune(cache, unused_for=30, now=NOW).removed)


def test_all_removes_every_entry_but_a_busy_one_and_a_young_unfinished_folder(
    cache: Path, busy: Path
) -> None:
    running_cache.prune(cache, every=True, now=NOW)
    left = running_cache.list_cache(cache).entries
    assert _names(left) == {busy.name, ".torch-2.12.0-dddd.77.tmp"}


def test_an_unfinished_folder_is_kept_while_its_creator_holds_the_lock(cache: Path) -> None:
    staged = cache / toolkit.TOOLKITS / ".cuda-11.8-debian.4242.tmp"
    with FileLock(provision.lock_path(cache / toolkit.TOOLKITS / "cuda-11.8-debian")):
        result = running_cache.prune(cache, unused_for=30, now=NOW)
    assert staged in {e.path for e in result.busy}
    assert staged.is_dir()


def test_an_entry_used_after_it_was_listed_stays(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = cache / envs.ENVS / "torch-2.10.0-aaaaaaaaaa"
    real = running_cache.locks.attempt

    def attempt_after_use(path: Path):  # type: ignore[no-untyped-def]
        if path == envs.lock_path(env):
            os.utime(env / envs.MARKER)  # another wheelforge used it meanwhile
        return real(path)

    monkeypatch.setattr(running_cache.locks, "attempt", attempt_after_use)
    result = running_cache.prune(cache, unused_for=30, now=NOW)
    assert env.is_dir()
    assert env not in {e.path for e in result.removed} | {e.path for e in result.busy}


def test_an_interrupted_removal_leaves_no_half_entry(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(path: Path, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "rmtree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        running_cache.prune(cache, unused_for=30, now=NOW)
    monkeypatch.undo()
    assert not (cache / envs.ENVS / "torch-2.10.0-aaaaaaaaaa").exists()
    aside = [
        e for e in running_cache.list_cache(cache).entries if e.path.name.endswith(".removing")
    ]
    assert [e.kind for e in aside] == [UNFINISHED]
    running_cache.prune(cache, unused_for=30, now=NOW)  # the next prune finishes it
    assert not [p for p in cache.rglob("*") if p.name.endswith(".removing")]


def test_bad_input_and_a_missing_cache(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--unused-for -1 is negative"):
        running_cache.prune(tmp_path, unused_for=-1)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"is a file, not a folder; pass --cache-dir a folder"):
        running_cache.list_cache(tmp_path / "file")
    missing = running_cache.list_cache(tmp_path / "none")
    assert (missing.exists, missing.entries) == (False, ())
    pruned = running_cache.prune(tmp_path / "none", every=True)
    assert (pruned.exists, pruned.removed) == (False, ())
    assert not (tmp_path / "none").exists()


def test_using_an_env_or_a_provisioned_toolkit_marks_it_used(tmp_path: Path) -> None:
    spec = envs.EnvSpec(torch="2.10.0")
    env = _env(tmp_path, envs._name(spec, "2.10.0+cpu"), "2.10.0", days=40)
    assert envs.ensure_env(spec, tmp_path).created is False
    assert (env / envs.MARKER).stat().st_mtime == pytest.approx(time.time(), abs=60)

    folder = _toolkit(tmp_path, "cuda-13.0-pypi", "13.0", days=40)

    def found(origin: str) -> toolkit.Toolkit:
        return toolkit.Toolkit(nvcc=folder / "bin" / "nvcc", root=folder, version=Version("13.0.88"),
                               sass=frozenset({90}), cudart_static=None, origin=origin)  # fmt: skip

    ensure_toolkit(ToolkitChoice(toolkit=found("PATH"), recipe=None), who="v", archs=[],
                   found=[], cache=tmp_path, offline=True)  # fmt: skip
    assert (folder / toolkit.TOOLKIT_JSON).stat().st_mtime == pytest.approx(NOW - 40 * DAY, abs=2)
    ensure_toolkit(ToolkitChoice(toolkit=found("provisioned"), recipe=None), who="v", archs=[],
                   found=[], cache=tmp_path, offline=True)  # fmt: skip
    assert (folder / toolkit.TOOLKIT_JSON).stat().st_mtime == pytest.approx(time.time(), abs=60)


def test_a_build_using_an_env_or_a_toolkit_shares_their_locks_and_prune_skips_them(
    cache: Path,
) -> None:
    """`using_cached` holds shared locks: any number of builds at once; prune (exclusive)
    skips what they use and takes the rest."""
    from types import SimpleNamespace

    from wheelforge.build.prepare import using_cached
    from wheelforge.foundation import locks

    env = cache / envs.ENVS / "torch-2.10.0-aaaaaaaaaa"
    folder = cache / toolkit.TOOLKITS / "cuda-13.0-pypi"
    assert envs.folder_of(env / "bin" / "python", cache) == env
    assert envs.folder_of(Path("/usr/bin/python3"), cache) is None
    tk = toolkit.Toolkit(nvcc=folder / "bin" / "nvcc", root=folder, version=Version("13.0.88"),
                         sass=frozenset({90}), cudart_static=None, origin="provisioned")  # fmt: skip
    assert toolkit.provisioned_folder(tk, cache) == folder
    plan = SimpleNamespace(variant=SimpleNamespace(toolkit=tk),
                           torch=SimpleNamespace(python=env / "bin" / "python"))  # fmt: skip
    with using_cached([plan, plan], cache), using_cached([plan], cache):  # type: ignore[list-item]
        with locks.attempt(envs.lock_path(env)) as free:
            assert not free
        result = running_cache.prune(cache, every=True)
        assert {env.name, folder.name} <= _names(result.busy)
        assert env.is_dir() and folder.is_dir()
        assert "torch-2.13.0-bbbbbbbbbb" in _names(result.removed)
    assert running_cache.prune(cache, every=True).busy == ()
    assert not env.exists() and not folder.exists()


def test_repairs_and_probes_are_shown_pooled(cache: Path) -> None:
    result = running_cache.prune(cache, every=True, dry_run=True)
    rows = {e.kind: e for e in running_cache.pooled(result.removed, cache)}
    assert rows[REPAIR].name == "2 kept repaired wheels" and rows[REPAIR].path == cache / "repairs"
    assert rows[PROBE].name == "2 probe results"
    singles = [e for e in result.removed if e.kind in (REPAIR, PROBE)]
    assert rows[REPAIR].size + rows[PROBE].size == sum(e.size for e in singles)


def test_a_probe_hit_and_a_kept_repair_hit_count_as_use(tmp_path: Path) -> None:
    """Probes and kept repairs age from their last use, not from when they were written."""
    import zipfile

    from wheelforge.packaging import repair
    from wheelforge.toolchain import probecache

    probecache.store(tmp_path, "k", {"a": 1}, {"v": 1}, [])
    entry = next((tmp_path / "probes" / "k").iterdir())
    _age(entry, 40 * DAY)
    assert probecache.lookup(tmp_path, "k", {"a": 1}) == {"v": 1}
    assert entry.stat().st_mtime == pytest.approx(time.time(), abs=60)

    wheel = tmp_path / "demo-1.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("demo/__init__.py", "")
    kept = repair._kept_folder(wheel, 0, tmp_path)
    assert kept is not None
    kept.mkdir(parents=True)
    (kept / "demo-1.0-cp310-abi3-manylinux_2_28_x86_64.whl").write_bytes(wheel.read_bytes())
    _age(kept, 40 * DAY)
    out = tmp_path / "out"
    got = repair.repair(wheel, out, source_date_epoch=0, cache=tmp_path)  # a hit: no auditwheel
    assert got == out / "demo-1.0-cp310-abi3-manylinux_2_28_x86_64.whl"
    assert kept.stat().st_mtime == pytest.approx(time.time(), abs=60)
    assert [e.path for e in running_cache.prune(tmp_path, unused_for=30).removed] == []


def test_a_test_run_excludes_another_test_run_but_not_builds_and_prune_skips_it(
    cache: Path,
) -> None:
    from wheelforge.foundation import locks

    env = cache / envs.ENVS / "torch-2.10.0-aaaaaaaaaa"
    with envs.testing(env):
        with locks.attempt(env.parent / f".{env.name}.testing.lock") as free:
            assert not free  # a second `wheelforge test` waits for this one
        with locks.share(envs.lock_path(env), what="the env"):
            pass  # a build compiling against its torch does not wait
        assert env.name in _names(running_cache.prune(cache, every=True).busy)
    assert env.name in _names(running_cache.prune(cache, every=True).removed)


def test_prune_removes_the_entries_named_whenever_they_were_used(cache: Path) -> None:
    """`cache prune NAME...`: a folder name as `cache list` shows it, a pool, or a path."""
    recent = cache / envs.ENVS / "torch-2.13.0-bbbbbbbbbb"  # used yesterday: --unused-for keeps it
    toolkit_path = cache / toolkit.TOOLKITS / "cuda-13.1-pypi"
    dry = running_cache.prune(cache, names=[recent.name], dry_run=True)
    assert _names(dry.removed) == {recent.name} and recent.is_dir()
    result = running_cache.prune(cache, names=[recent.name, str(toolkit_path), "probes"])
    assert _names(result.removed) == {recent.name, toolkit_path.name, OLD_PROBE, NEW_PROBE}
    assert result.names == (recent.name, str(toolkit_path), "probes")
    assert (
        not recent.exists()
        and not toolkit_path.exists()
        and not (cache / "probes" / "nvcc" / OLD_PROBE).exists()
    )
    assert (cache / envs.ENVS / "torch-2.10.0-aaaaaaaaaa").is_dir()  # not named: kept, old or not


def test_prune_refuses_a_name_that_is_no_entry_and_lists_those_there(cache: Path) -> None:
    with pytest.raises(ConfigError) as err:
        running_cache.prune(cache, names=["torch-2.99.0", "cuda-13.0-pypi"])
    message = err.value.message
    assert "no entry named 'torch-2.99.0'" in message
    assert "torch-2.10.0-aaaaaaaaaa" in message and "cuda-13.0-pypi" in message
    assert (cache / toolkit.TOOLKITS / "cuda-13.0-pypi").is_dir()  # nothing removed


def test_a_named_entry_in_use_is_skipped(cache: Path, busy: Path) -> None:
    result = running_cache.prune(cache, names=[busy.name])
    assert _names(result.busy) == {busy.name} and busy.is_dir()


def test_an_environment_is_a_torch_env_not_a_test_env(cache: Path) -> None:
    """It holds one torch for the builds that compile against it as much as for tests."""
    kinds = {
        e.kind for e in running_cache.list_cache(cache).entries if e.path.parent.name == envs.ENVS
    }
    assert kinds == {"torch env", UNFINISHED}


@pytest.mark.parametrize("linked", ["envs", "toolkits", "repairs", "probes", "probes/nvcc"])
def test_prune_never_follows_a_symlinked_folder_out_of_the_cache(
    tmp_path: Path, linked: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21: `probes/<kind> -> elsewhere/` emptied elsewhere/, and `envs -> elsewhere/` had
    its folders removed as incomplete environments and lock files written beside them."""
    root = tmp_path / "cache"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "project" / "src").mkdir(parents=True)
    (elsewhere / "project" / "src" / "main.c").write_text("int main() {}\n")
    (elsewhere / "notes.json").write_text("{}")
    _age(elsewhere, 400 * DAY)
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    (root / linked).parent.mkdir(parents=True, exist_ok=True)
    (root / linked).symlink_to(elsewhere)
    result = running_cache.prune(root, every=True)
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == before
    assert (root / linked).is_symlink()
    assert not {e.path for e in result.removed} & {root / linked}
    if "/" not in linked:
        assert f"{root / linked} is a symbolic link" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["truncate", "sha256", "flip"])
def test_a_damaged_kept_repair_is_discarded_not_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    """Issue 21: a truncated wheel in the repairs cache failed every later build, naming a
    deleted staging path and never the cache."""
    import zipfile

    from wheelforge.packaging import repair

    wheel = tmp_path / "demo-1.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo/__init__.py", "x = 1\n" * 1000)
    kept = repair._kept_folder(wheel, 0, tmp_path)
    assert kept is not None
    repair._keep(wheel, kept)
    hit = kept / wheel.name
    data = hit.read_bytes()
    if damage == "truncate":
        hit.write_bytes(data[: len(data) // 2])
    elif damage == "sha256":
        (kept / "sha256").unlink()  # an entry kept before the sha256 was: its CRCs decide
        hit.write_bytes(data[:60] + bytes([data[60] ^ 0xFF]) + data[61:])
    else:
        hit.write_bytes(data[:60] + bytes([data[60] ^ 0xFF]) + data[61:])
    ran = []

    def auditwheel(wheel: Path, dest_dir: Path, _epoch: int) -> Path:
        ran.append(wheel)
        return Path(shutil.copy2(wheel, dest_dir / wheel.name))

    monkeypatch.setattr(repair, "_run_auditwheel", auditwheel)
    got = repair.repair(wheel, tmp_path / "out", source_date_epoch=0, cache=tmp_path)
    assert ran == [wheel] and got.read_bytes() == wheel.read_bytes()
    assert (kept / "sha256").is_file()  # kept again, whole


def test_what_wheelforge_writes_is_its_own_and_a_users_folder_is_not(tmp_path: Path) -> None:
    """Issue 32: only entries with wheelforge's marker (or the names repair.py and probecache.py
    give) are pruned; a look-alike without one is listed as not wheelforge's and left."""
    import zipfile

    from wheelforge.packaging import repair
    from wheelforge.toolchain import probecache

    root = tmp_path / "cache"
    wheel = tmp_path / "demo-1.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("demo/__init__.py", "")
    kept = repair._kept_folder(wheel, 0, root)
    assert kept is not None
    repair._keep(wheel, kept)
    probecache.store(root, "nvcc", {"path": "/usr/bin/nvcc"}, {"version": "13.0"}, watch=())
    _env(root, "torch-2.13.0-bbbbbbbbbb", "2.13.0", days=1)
    look_alikes = [
        root / envs.ENVS / "torch-2.10.0-aaaaaaaaaa",  # an env's name, no marker
        root / envs.ENVS / "linked-marker",  # a marker that is a link: not one wheelforge wrote
        root / "repairs" / ("f" * 32),  # a kept repair's name, holding a user's file
        root / "probes" / "nvcc" / ("e" * 24 + ".json"),  # a probe's name, but a folder
    ]
    for folder in look_alikes:
        folder.mkdir(parents=True)
        (folder / "mine.txt").write_text("keep me")
    (look_alikes[1] / envs.MARKER).symlink_to(
        root / envs.ENVS / "torch-2.13.0-bbbbbbbbbb" / envs.MARKER
    )
    kinds = {e.path: e.kind for e in running_cache.entries(root)}
    assert kinds[kept] == REPAIR and kinds[next((root / "probes" / "nvcc").glob("*.json"))] == PROBE
    assert {p for p, k in kinds.items() if k == running_cache.FOREIGN} == set(look_alikes)
    result = running_cache.prune(root, every=True)
    assert {e.path for e in result.foreign} == set(look_alikes)
    assert kept in {e.path for e in result.removed} and not kept.exists()
    assert all((folder / "mine.txt").read_text() == "keep me" for folder in look_alikes)
