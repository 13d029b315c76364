"""No undefined C++ symbol of libtorch (``c10::``, ``at::``, ``torch::``, ``caffe2::``): those
change with every torch release, so a binary that needs one fails to load on the next."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from wheelforge.binaries import floors
from wheelforge.binaries.elf import split_member
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext, Violation, WheelSummary
from wheelforge.binaries.symbols import demangle
from wheelforge.configuration import abi

_HINTS = {
    "torch::Library": "TORCH_LIBRARY from torch/library.h; use STABLE_TORCH_LIBRARY from "
    "torch/csrc/stable/library.h",
    "at::Tensor": "at::Tensor from ATen; use torch::stable::Tensor from torch/csrc/stable/tensor.h",
    "c10::Error": "TORCH_CHECK from c10; use STD_TORCH_CHECK from "
    "torch/headeronly/util/Exception.h",
    "c10::cuda": "c10/cuda helpers; use aoti_torch_get_current_cuda_stream and "
    "torch::stable::accelerator",
}


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    path = binary.name
    for symbol, name in floors.libtorch_cxx(binary.need_symbols().undefined):
        hint = next((h for key, h in _HINTS.items() if key in name), None)
        fix = (
            f"it comes from {hint}"
            if hint
            else "include only torch/csrc/stable and torch/headeronly headers"
        )
        yield Finding(
            symbol,
            f"{path} uses {name} ({symbol}), a C++ symbol of libtorch: the binary is not on the "
            f"stable ABI and fails to load ('undefined symbol') on other torch versions; {fix}",
            kind=KIND,
        )


KIND = "libtorch-cxx"
_EXAMPLES = 3


def summary(container: str, found: Sequence[Violation], wheel: WheelSummary | None) -> str:
    """Every libtorch C++ symbol of one wheel (or file) in one line: how many, in which of its
    binaries, by namespace, a few of them; the way out (the stable ABI, or a pin of the torch
    they were built against, named where the wheel says it)."""
    names = [demangle(v.symbol) if v.symbol else "" for v in found]
    spaces = Counter(floors.owner(n).split("::", 1)[0] + "::" for n in names)
    binaries = Counter(split_member(v.binary)[1] or v.binary for v in found)
    where = ", ".join(f"{b} {n}" for b, n in binaries.most_common(_EXAMPLES))
    if len(binaries) > _EXAMPLES:
        where += f", {len(binaries) - _EXAMPLES} more"
    examples = "; ".join(dict.fromkeys(names[:_EXAMPLES]))
    held = "its binaries" if len(binaries) > 1 else "it"
    pin = wheel.declared.torch_pin if wheel else None
    if wheel is None:
        classic = ", or, built as a classic extension, ship it in a wheel pinned to its torch"
    elif pin:
        classic = (
            f"; the wheel pins torch=={pin}, so it loads on that torch: check it as a classic "
            "wheel (--abi unstable)"
        )
    else:
        said = f"declares {wheel.declared.torch}" if wheel.declared.torch else "states no torch"
        classic = f", or keep the C++ API: the wheel {said}; {floors.pin_advice(wheel.declared)}"
    return (
        f"{container}: {len(binaries)} binar{'ies use' if len(binaries) > 1 else 'y uses'} "
        f"{len(found)} C++ symbols of libtorch ({', '.join(f'{k} {n}' for k, n in spaces.most_common())}"
        f"; {where}), e.g. {examples}: {held} load only on the torch they were built against "
        f"('undefined symbol' on others); build on the stable ABI (only torch/csrc/stable and "
        f"torch/headeronly headers){classic}; every symbol: wheelforge check --json"
    )


RULE = Rule(
    id="cxx-symbol",
    doc="no libtorch C++: undefined symbols that demangle (libstdc++'s own `__cxa_demangle`) "
    "into an entity of `c10::`, `at::`, `torch::`, `caffe2::` (not `torch::stable::`, which is "
    "header-only; a function of the wheel's own that takes a `torch::stable::Tensor` is not "
    "libtorch's)",
    source="the binary",
    flavours=frozenset({abi.STABLE.name}),
    roles=frozenset({"extension", "library"}),
    needs=frozenset({"symbols"}),
    order=20,
    check=check,
    summary=summary,
)
