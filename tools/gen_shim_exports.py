"""Regenerate src/wheelforge/data/shim_exports.json: the C shim functions (aoti_torch_*,
torch_*) that each released torch exports, read from the dynamic symbol tables of
libtorch_cpu.so and libtorch_cuda.so inside its wheels, or from the release's own shim headers.

    python tools/gen_shim_exports.py --torch 2.15.0     # download the release's wheel, add it
    python tools/gen_shim_exports.py WHEEL [WHEEL ...]  # or read wheels already on disk
    python tools/gen_shim_exports.py --git ~/pytorch --tag v2.15.0   # a tag of a pytorch clone
    python tools/gen_shim_exports.py --source ~/pytorch              # a checkout (version.txt)
    # CUDA builds (PyPI's default on Linux x86_64) carry libtorch_cuda.so too, where the
    # CUDA-only shims live; a CPU-only wheel leaves them out (a warning says so).

From source, a release's exports are the functions its shim headers declare
(torch/csrc/inductor/aoti_torch/c, .../generated, torch/csrc/stable/c; every AOTI_TORCH_EXPORT
declaration is defined in libtorch_cpu or libtorch_cuda), less the MPS and XPU headers no Linux
CUDA build compiles: for torch 2.13 the two readings agree name for name
(tests/unit/test_shim_versions.py). A --source folder may also be an installed torch's package
folder (its include/ holds the same headers).

Only the major.minor of each release is kept; patch releases do not add shims. The output
merges with the existing file, so versions can be added one at a time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from io import BytesIO
from pathlib import Path

from elftools.elf.elffile import ELFFile
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from wheelforge.toolchain.shims import SHIM_DIRS, declared_exports

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
    parser.add_argument(
        "--source", type=Path, metavar="DIR",
        help="a pytorch source checkout (or an installed torch package folder) whose shim headers to read",
    )  # fmt: skip
    parser.add_argument(
        "--git", type=Path, metavar="REPO", help="a pytorch clone to read --tag from"
    )
    parser.add_argument("--tag", metavar="TAG", help="the release tag to read (v2.15.0)")
    parser.add_argument(
        "--release", metavar="X.Y", help="the release a --source tree is (default: its version.txt)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help=argparse.SUPPRESS)  # tests
    args = parser.parse_args()
    if bool(args.git) != bool(args.tag):
        parser.error("--git and --tag go together: --git ~/pytorch --tag v2.15.0")
    if not (args.wheels or args.torch or args.source or args.git):
        parser.error(
            "name torch releases (--torch 2.15.0), wheel files, --source DIR or --git/--tag"
        )
    with tempfile.TemporaryDirectory(prefix="gen-shim-exports-") as tmp:
        wheels = list(args.wheels) + [_download(v, Path(tmp)) for v in args.torch]
        entries = [_from_wheel(w) for w in wheels]
        if args.source:
            entries.append(_from_tree(args.source, args.release, f"{args.source.name} (source)"))
        if args.git:
            tree = _checkout_tag(args.git, args.tag, Path(tmp) / "tag")
            release = args.release or args.tag.lstrip("v")
            entries.append(_from_tree(tree, release, f"pytorch {args.tag} (source)"))
        _update(entries, args.out)
    return 0


Entry = tuple[str, str, set[str]]  # major.minor, where it was read, the shim functions


def _key(version: str) -> str:
    parsed = Version(version)
    return f"{parsed.major}.{parsed.minor}"


def _checkout_tag(repo: Path, tag: str, dest: Path) -> Path:
    """The shim header folders and version.txt of *tag*, unpacked from the clone's objects."""
    dest.mkdir(parents=True)
    paths = [*SHIM_DIRS, "version.txt"]
    cmd = ["git", "-C", str(repo), "archive", "--format=tar", tag, "--", *paths]
    print("$ " + " ".join(cmd), file=sys.stderr)
    archive = subprocess.run(cmd, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _from_tree(root: Path, release: str | None, label: str) -> Entry:
    """A release's exports from its shim headers: under *root* (a source tree) or under
    *root*/include (an installed torch)."""
    include = root / "include" if (root / "include" / SHIM_DIRS[0]).is_dir() else root
    if not (include / SHIM_DIRS[0]).is_dir():
        raise SystemExit(
            f"{root}: no {SHIM_DIRS[0]} (neither a pytorch source tree nor a torch package)"
        )
    if release is None:
        version_txt = root / "version.txt"
        if not version_txt.is_file():
            raise SystemExit(f"{root}: no version.txt; say which release it is with --release 2.15")
        release = version_txt.read_text().strip()
    names = set(declared_exports(include))
    key = _key(release)
    print(f"{key}: {len(names)} shim functions declared in {label}")
    return key, f"{label}: {', '.join(SHIM_DIRS)}", names


def _from_wheel(wheel: Path) -> Entry:
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
    print(f"{key}: {len(names)} shim functions from {wheel.name}")
    return key, f"{wheel.name}: {', '.join(libs)}", names


def _download(version: str, dest: Path) -> Path:
    """The torch wheel of *version* for this platform and Python, from the configured index."""
    folder = dest / version
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--dest", str(folder), f"torch=={version}"]  # fmt: skip
    print("$ " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    return next(folder.glob("torch-*.whl"))


def _update(entries: list[Entry], out: Path) -> None:
    table = json.loads(out.read_text()) if out.exists() else {"versions": {}}
    for key, source, names in entries:
        table["versions"][key] = {"source": source, "symbols": sorted(names)}
    table["versions"] = dict(
        sorted(table["versions"].items(), key=lambda kv: tuple(map(int, kv[0].split("."))))
    )
    out.write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
