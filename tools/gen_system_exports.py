"""Regenerate src/wheelforge/data/system-exports.json: what the system libraries a manylinux
wheel may link (glibc's, libstdc++, libgcc_s, libatomic) export, symbol by symbol, with the
symbol versions they define it at, read from the real libraries' .dynsym and .gnu.version_d:

    python tools/gen_system_exports.py [--root /]   # the libraries of this machine (or a sysroot)

Per symbol: its oldest version and its default one (``@@``), one string where they agree. An
unversioned reference binds to the default version (glibc's do_lookup_x); an older version only
a hidden (compat) one keeps says where old binaries found it: glibc 2.34 moved libdl's,
libpthread's, librt's, libutil's and libanl's functions into libc.so.6 at GLIBC_2.34, keeping
their old versions as compat symbols (dlopen@GLIBC_2.2.5, dlopen@@GLIBC_2.34). Whether a
manylinux tag guarantees a version is auditwheel's policy (systemlibs.py reads it there).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerSymSection

OUT = Path(__file__).resolve().parents[1] / "src" / "wheelforge" / "data" / "system-exports.json"
# The libraries auditwheel's manylinux policies allow that a CUDA extension links, by soname;
# the stubs glibc 2.34 left behind (libdl.so.2, ...) define only placeholders.
LIBRARIES = (
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libutil.so.1",
    "libanl.so.1",
    "libresolv.so.2",
    "libgcc_s.so.1",
    "libatomic.so.1",
    "libstdc++.so.6",
)
FOLDERS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib64")


def _key(version: str) -> tuple[str, tuple[int, ...]]:
    name, _, number = version.partition("_")
    parts = tuple(int(p) for p in number.split(".") if p.isdigit())
    return name, parts


def exports(path: Path) -> dict[str, str | list[str]]:
    with path.open("rb") as f:
        elf = ELFFile(f)
        dynsym = elf.get_section_by_name(".dynsym")
        versym = next(s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection))
        verdef = next(s for s in elf.iter_sections() if isinstance(s, GNUVerDefSection))
        names = {v["vd_ndx"]: next(aux).name for v, aux in verdef.iter_versions()}
        found: dict[str, list[tuple[str, bool]]] = {}
        for index, sym in enumerate(dynsym.iter_symbols()):
            if sym["st_shndx"] == "SHN_UNDEF" or sym["st_info"]["bind"] not in (
                "STB_GLOBAL",
                "STB_WEAK",
            ):
                continue
            ndx = versym.get_symbol(index)["ndx"]
            if isinstance(ndx, str) or (ndx & 0x7FFF) < 2:
                continue
            version = names.get(ndx & 0x7FFF)
            if version is None or version.endswith("_PRIVATE") or "." not in version:
                continue
            found.setdefault(sym.name, []).append((version, bool(ndx & 0x8000)))
    out: dict[str, str | list[str]] = {}
    for name, versions in sorted(found.items()):
        oldest = min((v for v, _ in versions), key=_key)
        public = [v for v, hidden in versions if not hidden]
        if not public:
            continue  # compat only: no new link binds to it
        default = max(public, key=_key)
        out[name] = oldest if oldest == default else [oldest, default]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("/"))
    args = parser.parse_args()
    libraries = {}
    for soname in LIBRARIES:
        path = next(args.root / f / soname for f in FOLDERS if (args.root / f / soname).exists())
        libraries[soname] = exports(path.resolve())
    glibc = platform.libc_ver()[1]
    document = {
        "source": f"the .dynsym and .gnu.version_d of glibc {glibc}'s libraries, libgcc_s, "
        "libatomic and libstdc++ (tools/gen_system_exports.py)",
        "machine": "x86_64",
        "glibc": glibc,
        # glibc 2.34's NEWS: libpthread, libdl, libutil, libanl and librt's functions moved
        # into libc.so.6; the old libraries remain as empty stubs for binaries that link them.
        "merged_into_libc": {
            "version": "GLIBC_2.34",
            "from": ["libpthread.so.0", "libdl.so.2", "libutil.so.1", "libanl.so.1", "librt.so.1"],
        },
        "libraries": libraries,
    }
    OUT.write_text(json.dumps(document, indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: " + ", ".join(f"{k} {len(v)}" for k, v in libraries.items()))


if __name__ == "__main__":
    main()
