"""The GPUs of the machine a build runs on, for ``pip install .`` building for the local GPU:
asked of torch in the build environment, else of nvidia-smi. No GPU visible is a normal answer."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from wheelforge.foundation import proc

# One "major.minor" per visible GPU, from the build environment's torch (a CPU torch: none).
_PROBE = (
    "import torch\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "print(' '.join('%d.%d' % torch.cuda.get_device_capability(i) for i in range(n)))\n"
)
_CAPABILITY_RE = re.compile(r"^[0-9]{1,2}\.[0-9]$")


def parse_capabilities(text: str) -> str | None:
    """An arch list of the distinct capabilities in *text* (whitespace- or line-separated
    "major.minor", as torch's probe and ``nvidia-smi --query-gpu=compute_cap`` print them),
    oldest first; None when there is none."""
    found = {word for word in text.split() if _CAPABILITY_RE.match(word)}
    ordered = sorted(found, key=lambda c: tuple(int(p) for p in c.split(".")))
    return " ".join(ordered) or None


def local_capabilities(python: Path) -> str | None:
    """The local GPUs' capabilities as an arch list ("9.0"), or None where no GPU is visible."""
    result = proc.run(
        [python, "-c", _PROBE], hint="the build Python", check=False, timeout=proc.PROBE_S
    )
    if result.returncode == 0 and (found := parse_capabilities(result.stdout)):
        return found
    if shutil.which("nvidia-smi") is None:
        return None
    smi = proc.run(
        ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
        hint="part of the NVIDIA driver",
        check=False,
        timeout=proc.PROBE_S,
    )
    return parse_capabilities(smi.stdout) if smi.returncode == 0 else None
