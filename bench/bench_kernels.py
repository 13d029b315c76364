"""Achieved memory bandwidth of the bundled kernels against a device-to-device copy of the
same number of bytes, measured in the same run on the same GPU.

    python bench/bench_kernels.py [--tokens 16384] [--hidden 8192] [--markdown out.md]

Bytes are counted as the kernel must move them at least once: every input read once and every
output written once (rms_norm: x + weight read, out written; silu_and_mul: [T, 2H] read,
[T, H] written; fused_add_rms_norm: x, residual, weight read, x and residual written). The
copy baseline moves the same byte count through ``dst.copy_(src)`` (read + write). Times are
the median of CUDA-event-timed launches after warm-up; torch's own eager ops are timed too,
for context.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F


def time_cuda(fn, *, warmup: int = 5, iters: int = 30) -> float:
    """Median seconds of one call, timed with CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def copy_bandwidth(nbytes: int) -> float:
    """Bytes per second (read + write) of a device-to-device copy moving *nbytes* in total."""
    n = nbytes // 2
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = time_cuda(lambda: dst.copy_(src))
    return 2 * n / t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    try:  # the wheel this repository builds, installed (pip install dist/*.whl)
        import wheelforge_kernels as wk
    except ImportError as exc:
        print(
            f"wheelforge_kernels is not installed ({exc}): pip install dist/*.whl", file=sys.stderr
        )
        return 1
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    t, h, dt = args.tokens, args.hidden, torch.bfloat16
    e = torch.finfo(dt).bits // 8
    x2 = torch.randn(t, 2 * h, device="cuda", dtype=dt)
    x = torch.randn(t, h, device="cuda", dtype=dt)
    r = torch.randn(t, h, device="cuda", dtype=dt)
    w = torch.randn(h, device="cuda", dtype=dt)

    cases = [
        ("silu_and_mul", (t * 2 * h + t * h) * e, lambda: wk.silu_and_mul(x2),
         lambda: F.silu(x2[:, :h]) * x2[:, h:]),
        ("rms_norm", (2 * t * h + h) * e, lambda: wk.rms_norm(x, w, 1e-6),
         lambda: F.rms_norm(x, (h,), w, 1e-6)),
        ("fused_add_rms_norm", (4 * t * h + h) * e, lambda: wk.fused_add_rms_norm(x, r, w, 1e-6),
         None),
    ]  # fmt: skip
    rows = []
    for name, nbytes, ours, reference in cases:
        copy_bw = copy_bandwidth(nbytes)
        sec = time_cuda(ours)
        ref_sec = time_cuda(reference) if reference is not None else None
        rows.append((name, nbytes, sec, nbytes / sec, copy_bw, ref_sec))

    gpu = torch.cuda.get_device_name()
    header = (
        f"GPU: {gpu}; torch {torch.__version__}; bf16, tokens={t}, hidden={h}\n\n"
        "| op | bytes moved | time | achieved | D2D copy, same bytes | of copy | torch eager time |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    lines = [header]
    for name, nbytes, sec, bw, copy_bw, ref_sec in rows:
        ref = f"{ref_sec * 1e3:.3f} ms" if ref_sec is not None else "-"
        lines.append(
            f"| {name} | {nbytes / 1e9:.2f} GB | {sec * 1e3:.3f} ms | {bw / 1e12:.2f} TB/s "
            f"| {copy_bw / 1e12:.2f} TB/s | {100 * bw / copy_bw:.0f}% | {ref} |"
        )
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
