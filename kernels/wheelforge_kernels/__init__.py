"""LLM-serving kernels built on PyTorch's stable ABI: one binary for every torch from the
wheel's target version up.

Ops (also reachable as ``torch.ops.wheelforge_kernels.<name>``):

- ``silu_and_mul(x)``, ``gelu_and_mul(x)``, ``gelu_tanh_and_mul(x)``: ``x[..., 2d]`` →
  ``act(x[..., :d]) * x[..., d:]``
- ``rms_norm(x, weight, eps)``
- ``fused_add_rms_norm(x, residual, weight, eps)``: ``residual += x``, then
  ``x = rms_norm(residual)``, both in place.

float32, float16 and bfloat16, on CPU and CUDA; fake (meta) kernels make them traceable by
``torch.compile``.
"""

import torch  # noqa: F401  (libtorch must be loaded before the extension)

from . import _C  # noqa: F401  (loading it runs the STABLE_TORCH_LIBRARY registrations)
from ._ops import (
    fused_add_rms_norm,
    gelu_and_mul,
    gelu_tanh_and_mul,
    rms_norm,
    silu_and_mul,
)

__all__ = [
    "fused_add_rms_norm",
    "gelu_and_mul",
    "gelu_tanh_and_mul",
    "rms_norm",
    "silu_and_mul",
]
