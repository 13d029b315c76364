"""Regenerate src/wheelforge/data/shim_exports.json: the C shim functions (aoti_torch_*,
torch_*) that each released torch actually exports, read from the dynamic symbol tables of
libtorch_cpu.so and libtorch_cuda.so inside its wheels.

    python tools/gen_shim_exports.py --torch 2.15.0     # download the release's wheel, add it
    python tools/gen_shim_exports.py WHEEL [WHEEL ...]  # or read wheels already on disk
    # CUDA builds (PyPI's default on Linux x86_64) carry libtorch_cuda.so too, where the
    # CUDA-only shims live; a CPU-only wheel leaves them out (a warning says so).

Only the major.minor of each wheel is kept; patch releases do not add shims. The output merges
with the existing file, so versions can be added one at a time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from io import BytesIO
from pathlib import Path

from elftools.elf.elffile import ELFFile
from packaging.utils import parse_wheel_filename

OUT = Path(__file__).resolve().parents[1] / "src" / "wheelforge" / "data" / "shim_exports.json"
SHIM_RE = re.compile(r"^(aoti_torch_|torch_)\w+$")
LIBS = ("torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so")


def exported(data: bytes) -> set[str]:
    elf = ELFFile(BytesIO(data))
    dynsym = elf.get_section_by_name(".dynsym")
    return {
        s.name
        for s in dynsym.iter_symbols()
        if s["st_shndx"] != "SHN_UNDEF"
        and s["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
        and s["st_info"]["type"] == "STT_FUNC"
        and SHIM_RE.match(s.name)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="*", type=Path)
    parser.add_argument(
        "--torch", action="append", default=[], metavar="VERSION",
        help="a torch release to download from the package index (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    if not args.wheels and not args.torch:
        parser.error("name torch releases (--torch 2.15.0) or wheel files")
    with tempfile.TemporaryDirectory(prefix="gen-shim-exports-") as tmp:
        wheels = list(args.wheels) + [_download(v, Path(tmp)) for v in args.torch]
        _update(wheels)
    return 0


def _download(version: str, dest: Path) -> Path:
    """The torch wheel of *version* for this platform and Python, from the configured index."""
    folder = dest / version
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--dest", str(folder), f"torch=={version}"]  # fmt: skip
    print("$ " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    return next(folder.glob("torch-*.whl"))


def _update(wheels: list[Path]) -> None:
    table = json.loads(OUT.read_text()) if OUT.exists() else {"versions": {}}
    for wheel in wheels:
        _, version, _, _ = parse_wheel_filename(wheel.name)
        key = f"{version.major}.{version.minor}"
        names: set[str] = set()
        libs = []
        with zipfile.ZipFile(wheel) as zf:
            for lib in LIBS:
                if lib in zf.namelist():
                    names |= exported(zf.read(lib))
                    libs.append(Path(lib).name)
        if "libtorch_cuda.so" not in libs:
            print(
                f"warning: {wheel.name} has no libtorch_cuda.so; CUDA shims are missing from {key}",
                file=sys.stderr,
            )
        table["versions"][key] = {
            "source": f"{wheel.name}: {', '.join(libs)}",
            "symbols": sorted(names),
        }
        print(f"{key}: {len(names)} shim functions from {wheel.name}")
    table["versions"] = dict(
        sorted(table["versions"].items(), key=lambda kv: tuple(map(int, kv[0].split("."))))
    )
    OUT.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
