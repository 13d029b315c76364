"""``inspect``'s "loads on" lines below a binary's table: per GPU generation whether its kernels
run as SASS, are JIT-compiled from PTX, or have no kernel image (binaries/loadson.py decides);
the PTX ISA and the driver its JIT needs; the a/f targets that give no forward compatibility."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.table import Table
from rich.text import Text

from wheelforge.binaries.loadson import LoadsOn
from wheelforge.foundation.log import printable

_SAID = (
    ("sass", "runs SASS on"),
    ("ptx", "JIT-compiles PTX on"),
    ("partial", "some kernels only on"),
    ("none", "no kernel image on"),
)


def loads_on_lines(found: LoadsOn) -> list[str]:
    """What *found* says, one line per kind of verdict and fact."""
    lines = []
    for verdict, words in _SAID:
        gpus = [g for g in found.gpus if g.verdict == verdict]
        if not gpus:
            continue
        if verdict == "partial":
            shown = ", ".join(f"{g.gpu} ({g.units} of {g.of} units)" for g in gpus)
        else:
            shown = " ".join(g.gpu for g in gpus)
        lines.append(f"{words}: {shown}")
    for isa in found.ptx_isa:
        if isa.release is None:
            lines.append(f"PTX ISA {isa.version}: no release in the table writes it")
        elif isa.driver:
            lines.append(
                f"PTX ISA {isa.version} (CUDA {isa.release}): JIT needs driver >= {isa.driver}"
            )
        else:
            lines.append(f"PTX ISA {isa.version} (CUDA {isa.release})")
    if found.no_forward:
        lines.append(
            f"no forward compatibility: {', '.join(found.no_forward)} (no plain PTX in their "
            "translation units: newer GPUs get no image from them)"
        )
    return lines


def wheel_table(container: str, found: Sequence[LoadsOn]) -> Table:
    """A wheel's binaries together, one row per GPU generation: how many run SASS there, JIT
    PTX, run only some kernels, have no kernel image (the names when few)."""
    title = f"{Path(container).name}: where its {len(found)} CUDA binaries load"
    table = Table(title=Text(printable(title)), title_justify="left")
    for column in ("GPU", "SASS", "PTX JIT", "partial", "no image"):
        table.add_column(column, justify="left" if column in ("GPU", "no image") else "right")
    for row, gpu in enumerate(found[0].gpus):
        verdicts = [f.gpus[row].verdict for f in found]
        missing = [
            Path(f.path.rsplit("!", 1)[-1]).name for f in found if f.gpus[row].verdict == "none"
        ]
        names = ", ".join(missing)
        if not missing or len(names) > 40:  # a count keeps the table within 80 columns
            names = str(len(missing))
        counts = (str(verdicts.count(v)) for v in ("sass", "ptx", "partial"))
        table.add_row(gpu.gpu, *counts, Text(printable(names)))
    return table
