"""Finding a CUDA toolkit (nvcc) and asking it which archs it can build."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from . import proc
from .archs import Arch
from .errors import ConfigError, ToolError

NVCC_HINT = (
    "install a CUDA toolkit and put its bin/ on PATH, or set CUDA_HOME to it "
    "(PyPI: pip install 'nvidia-cuda-nvcc' 'nvidia-cuda-runtime' 'nvidia-cuda-cccl' 'nvidia-cuda-crt' 'nvidia-nvvm')"
)
_VERSION_RE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_CODE_RE = re.compile(r"^sm_(\d+)([af]?)$")
_DRY_VAR_RE = {
    name: re.compile(rf"^#\$ {name}=(.+?)/?$", re.MULTILINE) for name in ("_HERE_", "TOP")
}


@dataclass(frozen=True, kw_only=True)
class Toolkit:
    nvcc: Path
    root: Path
    version: Version  # e.g. 13.0.88
    sass: frozenset[int]  # compute capabilities as numbers (75, 80, ...) from --list-gpu-code
    cudart_static: Path | None

    @property
    def short(self) -> str:
        """``cu130`` for CUDA 13.0."""
        return f"cu{self.version.major}{self.version.minor}"

    def supports(self, arch: Arch) -> bool:
        number = arch.major * 10 + arch.minor
        if number not in self.sass:
            return False
        # Arch-specific (sm_90a) code arrived with CUDA 12.0, family-specific (sm_100f) with 12.9.
        if arch.suffix == "a":
            return self.version >= Version("12.0")
        if arch.suffix == "f":
            return self.version >= Version("12.9")
        return True

    def describe_range(self) -> str:
        numbers = sorted(self.sass)
        return f"sm_{numbers[0]} to sm_{numbers[-1]}" if numbers else "no archs"


def _candidates(env: Mapping[str, str]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            found.append((Path(env[var]) / "bin" / "nvcc", f"${var}"))
    on_path = proc.which_or_none("nvcc")
    if on_path:
        found.append((Path(on_path), "PATH"))
    found.append((Path("/usr/local/cuda/bin/nvcc"), "/usr/local/cuda"))
    return found


def find_toolkit(env: Mapping[str, str] | None = None) -> Toolkit:
    """The first nvcc of $CUDA_HOME, $CUDA_PATH, PATH and /usr/local/cuda."""
    env = os.environ if env is None else env
    for nvcc, _origin in _candidates(env):
        if nvcc.is_file() and os.access(nvcc, os.X_OK):
            return probe_toolkit(nvcc)
    raise ToolError(
        f"no CUDA toolkit found (looked at $CUDA_HOME, $CUDA_PATH, PATH, /usr/local/cuda): {NVCC_HINT}"
    )


def probe_toolkit(nvcc: Path) -> Toolkit:
    """Ask *nvcc* for its version and the archs it builds."""
    nvcc = nvcc.resolve()
    version_out = proc.run([nvcc, "--version"], hint=NVCC_HINT).stdout
    match = _VERSION_RE.search(version_out)
    if match is None:
        raise ToolError(f"{nvcc} --version printed no CUDA release; is it a real nvcc?")
    codes = proc.run([nvcc, "--list-gpu-code"], hint=NVCC_HINT).stdout.split()
    sass = frozenset(int(m[1]) for c in codes if (m := _CODE_RE.match(c)))
    # nvcc may be a wrapper script; its dry run names the real install (TOP) and driver (_HERE_).
    dry = proc.run(
        [nvcc, "--dryrun", "-x", "cu", "-E", os.devnull], hint=NVCC_HINT, check=False
    ).stderr
    here = _DRY_VAR_RE["_HERE_"].search(dry)
    top = _DRY_VAR_RE["TOP"].search(dry)
    real = Path(here[1]) / "nvcc" if here else nvcc
    root = Path(top[1]).resolve() if top else real.parent.parent
    libdirs = (root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib")
    static = next(
        (d / "libcudart_static.a" for d in libdirs if (d / "libcudart_static.a").is_file()), None
    )
    return Toolkit(nvcc=real, root=root, version=Version(match[2]), sass=sass, cudart_static=static)


def check_archs(toolkit: Toolkit, archs: tuple[Arch, ...], arch_set: str) -> None:
    """Refuse, before any compile, an arch the toolkit can't build."""
    for arch in archs:
        if toolkit.supports(arch):
            continue
        number = arch.major * 10 + arch.minor
        if number < min(toolkit.sass, default=0):
            fix = "use an older CUDA toolkit (CUDA 12.x builds sm_50 to sm_121; 11.8 builds sm_35 to sm_90)"
        elif arch.suffix == "f":
            fix = "family-specific 'f' archs need CUDA 12.9 or newer"
        else:
            fix = "use a newer CUDA toolkit"
        raise ConfigError(
            f"arch set '{arch_set}': CUDA {toolkit.version.major}.{toolkit.version.minor} at "
            f"{toolkit.root} can't build {arch} ({arch.sass}); it builds {toolkit.describe_range()}; {fix}"
        )
