"""CUDA smoke test of the real-project wheels wheelforge built (issue 9), for a GPU machine.

Installs nothing: run it where the wheels are installed (`pip install --no-deps --no-index W`).
For each project it imports the extension and calls one CUDA op on small tensors, comparing
with a torch reference; it prints one PASS/FAIL line per check and exits non-zero on a FAIL.

    python smoke_cuda.py
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import traceback
from collections.abc import Callable

import torch

RESULTS: list[bool] = []


def check(name: str, fn: Callable[[], str]) -> None:
    try:
        detail = fn()
    except Exception as exc:  # every failure is a FAIL line, not a traceback
        RESULTS.append(False)
        print(f"FAIL {name}: {type(exc).__name__}: {exc}")
        traceback.print_exc(limit=3, file=sys.stderr)
        return
    RESULTS.append(True)
    print(f"PASS {name}: {detail}")


def witwin_radar() -> str:
    # The module file, found from the distribution's RECORD: importing the package itself would
    # need its run-time dependencies (witwin, scipy), which --no-deps leaves out.
    files = importlib.metadata.files("witwin-radar") or []
    [so] = [f for f in files if str(f).endswith("_radar_native.abi3.so")]
    spec = importlib.util.spec_from_file_location(
        "witwin.radar.cuda.prebuilt._radar_native", so.locate()
    )
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    gen = torch.Generator(device="cuda").manual_seed(0)
    origin = torch.randn(257, 3, device="cuda", generator=gen)
    target = torch.randn(257, 3, device="cuda", generator=gen)
    out = torch.empty_like(origin)
    torch.ops._radar_native.scatter_direction_forward(origin, target, out)
    d = target - origin
    ref = d / d.norm(dim=1, keepdim=True)
    err = (out - ref).abs().max().item()
    assert err < 1e-5, f"max abs error {err}"
    return f"scatter_direction_forward on 257 rows, max abs error {err:.2e}"


def causal_conv1d() -> str:
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_fn, causal_conv1d_ref

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(2, 64, 128, device="cuda", generator=gen)
    weight = torch.randn(64, 4, device="cuda", generator=gen)
    bias = torch.randn(64, device="cuda", generator=gen)
    out = causal_conv1d_fn(x, weight, bias, activation="silu")
    ref = causal_conv1d_ref(x, weight, bias, activation="silu")
    err = (out - ref).abs().max().item()
    assert err < 1e-3, f"max abs error {err}"
    return f"causal_conv1d_fn (2x64x128, width 4, silu), max abs error {err:.2e}"


def main() -> int:
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}")  # fmt: skip
    check("witwin-radar (stable ABI)", witwin_radar)
    check("causal-conv1d (unstable ABI)", causal_conv1d)
    print(f"{sum(RESULTS)} passed, {len(RESULTS) - sum(RESULTS)} failed")
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
