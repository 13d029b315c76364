"""A binary's CUDA runtime is one the torch its wheel admits brings: a binary that needs
``libcudart.so.12`` its wheel neither ships nor requires gets it from torch's CUDA 12 build only,
and a requirement that admits no torch release whose PyPI wheel is built with CUDA 12
(``torch>=2.11``: CUDA 13 from 2.11 on) installs it beside a torch without it: import fails with
"libcudart.so.12: cannot open shared object file" (binaries/torchcuda.py)."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import scope, torchcuda
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.binaries.rules import unresolved_symbol
from wheelforge.binaries.symbols import Linkage
from wheelforge.configuration import abi


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    wheel = context.wheel
    if wheel is None or wheel.is_torch:
        return
    try:
        linkage = binary.own(unresolved_symbol.ID)  # its DT_NEEDED, read once for both rules
    except LookupError:
        return
    if not isinstance(linkage, Linkage):
        return
    declared = context.target.declared.torch
    members = {scope.base(n) for n in wheel.names}
    loader = "torch.ops.load_library" if binary.role == "library" else "import"
    torch = bool(declared) or any(scope.TORCH_RE.match(n) for n in linkage.needed)
    needs = torchcuda.needed_from_torch(linkage.needed, members, wheel.metadata, torch=torch)
    variants = torchcuda.wheel_majors(wheel, declared) if needs else set()
    for major, library in needs.items():
        fit = torchcuda.weigh(declared, major)
        if not fit.other:
            continue
        served = sorted(m for m in variants if m != major and torchcuda.weigh(declared, m).matching)
        if fit.matching:
            if not served:  # xformers 0.0.35: torch>=2.10, CUDA 12's runtime
                yield _also_admits(binary.display, library, fit, declared, loader)
            continue
        if served:
            # One of several CUDA builds the wheel ships (bitsandbytes' libbitsandbytes_cuda118
            # to _cuda130): the package picks the one for torch's CUDA at run time.
            yield Finding(
                library,
                f"{binary.display} needs {library} (CUDA {major}'s runtime), which no torch "
                f"its requirement ({declared or 'none'}) admits brings from PyPI; the wheel "
                f"ships builds for CUDA {', '.join(map(str, served))} too, which PyPI's torches "
                "bring: it is loaded only where the package picks it for a torch built with CUDA "
                f"{major} (download.pytorch.org's)",
                severity="warning",
            )
            continue
        builds = ", ".join(f"{r}: CUDA {c}" for r, c in fit.other[:3])
        more = f" and {len(fit.other) - 3} more" if len(fit.other) > 3 else ""
        said = f"its requirement {declared}" if declared else "the wheel (no torch requirement)"
        yield Finding(
            library,
            f"{binary.display} needs {library} (CUDA {major}'s runtime), which its wheel neither "
            f"ships nor requires: only a torch built with CUDA {major} brings it, and {said} "
            f"admits no torch whose PyPI wheel is ({builds}{more}): pip installs it beside a "
            f"torch without {library}, and {loader} fails with '{library}: cannot open shared "
            f"object file'; require a torch whose PyPI build has CUDA {major}, or "
            f"Requires-Dist: {torchcuda.runtime_requirement(library, major)}",
        )


def _also_admits(
    member: str, library: str, fit: torchcuda.TorchFit, declared: str | None, loader: str
) -> Finding:
    """A requirement that admits torches whose PyPI build brings the runtime and others whose
    build brings another CUDA's: a warning naming the others."""
    first, last = fit.other[0][0], fit.other[-1][0]
    span = f"{first}" if first == last else f"{first} to {last}"
    cudas = ", ".join(sorted({f"{c.major}" for _, c in fit.other}))
    said = f"its requirement {declared}" if declared else "the wheel (no torch requirement)"
    return Finding(
        library,
        f"{member} needs {library} (CUDA {fit.major}'s runtime), and {said} also admits torch "
        f"{span}, whose PyPI wheels are CUDA {cudas}: beside those, {loader} fails with "
        f"'{library}: cannot open shared object file'; narrow the requirement to the torches "
        f"built with CUDA {fit.major}, or require its runtime "
        f"({torchcuda.runtime_requirement(library, fit.major)})",
        severity="warning",
    )


RULE = Rule(
    id="cuda-runtime",
    doc="a binary that needs CUDA's runtime (`libcudart.so.N`, `libcublas.so.N`, "
    "`libnvrtc.so.N`) its wheel neither ships nor requires (nvidia-cuda-runtime-cuN, "
    "cuda-toolkit[cudart]) gets it from torch: the wheel's torch requirement admits a release "
    "whose PyPI wheel is built with CUDA N (else an error), and, unless the wheel ships a build "
    "for each, only such releases (else a warning naming the others)",
    source="the binary's `.dynamic`, the wheel's METADATA, `data/torch-cuda.toml` (each torch "
    "release's PyPI build, from its METADATA)",
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"extension", "library"}),
    order=16,
    check=check,
)
