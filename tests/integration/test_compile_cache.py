"""Compile caches and no-op rebuilds with the real tools: ccache across folders, a Redis
server as the remote cache of sccache and ccache, and the freshness stamp."""

from __future__ import annotations

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

from tests.integration.helpers import needs_nvcc

pytestmark = needs_nvcc

BIN = Path(sys.executable).parent
KERNEL = """\
#include <cstdio>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
void launch_scale(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""
MATRIX = """\
package: {name: tiny, version: '1.0', packages: [tiny]}
extension: {name: tiny._C, sources: [csrc/*.cpp, csrc/*.cu]}
torch: '>=2.10'
arch-sets: '8.0'
"""
STATS_RE = re.compile(r"compile cache (\w+): (\d+) hit\(s\), (\d+) miss\(es\).* for (\d+) compile")


def tiny_project(root: Path) -> Path:
    """A one-kernel project: a fresh clone of the same sources wherever it is written."""
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "scale.cu").write_text(KERNEL)
    (root / "csrc" / "ops.cpp").write_text("int tiny_answer() { return 42; }\n")
    (root / "matrix.yaml").write_text(MATRIX)
    return root


def build(
    root: Path, *args: str, env: dict[str, str]
) -> tuple[str, tuple[str, int, int, int] | None]:
    proc = subprocess.run(
        [sys.executable, "-m", "wheelforge", "build", *args], cwd=root, capture_output=True,
        text=True, env={**os.environ, "COLUMNS": "300", **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stderr + proc.stdout  # steps on stderr, the summary on stdout
    m = STATS_RE.search(out)
    return out, (m[1], int(m[2]), int(m[3]), int(m[4])) if m else None


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
    (root / "csrc" / "scale.cu").write_text('#include "scale.h"\n' + KERNEL)
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
        [server, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
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
        print(f"\nsccache+redis: cold {cold} in {cold_s:.1f}s, clone {warm} in {warm_s:.1f}s; "
              f"ccache+redis: cold {c_cold} in {c_cold_s:.1f}s, clone {c_warm} in {c_warm_s:.1f}s")  # fmt: skip


def test_sccache_adding_an_arch_compiles_only_that_arch(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "p")
    env = {"SCCACHE_DIR": str(tmp_path / "sccache")}
    build(root, "--archs", "8.0", "--compile-cache", "sccache", env=env)
    err, stats = build(root, "--archs", "8.0 9.0", "--compile-cache", "sccache", env=env)
    # Another arch list is another variant, in its own build folder: ninja compiles all three
    # sources. The C++ and C objects hit; the nvcc compile bypasses sccache (its step-wise
    # nvcc compile is incompatible with --objdir-as-tempdir and would change .symtab,
    # running/incremental.launchers), so the wheel is the one an uncached build makes.
    assert "compiled 3 of 3 sources" in err
    assert stats == ("sccache", 2, 0, 2)
    cached = {w.read_bytes() for w in (root / "dist").glob("*.whl")}
    build(root, "--archs", "8.0 9.0", "--compile-cache", "none", "--build-dir",
          str(tmp_path / "plain"), "--out", str(tmp_path / "plain-dist"), env=env)  # fmt: skip
    (plain,) = (tmp_path / "plain-dist").glob("*.whl")
    assert plain.read_bytes() in cached


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
