"""Python wrappers and fake (meta) registrations of the ops."""

import torch

_ops = torch.ops.wheelforge_kernels


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` for ``x`` of shape ``[..., 2 * d]``."""
    return _ops.silu_and_mul(x)


def gelu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``gelu(x[..., :d]) * x[..., d:]`` (exact, erf-based GELU)."""
    return _ops.gelu_and_mul(x)


def gelu_tanh_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``gelu(x[..., :d], approximate="tanh") * x[..., d:]``."""
    return _ops.gelu_tanh_and_mul(x)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x * rsqrt(mean(x**2, -1) + eps) * weight``, accumulated in float32."""
    return _ops.rms_norm(x, weight, eps)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor]:
    """In place: ``residual += x``; ``x = rms_norm(residual, weight, eps)``. Returns both."""
    _ops.fused_add_rms_norm(x, residual, weight, eps)
    return x, residual


def _act_and_mul_fake(x: torch.Tensor) -> torch.Tensor:
    torch._check(x.shape[-1] % 2 == 0, lambda: "the last dimension of input must be even")
    return x.new_empty((*x.shape[:-1], x.shape[-1] // 2))


for _name in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"):
    torch.library.register_fake(f"wheelforge_kernels::{_name}")(_act_and_mul_fake)


@torch.library.register_fake("wheelforge_kernels::rms_norm")
def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    torch._check(weight.shape[-1] == x.shape[-1], lambda: "weight must match the last dimension")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("wheelforge_kernels::fused_add_rms_norm")
def _fused_add_rms_norm_fake(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, epsilon: float
) -> None:
    torch._check(x.shape == residual.shape, lambda: "input and residual must have the same shape")
