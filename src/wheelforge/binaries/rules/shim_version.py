"""Every C shim function a binary uses (``aoti_torch_*``, ``torch_*``) exists in the lowest
torch the wheel supports (toolchain/shims.py says how that is known)."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import floors
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi
from wheelforge.toolchain import shims


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    target = context.target
    major, minor = target.torch
    for name in floors.used_shims(binary.need_symbols().undefined):
        verdict = shims.judge(name, target.torch, target.guards, target.versions)
        if verdict.ok:
            continue
        if verdict.introduced is None:
            why = f"which no torch library or header declares ({verdict.source})"
            fix = "check the name, or that it is not a private libtorch function"
        else:
            since = f"{verdict.introduced[0]}.{verdict.introduced[1]}"
            why = (
                f"which torch {major}.{minor} lacks: it arrived in torch {since} "
                f"(per {verdict.source})"
            )
            fix = (
                f"build with -DTORCH_TARGET_VERSION for torch {major}.{minor} so the headers hide "
                "it (wheelforge sets it from the matrix's lowest torch), or raise the lowest "
                f"torch to {since}"
            )
        yield Finding(name, f"{binary.name} uses the shim function {name}, {why}; {fix}")


RULE = Rule(
    id="shim-version",
    doc="shims exist in the lowest torch: every `aoti_torch_*` / `torch_*` function the binary "
    "needs",
    source="`src/wheelforge/data/shim_exports.json`: what libtorch_cpu.so and libtorch_cuda.so "
    "of each torch release from 2.9 on really export (add a release: see below); for newer ones, the "
    "torch at hand's `torch/csrc/stable/c/shim_function_versions.txt` when it ships one, else "
    "the `TORCH_FEATURE_VERSION` guards in its shim headers",
    flavours=frozenset({abi.STABLE.name}),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=30,
    check=check,
)
