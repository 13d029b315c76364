"""The "loads on" table of released wheels, checked against the archs their binaries really carry
as cuobjdump lists them (``cuobjdump --list-elf --list-ptx``, the nvidia-cuda-cuobjdump wheel of
the test extra).

For every ELF member of each wheel with CUDA code: the SASS and PTX archs wheelforge's reader
lists, and cuobjdump's (which names an ``f`` cubin after its ELF header, without the ``f``: the
comparison drops it from both); then the loads-on verdict per GPU generation from wheelforge's
entries (per translation unit) next to the verdict the same rules give cuobjdump's arch list
(one unit: cuobjdump does not say which cubin belongs to which container), its family cubins
given back the ``f`` its list drops. A difference is printed; ``partial`` (some units without an
image) agrees with anything but ``none`` in cuobjdump's list, which has no units.

    python bench/loads_on_vs_cuobjdump.py WHEEL [WHEEL ...] --markdown out.md

Members are extracted into a temporary folder for cuobjdump (it reads files); wheelforge reads
the wheel itself.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

from wheelforge.binaries import loadson
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.binaries.inspection import inspect_paths
from wheelforge.binaries.loadson import Verdict
from wheelforge.configuration import releases
from wheelforge.configuration.archs import ArchSuffix

_LISTED = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx)$")
_SHORT = {"sass": "S", "ptx": "P", "partial": "p", "none": "-"}


def cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    here = Path(sys.executable).parent.parent / "lib"
    for candidate in here.glob("python3*/site-packages/nvidia/cu*/bin/cuobjdump"):
        return str(candidate)
    raise SystemExit("cuobjdump not found: pip install nvidia-cuda-cuobjdump")


def listed(tool: str, path: Path) -> list[tuple[str, int, ArchSuffix]]:
    """(kind, sm, suffix) of each image cuobjdump lists."""
    run = subprocess.run(
        [tool, "--list-elf", "--list-ptx", str(path)], capture_output=True, text=True, check=False
    )
    out = []
    for line in run.stdout.splitlines():
        if m := _LISTED.match(line.strip()):
            arch = m[2]
            suffix: ArchSuffix = arch[-1] if arch[-1] in "af" else ""  # type: ignore[assignment]
            sm = int(arch[3:].rstrip("af"))
            out.append(("sass" if m[1] == "ELF" else "ptx", sm, suffix))
    return out


def as_entries(images: list[tuple[str, int, ArchSuffix]]) -> tuple[FatbinEntry, ...]:
    return tuple(
        FatbinEntry(
            kind=kind,
            arch=f"{'sm' if kind == 'sass' else 'compute'}_{sm}{suffix}",  # type: ignore[arg-type]
            sm=sm,
            variant=suffix,
            container=0,
            offset=0,
            stored_size=0,
            size=0,
            compression="none",
            version=None,
        )
        for kind, sm, suffix in images
    )


def archs(entries: tuple[FatbinEntry, ...], *, drop_f: bool) -> set[str]:
    return {
        f"{e.kind}:{e.sm}{e.variant if not (drop_f and e.variant == 'f') else ''}" for e in entries
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    tool = cuobjdump()
    lines: list[str] = []
    differences = 0
    for wheel in args.wheels:
        binaries = [b for b in inspect_paths([wheel]) if b.entries]
        ours = {b.path.rsplit("!", 1)[-1]: b for b in binaries}
        gpus = [f"sm_{g}" for g in releases.gpu_generations()]
        lines += [f"### {wheel.name}", ""]
        lines += [
            "S: runs SASS, P: JIT-compiles PTX, p: partial (some translation units have no "
            "image), -: no kernel image; first wheelforge's verdict, then cuobjdump's list's",
            "",
            "| binary | archs (wheelforge = cuobjdump) | " + " | ".join(gpus) + " |",
            "| --- | --- | " + " | ".join("---" for _ in gpus) + " |",
        ]
        with tempfile.TemporaryDirectory(prefix="loads-on-") as tmp, zipfile.ZipFile(wheel) as zf:
            for member, binary in ours.items():
                target = Path(tmp) / member.replace("/", "__")
                target.write_bytes(zf.read(member))
                theirs = as_entries(listed(tool, target))
                same = archs(binary.entries, drop_f=True) == archs(theirs, drop_f=True)
                if not same:
                    differences += 1
                mine = loadson.loads_on(binary)
                # cuobjdump's list drops the f of family cubins: give theirs the f our reader
                # reads from the entry flags (the archs were compared without it above), so the
                # verdicts differ only where the rules, not the names, do.
                family = {e.sm for e in binary.entries if e.variant == "f"}
                theirs = tuple(
                    replace(e, variant="f", arch=e.arch + "f")
                    if e.sm in family and not e.variant
                    else e
                    for e in theirs
                )
                other = loadson.loads_on(BinaryContents(path=member, size=0, entries=theirs))
                assert mine is not None
                cells = []
                for g, o in zip(mine.gpus, other.gpus if other else (), strict=False):
                    verdict: Verdict = g.verdict
                    agree = verdict == o.verdict or (verdict == "partial" and o.verdict != "none")
                    if not agree:
                        differences += 1
                    cells.append(_SHORT[verdict] + ("" if agree else f"≠{_SHORT[o.verdict]}"))
                shown = " ".join(sorted(binary.sass_archs + binary.ptx_archs))
                lines.append(
                    f"| {member} | {shown} {'=' if same else '≠ ' + str(sorted(archs(theirs, drop_f=True)))} | "
                    + " | ".join(cells)
                    + " |"
                )
        lines.append("")
    lines.append(f"differences: {differences}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
