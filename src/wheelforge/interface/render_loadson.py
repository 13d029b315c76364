"""``inspect``'s "loads on" lines below a binary's table: per GPU generation whether its kernels
run as SASS, are JIT-compiled from PTX, or have no kernel image (binaries/loadson.py decides);
the PTX ISA and the driver its JIT needs; the a/f targets that give no forward compatibility."""

from __future__ import annotations

from wheelforge.binaries.loadson import LoadsOn

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
