"""Shared fixtures. Unit tests (tests/unit) are hermetic: a fixture makes any attempt to start a
process (subprocess, os.system, os.fork, os.posix_spawn, multiprocessing) or to reach the network
(a connection, a datagram or a bound port on an IP socket, a host name looked up) fail loudly;
UNIX sockets, which some hostile fixtures bind, stay. Integration tests (tests/integration) run
real tools, are marked, and run after the unit tests. Their shared helpers are in
tests/integration/helpers.py."""

from __future__ import annotations

import _posixsubprocess  # type: ignore[import-not-found]  # subprocess's and multiprocessing's fork+exec
import ipaddress
import os
import socket
import subprocess

import pytest

# Every way the standard library starts a process: subprocess.Popen and multiprocessing's
# spawn/forkserver go through _posixsubprocess.fork_exec, its fork start method through os.fork.
_PROCESS_STARTS = (
    (subprocess, "Popen"),
    (_posixsubprocess, "fork_exec"),
    *((os, name) for name in ("system", "fork", "forkpty", "posix_spawn", "posix_spawnp")),
    *((os, name) for name in dir(os) if name.startswith(("exec", "spawn"))),
)
_IP_FAMILIES = (socket.AF_INET, socket.AF_INET6)


def _refuse(what: str) -> object:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"unit tests must not {what}: {args[0] if args else kwargs}")

    return refuse


def _ip_only(what: str, method: object) -> object:
    """*method* of socket.socket, refused on an IP socket (a UNIX socket may still bind)."""

    def guarded(sock: socket.socket, *args: object, **kwargs: object) -> object:
        if sock.family in _IP_FAMILIES:
            raise AssertionError(f"unit tests must not {what}: {args[0] if args else kwargs}")
        return method(sock, *args, **kwargs)  # type: ignore[operator]

    return guarded


def _no_lookup(real: object) -> object:
    """socket.getaddrinfo that answers for IP literals and no host, and refuses a name."""

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if host not in (None, b"", ""):
            try:
                ipaddress.ip_address(host.decode() if isinstance(host, bytes) else str(host))
            except ValueError:
                raise AssertionError(f"unit tests must not look up host names: {host}") from None
        return real(host, *args, **kwargs)  # type: ignore[operator]

    return getaddrinfo


def hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make starting a process or reaching the network fail for the rest of the test."""
    for module, name in _PROCESS_STARTS:
        if hasattr(module, name):
            monkeypatch.setattr(module, name, _refuse("start processes"))
    for name, what in (
        ("connect", "open network connections"),
        ("connect_ex", "open network connections"),
        ("sendto", "send datagrams"),
        ("bind", "bind network ports"),
    ):
        monkeypatch.setattr(socket.socket, name, _ip_only(what, getattr(socket.socket, name)))
    monkeypatch.setattr(socket, "getaddrinfo", _no_lookup(socket.getaddrinfo))
    monkeypatch.setattr(socket, "gethostbyname", _refuse("look up host names"))


@pytest.fixture(autouse=True)
def _hermetic_unit_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "integration" in request.keywords:
        return
    if "tests/unit" not in request.node.nodeid.replace("\\", "/"):
        return
    hermetic(monkeypatch)


def is_integration(item: pytest.Item) -> bool:
    return "tests/integration" in item.nodeid.replace("\\", "/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks tests/integration's tests `integration`, and runs the unit tests first, then the
    integration tests (each keeps its own order) where a run holds both (`pytest tests -m ...`)."""
    for item in items:
        if is_integration(item):
            item.add_marker(pytest.mark.integration)
    items.sort(key=is_integration)


# The real projects' smoke tests are payloads: `wheelforge test` runs them against the projects'
# wheels (tests/integration/test_real_projects.py), never this suite's collection.
collect_ignore_glob = ["integration/projects/*"]
