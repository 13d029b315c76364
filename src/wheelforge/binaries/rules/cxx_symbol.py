"""No undefined C++ symbol of libtorch (``c10::``, ``at::``, ``torch::``, ``caffe2::``): those
change with every torch release, so a binary that needs one fails to load on the next."""

from __future__ import annotations

from collections.abc import Iterator

from wheelforge.binaries import floors
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
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
)
