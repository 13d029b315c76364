"""Isolated, cached Python environments that hold one torch: the build's torch for the unstable
ABI and the test runs' (one environment per torch build, shared by both).

Two kinds: one installs ``torch==VERSION`` with pip (from whatever indexes pip is configured
with), the other borrows the torch of an existing interpreter (``--torch-from``, for machines
whose torch comes with the image and that can't download one): a venv of that interpreter whose
``.pth`` file appends the interpreter's site-packages, so torch is importable and pip sees it
as installed, while everything wheelforge installs stays in the venv.

Environments live in ``<cache>/envs/<name>``, named by the torch build they really hold
(``torch-2.14.1+cu130-<base Python>``): which build pip gives depends on its configuration (a
CPU build first on some machines), so a request (``torch 2.14.1``, a CUDA build) is answered by
reading the markers, not by a name computed from the request. The test runs' requirements are
installed into the environment beside torch when first asked for, never replacing torch (a pip
constraint pins it). One is built in a temporary folder and renamed into place only once it
works, so an interrupted build never leaves a half-made environment behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from wheelforge.foundation import cachefiles, fsutil, locks, log, proc, readers, removal, writers
from wheelforge.foundation.document import DocumentError, from_document, to_document
from wheelforge.foundation.errors import EnvironmentProblem, ToolError

ENVS = "envs"  # <cache>/envs/<name>
MARKER = "wheelforge-env.json"  # written last: an environment without it is not (yet) one; its mtime: last used
PIP_HINT = "pip ships with Python; python -m ensurepip"
_PROBE = (
    "import json, sys, torch; print(json.dumps({'torch': torch.__version__, "
    "'cuda_build': torch.version.cuda, 'cuda': torch.cuda.is_available(), "
    "'python': '%d.%d' % sys.version_info[:2]}))"
)
_SITE_DIRS = "import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps([p['purelib'], p['platlib']]))"


class TorchUnavailable(ToolError):
    """pip found no distribution of the asked-for torch for this Python and platform."""


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """``torch`` to install, or ``torch_from``: the interpreter whose torch to borrow;
    ``requires``: installed beside it; ``cuda``: a CUDA build of torch is needed (an extension
    with ``.cu`` sources compiles against torch's CUDA headers and links libc10_cuda)."""

    torch: str | None = None
    torch_from: Path | None = None
    requires: tuple[str, ...] = ()
    cuda: bool = False

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
    cuda_build: str | None = None  # the CUDA release torch was built with (torch.version.cuda)


def _made_from(spec: EnvSpec) -> str:
    """What an environment is made from: the borrowed interpreter (its site-packages are linked
    in), else this Python's base installation. ``python -m venv`` run from a venv builds on the
    base one, so every clone's own ``.venv`` shares one environment per torch (gigabytes each)."""
    if spec.torch_from is not None:
        return str(spec.torch_from)
    return f"{sys.base_prefix} {sys.version}"


def _digest(spec: EnvSpec) -> str:
    return hashlib.sha256(_made_from(spec).encode()).hexdigest()[:10]


def _key(spec: EnvSpec) -> str:
    """The folder of a borrowed torch (one per interpreter), or the stem of a pip-installed
    one's: ``torch-<build>-<digest>`` once pip said which build it is (_name)."""
    if spec.torch_from is not None:
        return f"torch-from-{_digest(spec)}"
    return f"torch-{spec.torch}-{_digest(spec)}"


def _name(spec: EnvSpec, torch: str) -> str:
    return _key(spec) if spec.torch_from is not None else f"torch-{torch}-{_digest(spec)}"


def _satisfies(info: Marker, spec: EnvSpec) -> bool:
    """Whether an environment's marker *info* answers *spec*: made from the same Python (or
    interpreter), holding the asked-for torch release (any build of it, unless the spec names a
    local label), a CUDA build where one is needed."""
    if info.made_from != _made_from(spec):
        return False
    if spec.cuda and not info.cuda_build:
        return False
    if spec.torch is None:
        return True
    try:
        held, wanted = Version(info.torch), Version(spec.torch)
    except InvalidVersion:
        return False
    return held == wanted if wanted.local else held.public == wanted.public


_OMIT = {"omit_if_none": True}


@dataclass(frozen=True, kw_only=True)
class Marker:
    """An environment's marker (written last by _build; the keys older wheelforges did not
    write may be absent): an environment whose marker has another shape is not one, and is
    made again."""

    spec: str | None = field(default=None, metadata=_OMIT)
    made_from: str | None = field(default=None, metadata=_OMIT)
    requires: tuple[str, ...] = ()
    torch: str
    cuda_build: str | None = None  # None: a CPU build (older markers may lack the key)
    cuda: bool
    python: str


def _marker_text(marker: Marker) -> str:
    return json.dumps(to_document(marker))


def _read_marker(path: Path) -> Marker | None:
    """The marker of the environment *path*, None when it has none; a malformed one is
    discarded with a note (cachefiles.load), so the environment is made again."""
    return cachefiles.load(
        path / MARKER, Marker, what="the test environment's marker", within=path.parent
    )


def find(spec: EnvSpec, cache: Path) -> Path | None:
    """The cached environment that answers *spec*, if any: a CUDA build first (it serves a
    test as well as a build), then the most recently used."""
    envs = cache / ENVS
    pattern = _key(spec) if spec.torch_from is not None else f"torch-*-{_digest(spec)}"
    found = []
    for path in envs.glob(pattern):
        info = _read_marker(path)
        if info is not None and _satisfies(info, spec):
            found.append((bool(info.cuda_build), (path / MARKER).stat().st_mtime, path))
    return max(found)[2] if found else None


def _pip(env_python: Path) -> list[str | Path]:
    """This interpreter's pip, run against *env_python* (pip's --python), so environments need
    no pip of their own."""
    return [sys.executable, "-m", "pip", "--python", env_python, "--disable-pip-version-check"]


def pip(env_python: Path, *args: str | Path, what: str) -> proc.Result:
    return proc.run([*_pip(env_python), *args], hint=PIP_HINT, what=what, timeout=proc.DOWNLOAD_S)


def _env_python(path: Path) -> Path:
    return path / "bin" / "python"


def _probe(python: Path) -> dict[str, object]:
    out = proc.run(
        [python, "-c", _PROBE], hint=PIP_HINT, what="the environment's torch", timeout=proc.PROBE_S
    ).stdout
    try:
        info = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        info = None
    if not cachefiles.fits(
        info, {"torch": str, "cuda_build": (str, None), "cuda": bool, "python": str}
    ):
        raise ToolError(
            f"{python} printed {out.strip()[-80:]!r} where its torch's version was asked for"
        )
    return dict(info)


def _create(spec: EnvSpec, tmp: Path) -> dict[str, object]:
    """A venv in *tmp* with the torch of *spec*; torch's answer about itself."""
    base = spec.torch_from or Path(sys.executable)
    proc.run(
        [base, "-m", "venv", "--without-pip", tmp],
        hint="install Python's venv module",
        what="python -m venv",
        timeout=proc.TOOL_S,
    )
    python = _env_python(tmp)
    if spec.torch_from is not None:
        dirs = json.loads(
            proc.run(
                [spec.torch_from, "-c", _SITE_DIRS], hint=PIP_HINT, timeout=proc.PROBE_S
            ).stdout
        )
        site = Path(
            json.loads(
                proc.run([python, "-c", _SITE_DIRS], hint=PIP_HINT, timeout=proc.PROBE_S).stdout
            )[0]
        )
        # Appended after the venv's own site-packages: the venv's packages win.
        writers.write_atomic(
            site / "_wheelforge_torch_from.pth", "".join(f"{d}\n" for d in dict.fromkeys(dirs))
        )
        info = _probe(python)
        if spec.cuda and not info.get("cuda_build"):
            raise EnvironmentProblem(
                f"the torch of {spec.torch_from} is {info['torch']}, a CPU build, but the extension has "
                ".cu sources and compiles against a CUDA build of torch; name a Python whose torch is one"
            )
        return info
    assert spec.torch is not None
    _pip_torch(spec, python, f"torch=={spec.torch}")
    info = _probe(python)
    if spec.cuda and not info.get("cuda_build") and not Version(spec.torch).local:
        # pip's configuration offered a CPU build first (a local +cpu wheel sorts above the
        # plain release): ask for the plain release, which is PyPI's CUDA build.
        log.warning(
            f"pip gave torch {info['torch']}, a CPU build; the extension has .cu sources, so "
            f"wheelforge asks for torch==={spec.torch} (PyPI's CUDA build) instead"
        )
        _pip_torch(spec, python, f"torch==={spec.torch}")
        info = _probe(python)
    if spec.cuda and not info.get("cuda_build"):
        raise EnvironmentProblem(
            f"pip gives torch {info['torch']} here, a CPU build, but the extension has .cu sources and "
            "compiles against a CUDA build of torch; point pip at one (e.g. PIP_INDEX_URL="
            "https://download.pytorch.org/whl/cu130) or use --torch-from with a Python whose torch is one"
        )
    return info


# What a torch costs (docs/terminal-output.md): PyPI's Linux wheel of torch is its CUDA build,
# which brings the nvidia-* wheels (torch 2.12.0: 29 packages, 4.9 GB installed; its torch,
# cudnn, nccl and triton wheels alone 1.3 GB to download); a CPU build (download.pytorch.org/
# whl/cpu) is one 0.2 GB wheel. pip says no size before it downloads, nor does the index
# without a query of its own per file: the order of size is said instead.
CUDA_TORCH_DOWNLOAD = "2 to 3 GB to download with its nvidia-* wheels, about 5 GB on disk"
CPU_TORCH_DOWNLOAD = "about 0.2 GB"


def download_warning(spec: EnvSpec, envs: Path) -> str:
    """Said before pip installs a torch into a new environment: what it may download, and the
    ways to do without (pip's own cache or local indexes may make it less: pip decides)."""
    which = (
        "a CUDA build (the extension has .cu sources)"
        if spec.cuda
        else f"PyPI's CUDA build unless pip's index gives a CPU one ({CPU_TORCH_DOWNLOAD})"
    )
    return (
        f"torch {spec.torch} is not in the cache ({envs}): pip will install it into a new "
        f"environment there, {which}: {CUDA_TORCH_DOWNLOAD}. To use "
        "a torch already installed instead: --torch-from PYTHON (build and test), or torch: "
        "installed in matrix.yaml (build)"
    )


def _pip_torch(spec: EnvSpec, python: Path, requirement: str) -> None:
    from wheelforge.toolchain import downloads  # pip's progress: only when an environment is made

    try:
        # torch with CUDA is gigabytes: pip's own progress is shown (toolchain/downloads.py).
        downloads.pip(
            [*_pip(python), "install", requirement],
            hint=PIP_HINT,
            what=f"pip install into the {spec.label} environment",
            target=python.parent.parent,
        )
    except ToolError as exc:
        text = exc.details or ""
        if "No matching distribution found for torch" in text or "Could not find a version" in text:
            raise TorchUnavailable(
                f"torch {spec.torch} can't be installed here: pip found no matching distribution"
            ) from None
        raise


def ensure_env(spec: EnvSpec, cache: Path) -> TestEnv:
    """The environment for *spec*, built on first use and reused afterwards (with *spec*'s
    requirements added when it lacks them)."""
    path = find(spec, cache)
    created = False
    if path is None:
        with locks.hold(_request_lock(spec, cache), what=f"the {spec.label} environment"):
            path = find(spec, cache)  # another process may have made it while this one waited
            if path is None:
                path = _build(spec, cache)
                created = True
    info = _with_requires(path, spec)
    with contextlib.suppress(OSError):  # last used, for `wheelforge cache prune`
        os.utime(path / MARKER)
    # Re-probe a borrowed torch: the interpreter it comes from may have changed.
    if spec.torch_from is not None and not created:
        info = replace(_marker(spec, _probe(_env_python(path))), requires=info.requires)
    return TestEnv(
        spec=spec,
        path=path,
        python=_env_python(path),
        torch=info.torch,
        cuda=info.cuda,
        created=created,
        cuda_build=info.cuda_build or None,
    )


def _request_lock(spec: EnvSpec, cache: Path) -> Path:
    """Held while an environment for *spec* is made: the name of the one made is known only
    once pip has said which build it installed."""
    return cache / ENVS / f".{_key(spec)}.creating.lock"


def _with_requires(path: Path, spec: EnvSpec) -> Marker:
    """The marker of *path*, after installing the requirements of *spec* it lacks (alone in the
    environment meanwhile; torch pinned so that no requirement replaces it). A marker removed
    meanwhile (malformed) is written again from the environment's own answer."""
    info = _read_marker(path)
    if info is not None and all(r in info.requires for r in spec.requires):
        return info
    with writing(path):
        info = _read_marker(path) or _marker(spec, _probe(_env_python(path)))
        missing = [r for r in spec.requires if r not in info.requires]
        if missing:
            with log.step(f"install {', '.join(missing)} into {path}"):
                _pip_pinned(_env_python(path), info.torch, missing)
            info = replace(info, requires=(*info.requires, *missing))
        writers.write_if_changed(path / MARKER, _marker_text(info))
    return info


def _marker(spec: EnvSpec, probed: dict[str, object]) -> Marker:
    """The marker of an environment made for *spec*, whose torch answered *probed* (_probe)."""
    try:
        return from_document(
            Marker,
            {"spec": spec.torch or str(spec.torch_from), "made_from": _made_from(spec), **probed},
        )
    except DocumentError as exc:
        raise ToolError(f"the environment's torch answered {probed!r} ({exc})") from None


def _pip_pinned(python: Path, torch: str, requirements: Sequence[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="wheelforge-pin-") as folder:
        constraint = Path(folder) / "torch.txt"
        writers.write_atomic(constraint, f"torch=={torch}\n")
        pip(
            python,
            "install",
            "--quiet",
            "-c",
            constraint,
            *requirements,
            what=f"pip install {' '.join(requirements)}",
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
    else None (no marker, or one of another shape: never removed here, `cache list` only looks)."""
    try:
        text = readers.read_text(path / MARKER, cap=readers.STATE_CAP)
        info = from_document(Marker, json.loads(text))
    except (OSError, ValueError, RecursionError, readers.FileRefused):  # DocumentError too
        return None
    return f"torch {info.torch}, Python {info.python}"


def _build(spec: EnvSpec, cache: Path) -> Path:
    """Create an environment in a temporary folder and rename it into place, under the name
    of the torch build it holds, once it works."""
    envs = cache / ENVS
    envs.mkdir(parents=True, exist_ok=True)
    tmp = envs / f".{_key(spec)}.{os.getpid()}{fsutil.STAGED_SUFFIX}"
    removal.remove(tmp, within=envs)
    from wheelforge.foundation.progress import clock

    start = time.monotonic()
    if spec.torch_from is None:
        log.warning(download_warning(spec, envs))
    try:
        with log.step(f"create the {spec.label} environment in {envs}"):
            info = _create(spec, tmp)
        final = envs / _name(spec, str(info["torch"]))  # named by the torch build it holds
        log.info(
            f"  torch {info['torch']}, Python {info['python']}: made in "
            f"{clock(time.monotonic() - start)}, {final.name}"
        )
        with writing(final):
            if _read_marker(final) is not None:  # the same build, made under another request
                return final
            writers.write_atomic(tmp / MARKER, _marker_text(_marker(spec, info)))
            removal.remove(final, within=envs)
            tmp.replace(final)
        return final
    finally:
        removal.remove(tmp, within=envs)


def install_wheel(env: TestEnv, wheel: Path, dist_name: str) -> None:
    """Put *wheel* into *env*, replacing any earlier build of the same distribution.

    In an environment wheelforge made, the ordinary way: pip resolves the dependencies. In a
    borrowed one (--torch-from) the interpreter's packages are the user's, taken as they are: pip
    walks the dependencies of everything already installed, so a torch whose own requirement is
    unmet there (an image's torch beside setuptools 82, say) would send it to an index the
    machine may not have. So the wheel goes in without dependencies, and pip is asked only for
    those of the wheel's own requirements the environment does not satisfy."""
    pip(env.python, "uninstall", "--yes", "--quiet", dist_name, what="pip uninstall")
    if env.spec.torch_from is None:
        pip(env.python, "install", "--quiet", wheel, what=f"pip install {wheel.name}")
        return
    pip(env.python, "install", "--quiet", "--no-deps", wheel, what=f"pip install {wheel.name}")
    unmet = unmet_requirements(env.python, dist_name)
    if unmet:
        pip(env.python, "install", "--quiet", *unmet, what=f"pip install {' '.join(unmet)}")


def unmet_requirements(env_python: Path, dist_name: str) -> list[str]:
    """*dist_name*'s requirements (Requires-Dist, markers evaluated for *env_python*) that no
    distribution installed there satisfies, read from ``pip inspect``."""
    out = pip(env_python, "inspect", what="pip inspect").stdout
    try:
        report = json.loads(out)
        installed = {
            canonicalize_name(d["metadata"]["name"]): d["metadata"] for d in report["installed"]
        }
        environment = dict(report["environment"])
    except (ValueError, KeyError, TypeError) as e:
        raise ToolError(f"pip inspect printed no report wheelforge can read ({e})") from e
    own = installed.get(canonicalize_name(dist_name))
    if own is None:
        raise ToolError(f"pip installed {dist_name}, but pip inspect does not list it")
    unmet: list[str] = []
    for line in own.get("requires_dist") or ():
        try:
            req = Requirement(line)
        except InvalidRequirement as e:
            raise ToolError(
                f"{dist_name}'s METADATA has a Requires-Dist pip accepted but packaging does not: {e}"
            ) from e
        if req.marker is not None and not req.marker.evaluate({**environment, "extra": ""}):
            continue
        have = installed.get(canonicalize_name(req.name))
        try:
            met = have is not None and req.specifier.contains(
                Version(have["version"]), prereleases=True
            )
        except InvalidVersion:
            met = False  # a legacy version no specifier can match: pip decides
        if not met:
            unmet.append(str(req))
    return unmet
