"""Compile caches and no-op rebuilds with the real tools: ccache across folders, a Redis
server as the remote cache of sccache and ccache, and the freshness stamp."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import ONE_KERNEL, needs_nvcc
from tests.integration.helpers import one_kernel_project as tiny_project

pytestmark = needs_nvcc

BIN = Path(sys.executable).parent
STATS_RE = re.compile(
    r"compile cache (\w+) \(.*?\): of (\d+) compiles?, (\d+) from the cache \(hits\), "
    r"(\d+) compiled \(misses\)"
)


def build(
    root: Path, *args: str, env: dict[str, str]
) -> tuple[str, tuple[str, int, int, int] | None]:
    proc = subprocess.run(
        [sys.executable, "-m", "wheelforge", "build", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "300", **env},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stderr + proc.stdout  # steps on stderr, the summary on stdout
    m = STATS_RE.search(out)
    return out, (m[1], int(m[3]), int(m[4]), int(m[2])) if m else None  # hits, misses, all


def wheel_bytes(root: Path) -> bytes:
    (wheel,) = (root / "dist").glob("*.whl")
    return wheel.read_bytes()


def test_ccache_serves_a_fresh_clone_in_another_folder(tmp_path: Path) -> None:
    env = {"CCACHE_DIR": str(tmp_path / "ccache")}
    first = tiny_project(tmp_path / "a")
    _, cold = build(first, "--compile-cache", "ccache", env=env)
    assert cold == ("ccache", 0, 3, 3)  # scale.cu, ops.cpp, the module init
    err, noop = build(first, "--compile-cache", "ccache", env=env)
    assert "nothing to compile: up to date" in err and noop is None  # ninja did not even run
    clone = tiny_project(tmp_path / "elsewhere" / "b")
    _, warm = build(clone, "--compile-cache", "ccache", env=env)
    assert warm == ("ccache", 3, 0, 3)
    assert wheel_bytes(clone) == wheel_bytes(first)


def test_no_op_stamp_sees_a_changed_header(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "p")
    (root / "csrc" / "scale.h").write_text("#pragma once\n")
    (root / "csrc" / "scale.cu").write_text('#include "scale.h"\n' + ONE_KERNEL)
    env = {"WHEELFORGE_COMPILE_CACHE": "none"}
    build(root, env=env)
    err, _ = build(root, env=env)
    assert "nothing to compile: up to date" in err
    (root / "csrc" / "scale.h").write_text("#pragma once\n// changed\n")
    err, _ = build(root, env=env)
    assert "compiled 1 of 3 sources" in err


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A Redis server on the loopback only, with no persistence and bounded memory."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            server,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            "256mb",
            "--maxmemory-policy",
            "allkeys-lru",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_remote_redis_cache_feeds_clones_with_an_empty_local_cache(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # sccache with its Redis backend: a fresh CI runner clones into the same path, with no
    # local cache at all (sccache then stores only in Redis).
    path = tmp_path / "runner" / "work" / "tiny"
    sccache = {"SCCACHE_REDIS_ENDPOINT": redis_url, "SCCACHE_DIR": str(tmp_path / "unused")}
    start = time.monotonic()
    _, cold = build(tiny_project(path), "--compile-cache", "sccache", env=sccache)
    cold_s = time.monotonic() - start
    first = wheel_bytes(path)
    shutil.rmtree(path)
    start = time.monotonic()
    _, warm = build(tiny_project(path), "--compile-cache", "sccache", env=sccache)
    warm_s = time.monotonic() - start
    assert cold is not None and warm is not None
    assert cold[1] == 0 and warm[2] == 0 and warm[1] == cold[2], (cold, warm)
    assert wheel_bytes(path) == first

    # ccache with Redis as remote storage: another folder, an empty local cache.
    ccache = {"CCACHE_REMOTE_STORAGE": redis_url}
    a, b = tiny_project(tmp_path / "a"), tiny_project(tmp_path / "b")
    start = time.monotonic()
    _, c_cold = build(
        a, "--compile-cache", "ccache", env={**ccache, "CCACHE_DIR": str(tmp_path / "l1")}
    )
    c_cold_s, start = time.monotonic() - start, time.monotonic()
    _, c_warm = build(
        b, "--compile-cache", "ccache", env={**ccache, "CCACHE_DIR": str(tmp_path / "l2")}
    )
    c_warm_s = time.monotonic() - start
    assert c_cold == ("ccache", 0, 3, 3) and c_warm == ("ccache", 3, 0, 3)
    assert wheel_bytes(a) == wheel_bytes(b)
    with capsys.disabled():
        print(
            f"\nsccache+redis: cold {cold} in {cold_s:.1f}s, clone {warm} in {warm_s:.1f}s; "
            f"ccache+redis: cold {c_cold} in {c_cold_s:.1f}s, clone {c_warm} in {c_warm_s:.1f}s"
        )


def _cache_detail(report: Path) -> dict[str, int]:
    (variant,) = json.loads(report.read_text())["variants"]
    return dict(variant["compile"]["cache"]["detail"])


def test_sccache_adding_an_arch_compiles_only_that_arch(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "p")
    env = {"SCCACHE_DIR": str(tmp_path / "sccache")}
    # The 8.0 wheel goes to a folder of its own: the wheel of "8.0 9.0" has the same name, and
    # a build never replaces the wheel another variant published (issue 21).
    build(root, "--archs", "8.0", "--compile-cache", "sccache", "--out", "dist-80", env=env)
    report = tmp_path / "report.json"
    err, _ = build(
        root, "--archs", "8.0 9.0", "--compile-cache", "sccache", "--report", str(report), env=env
    )
    # Another arch list is another variant, in its own build folder; its C++ and C compiles are
    # the 8.0 variant's shared folder's (planning/hostshare.py), up to date: ninja runs k.cu
    # only. nvcc runs through sccache (issue 22), split into its steps: sm_80's cicc and ptxas
    # hit, and cudafe++; only sm_90's run, and the host compile that embeds the fatbin.
    assert "compiled 1 of 3 sources" in err, err
    detail = _cache_detail(report)
    assert detail.get("hit ptx [cicc]") == 1 and detail.get("miss ptx [cicc]") == 1, detail
    assert detail.get("hit cubin [ptxas]") == 1 and detail.get("miss cubin [ptxas]") == 1, detail
    assert detail.get("hit cuda [cudafe++]") == 1, detail
    cached = {w.read_bytes() for w in (root / "dist").glob("*.whl")}
    # The same bytes as that arch set built alone, on an empty cache.
    alone = {"SCCACHE_DIR": str(tmp_path / "empty")}
    build(
        root,
        "--archs",
        "8.0 9.0",
        "--compile-cache",
        "sccache",
        "--build-dir",
        str(tmp_path / "alone"),
        "--out",
        str(tmp_path / "alone-dist"),
        env=alone,
    )
    (plain,) = (tmp_path / "alone-dist").glob("*.whl")
    assert plain.read_bytes() in cached


def test_an_sccache_build_is_reproducible_through_a_private_sccache(tmp_path: Path) -> None:
    """sccache names nvcc's temporaries its own way, so the twin compiles through sccache too,
    on an empty cache of its own (PlanInputs.twin): a real rebuild, the same bytes."""
    root = tiny_project(tmp_path / "p")
    out, stats = build(
        root,
        "--compile-cache",
        "sccache",
        "--verify-reproducible",
        env={"SCCACHE_DIR": str(tmp_path / "sccache")},
    )
    assert stats is not None and stats[0] == "sccache"
    assert "reproducible: a rebuild in another folder is identical" in out


def test_a_clone_packing_the_same_bytes_reuses_the_kept_repair(tmp_path: Path) -> None:
    """auditwheel's output is a function of the input wheel when nothing is grafted: a fresh
    clone copies the kept repair; the reproducibility twin still runs its own."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "CCACHE_DIR": str(tmp_path / "ccache")}
    first, _ = build(tiny_project(tmp_path / "a"), "-v", env=env)
    assert "auditwheel repair" in first
    kept = list((tmp_path / "cache" / "wheelforge" / "repairs").glob("*/*.whl"))
    assert len(kept) == 1
    second, _ = build(tiny_project(tmp_path / "b"), "-v", env=env)
    assert "auditwheel repair" not in second
    assert wheel_bytes(tmp_path / "a") == wheel_bytes(tmp_path / "b")
    twin, _ = build(tiny_project(tmp_path / "c"), "-v", "--verify-reproducible", env=env)
    assert twin.count("auditwheel repair") == 1  # the twin's; the first build's was kept
    assert wheel_bytes(tmp_path / "c") == wheel_bytes(tmp_path / "a")
