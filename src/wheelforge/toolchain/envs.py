"""Isolated, cached Python environments that hold one torch, for testing built wheels.

Two kinds: one installs ``torch==VERSION`` with pip (from whatever indexes pip is configured
with), the other borrows the torch of an existing interpreter (``--torch-from``, for machines
whose torch comes with the image and that can't download one): a venv of that interpreter whose
``.pth`` file appends the interpreter's site-packages, so torch is importable and pip sees it
as installed, while everything wheelforge installs stays in the venv.

Environments live in ``<cache>/envs/<key>``; one is built in a temporary folder and renamed into
place only once it works, so an interrupted build never leaves a half-made environment behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.foundation import fsutil, locks, log, proc
from wheelforge.foundation.errors import ToolError
from wheelforge.foundation.progress import clock
from wheelforge.toolchain import downloads, torchprobe

ENVS = "envs"  # <cache>/envs/<key>
MARKER = "wheelforge-env.json"  # written last: an environment without it is not (yet) one; its mtime: last used
PIP_HINT = "pip ships with Python; python -m ensurepip"
_PROBE = (
    "import json, sys, torch; print(json.dumps({'torch': torch.__version__, "
    "'cuda': torch.cuda.is_available(), 'python': '%d.%d' % sys.version_info[:2]}))"
)
_SITE_DIRS = "import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps([p['purelib'], p['platlib']]))"


class TorchUnavailable(ToolError):
    """pip found no distribution of the asked-for torch for this Python and platform."""


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """``torch`` to install, or ``torch_from``: the interpreter whose torch to borrow."""

    torch: str | None = None
    torch_from: Path | None = None
    requires: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"torch {self.torch}" if self.torch else f"torch of {self.torch_from}"


@dataclass(frozen=True, kw_only=True)
class TestEnv:
    spec: EnvSpec
    path: Path
    python: Path
    torch: str  # the torch version it really has, e.g. 2.13.0+cpu
    cuda: bool  # whether torch sees a GPU there
    created: bool


def _made_from(spec: EnvSpec) -> str:
    """What an environment is made from: the borrowed interpreter (its site-packages are linked
    in), else this Python's base installation. ``python -m venv`` run from a venv builds on the
    base one, so every clone's own ``.venv`` shares one environment per torch (gigabytes each)."""
    if spec.torch_from is not None:
        return str(spec.torch_from)
    return f"{sys.base_prefix} {sys.version}"


def _key(spec: EnvSpec) -> str:
    blob = json.dumps([spec.torch, str(spec.torch_from), sorted(spec.requires), _made_from(spec)])
    digest = hashlib.sha256(blob.encode()).hexdigest()[:10]
    name = f"torch-{spec.torch}" if spec.torch else "torch-from"
    return f"{name}-{digest}"


def _pip(env_python: Path) -> list[str | Path]:
    """This interpreter's pip, run against *env_python* (pip's --python), so environments need
    no pip of their own."""
    return [sys.executable, "-m", "pip", "--python", env_python, "--disable-pip-version-check"]


def pip(env_python: Path, *args: str | Path, what: str) -> proc.Result:
    return proc.run([*_pip(env_python), *args], hint=PIP_HINT, what=what)


def _env_python(path: Path) -> Path:
    return path / "bin" / "python"


def _probe(python: Path) -> dict[str, object]:
    out = proc.run([python, "-c", _PROBE], hint=PIP_HINT, what="the environment's torch").stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _create(spec: EnvSpec, tmp: Path) -> None:
    base = spec.torch_from or Path(sys.executable)
    proc.run(
        [base, "-m", "venv", "--without-pip", tmp],
        hint="install Python's venv module",
        what="python -m venv",
    )
    python = _env_python(tmp)
    if spec.torch_from is not None:
        dirs = json.loads(proc.run([spec.torch_from, "-c", _SITE_DIRS], hint=PIP_HINT).stdout)
        site = Path(json.loads(proc.run([python, "-c", _SITE_DIRS], hint=PIP_HINT).stdout)[0])
        # Appended after the venv's own site-packages: the venv's packages win.
        (site / "_wheelforge_torch_from.pth").write_text(
            "".join(f"{d}\n" for d in dict.fromkeys(dirs))
        )
    packages = ([f"torch=={spec.torch}"] if spec.torch else []) + list(spec.requires)
    if packages:
        try:
            # torch with CUDA is gigabytes: pip's own progress is shown (toolchain/downloads.py).
            downloads.pip(
                [*_pip(python), "install", *packages],
                hint=PIP_HINT,
                what=f"pip install into the {spec.label} environment",
                target=tmp,
            )
        except ToolError as exc:
            text = exc.details or ""
            if spec.torch and (
                "No matching distribution found for torch" in text
                or "Could not find a version" in text
            ):
                raise TorchUnavailable(
                    f"torch {spec.torch} can't be installed here: pip found no matching distribution"
                ) from None
            raise


def ensure_env(spec: EnvSpec, cache: Path) -> TestEnv:
    """The environment for *spec*, built on first use and reused afterwards."""
    path = cache / ENVS / _key(spec)
    marker = path / MARKER
    created = False
    if not marker.is_file():
        with writing(path):
            if not marker.is_file():  # another process may have made it while this one waited
                _build(spec, path)
                created = True
    info = json.loads(marker.read_text())
    with contextlib.suppress(OSError):  # last used, for `wheelforge cache prune`
        os.utime(marker)
    # Re-probe a borrowed torch: the interpreter it comes from may have changed.
    if spec.torch_from is not None and not created:
        info = {**info, **_probe(_env_python(path))}
    return TestEnv(
        spec=spec,
        path=path,
        python=_env_python(path),
        torch=str(info["torch"]),
        cuda=bool(info["cuda"]),
        created=created,
    )


def writing(path: Path) -> contextlib.AbstractContextManager[None]:
    """The lock of one cached environment, held alone: while it is created (or removed by
    `cache prune`). Its users share it (locks.share): builds compiling against its torch, and
    testing()."""
    return locks.hold(lock_path(path), what=f"the test environment {path}")


@contextlib.contextmanager
def testing(path: Path) -> Iterator[None]:
    """Installing a wheel into the environment *path* and testing it there: one `wheelforge
    test` at a time (two would swap each other's wheel), beside any number of builds that
    only compile against its torch; `cache prune` skips it meanwhile."""
    what = f"the test environment {path}"
    with (
        locks.share(lock_path(path), what=what),
        locks.hold(path.parent / f".{path.name}.testing.lock", what=what),
    ):
        yield


def folder_of(python: Path, cache: Path) -> Path | None:
    """The cached environment whose interpreter *python* is, None for any other Python."""
    folder = python.parent.parent
    return folder if folder.parent == cache / ENVS and _env_python(folder) == python else None


def lock_path(path: Path) -> Path:
    """The lock file of the environment *path* (beside it, so it outlives a removal)."""
    return path.parent / f".{path.name}.lock"


def describe(path: Path) -> str | None:
    """What the environment *path* holds, from its marker ("torch 2.13.0+cpu, Python 3.12"),
    else None (no marker, or an unreadable one)."""
    try:
        info = json.loads((path / MARKER).read_text())
        return f"torch {info['torch']}, Python {info['python']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _build(spec: EnvSpec, path: Path) -> None:
    """Create the environment in a temporary folder and rename it into place once it works."""
    start = time.monotonic()
    with (
        fsutil.staged_folder(path) as tmp,
        log.step(f"create the {spec.label} environment in {path}"),
    ):
        _create(spec, tmp)
        info = _probe(_env_python(tmp))
        (tmp / MARKER).write_text(json.dumps({"spec": spec.torch or str(spec.torch_from), **info}))
    took = clock(time.monotonic() - start)
    log.info(f"  torch {info['torch']}, Python {info['python']}: made in {took}")


def install_wheel(env: TestEnv, wheel: Path, dist_name: str) -> None:
    """Put *wheel* into *env* the ordinary way (dependencies resolved by pip), replacing any
    earlier build of the same distribution."""
    pip(env.python, "uninstall", "--yes", "--quiet", dist_name, what="pip uninstall")
    pip(env.python, "install", "--quiet", wheel, what=f"pip install {wheel.name}")


def build_torch(
    torch: str | None, *, python: Path, requires: Sequence[str], cache: Path, early: bool = False
) -> torchprobe.TorchEnv:
    """The torch a variant compiles against: *python*'s for the stable ABI (*torch* None); for
    the unstable ABI, an isolated environment with exactly that torch (built on first use, shared
    with ``wheelforge test``, so *requires* are the tests' requirements). *early*: see
    torchprobe.probe_torch."""
    if torch is not None:
        python = ensure_env(EnvSpec(torch=torch, requires=tuple(requires)), cache).python
    return torchprobe.probe_torch(python, cache=cache, early=early)
