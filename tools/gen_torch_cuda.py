"""Regenerate src/wheelforge/data/torch-cuda.toml: the CUDA release each torch release's wheel on
PyPI (Linux x86_64, the one ``pip install torch`` gets) is built with, read from that wheel's own
METADATA: its Requires-Dist on CUDA's runtime (nvidia-cuda-runtime-cu12==12.8.90, or
cuda-toolkit[cudart,...]==13.0.2). pip resolves each release and reads only its metadata (PEP 658),
downloading no wheel:

    python tools/gen_torch_cuda.py 2.10.0 2.11.0 ...   # these releases
    python tools/gen_torch_cuda.py                      # every release pip lists from 2.0.0 on
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

OUT = Path(__file__).resolve().parents[1] / "src" / "wheelforge" / "data" / "torch-cuda.toml"
RUNTIME = re.compile(r"^(nvidia-cuda-runtime(?:-cu(\d+))?|cuda-toolkit)$")
HEADER = """\
# The CUDA release of each torch release's wheel on PyPI (Linux x86_64: what `pip install torch`
# installs), read from that wheel's METADATA (its Requires-Dist on nvidia-cuda-runtime-cuNN or
# cuda-toolkit[cudart]) by tools/gen_torch_cuda.py. A release pip could not resolve from PyPI
# where it ran is left out (2.13.0: that machine's pip takes a local CPU build). A binary that needs
# libcudart.so.N loads beside a torch only when that torch brings CUDA N's runtime
# (binaries/torchcuda.py). Other CUDA builds of a release live on download.pytorch.org only.
"""


def _release_cuda(release: str) -> str | None:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        done = subprocess.run(
            [
                sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                "--ignore-installed", "--only-binary", ":all:", "--python-version", "3.11",
                "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                "--platform", "manylinux2014_x86_64", "--target", tmp, "--quiet",
                "--report", str(report), f"torch=={release}",
            ],
            check=False,
        )  # fmt: skip
        if done.returncode != 0:  # not installable here (pip's own cap, no Linux wheel)
            print(f"skipped torch {release}: pip cannot resolve it here", file=sys.stderr)
            return None
        metadata = json.loads(report.read_text())["install"][0]["metadata"]
    for text in metadata.get("requires_dist") or []:
        req = Requirement(text)
        if not RUNTIME.match(req.name):
            continue
        if req.name == "cuda-toolkit" and "cudart" not in req.extras:
            continue
        pinned = next((s.version for s in req.specifier if s.operator == "=="), None)
        if pinned:
            major, minor = Version(pinned).release[:2]
            return f"{major}.{minor}"
    return None


def main() -> None:
    releases = sys.argv[1:]
    if not releases:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", "torch"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        found = re.search(r"Available versions: (.*)", listed)
        assert found, listed
        releases = [
            v
            for v in found[1].split(", ")
            if "+" not in v and Version(v) >= Version("2.0.0") and not Version(v).is_prerelease
        ]
    known: dict[str, str] = {}
    if OUT.exists():
        import tomllib

        known = dict(tomllib.loads(OUT.read_text())["pypi"])
    for release in releases:
        cuda = _release_cuda(release)
        if cuda:
            known[release] = cuda
    lines = [HEADER, "[pypi]"]
    lines += [f'"{r}" = "{known[r]}"' for r in sorted(known, key=Version)]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {len(known)} releases")


if __name__ == "__main__":
    main()
