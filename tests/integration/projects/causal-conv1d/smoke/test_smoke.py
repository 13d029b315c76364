"""Smoke test of the causal-conv1d wheel wheelforge built, on any machine: the pybind11 module
imports after torch with its three functions, and the package registers its custom ops."""

from __future__ import annotations

import torch


def test_extension_module_has_its_functions() -> None:
    import causal_conv1d_cuda

    for name in ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"):
        assert callable(getattr(causal_conv1d_cuda, name))


def test_package_registers_its_ops() -> None:
    import causal_conv1d

    assert callable(causal_conv1d.causal_conv1d_fn)
    for op in ("_causal_conv1d_fwd_cpp", "_causal_conv1d_bwd_cpp", "_causal_conv1d_update_cpp"):
        assert hasattr(torch.ops.DaoAILab, op), op


def test_the_wheel_matches_the_torch_it_runs_under() -> None:
    import causal_conv1d_cuda

    assert causal_conv1d_cuda.__file__.endswith(".so")
    assert torch.__version__.split("+")[0].rsplit(".", 1)[0] in ("2.11", "2.12")
