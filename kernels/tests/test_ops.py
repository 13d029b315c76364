"""Each op against a torch reference, on random inputs of several shapes, for float32, float16
and bfloat16, on the CPU and (where present) CUDA."""

import pytest
import torch
import torch.nn.functional as F
import wheelforge_kernels as wk

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEVICES = ["cpu", "cuda"]
# Row counts × hidden sizes: odd sizes take the scalar paths, multiples of 8 the vector ones.
ACT_SHAPES = [(1, 8), (7, 22), (16, 128), (3, 5, 1030), (64, 4096)]
NORM_SHAPES = [(1, 8), (5, 33), (32, 512), (2, 3, 1027), (16, 8192)]


def tol(dtype):
    return {
        torch.float32: {"atol": 1e-5, "rtol": 1e-5},
        torch.float16: {"atol": 2e-3, "rtol": 2e-3},
        torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
    }[dtype]


def ref_act(x, act):
    d = x.shape[-1] // 2
    xf = x.float()
    return (act(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def ref_rms_norm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


ACTS = [
    ("silu_and_mul", wk.silu_and_mul, F.silu),
    ("gelu_and_mul", wk.gelu_and_mul, F.gelu),
    ("gelu_tanh_and_mul", wk.gelu_tanh_and_mul, lambda t: F.gelu(t, approximate="tanh")),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", ACT_SHAPES, ids=str)
@pytest.mark.parametrize(("name", "op", "act"), ACTS, ids=[a[0] for a in ACTS])
def test_act_and_mul(name, op, act, shape, dtype, device):
    x = torch.randn(*shape[:-1], 2 * shape[-1], dtype=dtype, device=device) * 3
    out = op(x)
    assert out.shape == (*shape[:-1], shape[-1])
    assert out.dtype == dtype and out.device == x.device
    torch.testing.assert_close(out, ref_act(x, act), **tol(dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
def test_rms_norm(shape, dtype, device):
    x = torch.randn(*shape, dtype=dtype, device=device) * 2
    w = torch.randn(shape[-1], dtype=dtype, device=device)
    out = wk.rms_norm(x, w, 1e-5)
    torch.testing.assert_close(out, ref_rms_norm(x, w, 1e-5), **tol(dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
def test_fused_add_rms_norm(shape, dtype, device):
    x = torch.randn(*shape, dtype=dtype, device=device)
    residual = torch.randn(*shape, dtype=dtype, device=device)
    w = torch.randn(shape[-1], dtype=dtype, device=device)
    expected_residual = x + residual
    expected = ref_rms_norm(expected_residual, w, 1e-6)
    x_ret, r_ret = wk.fused_add_rms_norm(x, residual, w, 1e-6)
    assert x_ret is x and r_ret is residual
    torch.testing.assert_close(residual, expected_residual, **tol(dtype))
    torch.testing.assert_close(x, expected, **tol(dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_input(device):
    base = torch.randn(8, 64, 2 * 96, device=device)
    x = base.transpose(0, 1)  # not contiguous
    torch.testing.assert_close(wk.silu_and_mul(x), ref_act(x, F.silu))
    w = torch.randn(2 * 96, device=device)
    torch.testing.assert_close(wk.rms_norm(x, w), ref_rms_norm(x, w, 1e-6), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_input(device):
    x = torch.empty(0, 16, device=device)
    assert wk.silu_and_mul(x).shape == (0, 8)
    assert wk.rms_norm(x, torch.ones(16, device=device)).shape == (0, 16)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_raises(device):
    with pytest.raises(RuntimeError, match="must be even"):
        wk.silu_and_mul(torch.randn(4, 7, device=device))
    with pytest.raises(RuntimeError, match="float32, float16 or bfloat16"):
        wk.silu_and_mul(torch.ones(4, 8, dtype=torch.int32, device=device))
    with pytest.raises(RuntimeError, match="weight has 3 elements"):
        wk.rms_norm(torch.randn(4, 8, device=device), torch.ones(3, device=device))
    with pytest.raises(RuntimeError, match="same dtype"):
        wk.rms_norm(
            torch.randn(4, 8, device=device), torch.ones(8, dtype=torch.float16, device=device)
        )


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    """Schemas, fake kernels and dispatch agree (torch.library.opcheck)."""
    x = torch.randn(4, 2 * 64, device=device)
    for name in ("silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul"):
        torch.library.opcheck(getattr(torch.ops.wheelforge_kernels, name), (x,))
    y = torch.randn(4, 64, device=device)
    w = torch.randn(64, device=device)
    torch.library.opcheck(torch.ops.wheelforge_kernels.rms_norm, (y, w, 1e-6))
    torch.library.opcheck(
        torch.ops.wheelforge_kernels.fused_add_rms_norm, (y.clone(), torch.randn_like(y), w, 1e-6)
    )


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile(device):
    """The ops trace under torch.compile (fake kernels, functionalization of the in-place op)."""

    def block(x, residual, w):
        h = wk.silu_and_mul(x)
        h, residual = wk.fused_add_rms_norm(h, residual, w, 1e-6)
        return wk.rms_norm(h, w, 1e-6), residual

    compiled = torch.compile(block, backend="aot_eager", fullgraph=True)
    x = torch.randn(6, 2 * 32, device=device)
    r = torch.randn(6, 32, device=device)
    w = torch.randn(32, device=device)
    expected = block(x.clone(), r.clone(), w)
    got = compiled(x.clone(), r.clone(), w)
    torch.testing.assert_close(got, expected)


@pytest.mark.cuda
def test_cuda_graph_capture():
    """The kernels launch on torch's current stream: capture into a CUDA graph fails otherwise."""
    x = torch.randn(64, 2 * 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch's docs ask
        wk.rms_norm(wk.silu_and_mul(x), w)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = wk.rms_norm(wk.silu_and_mul(x), w)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    expected = ref_rms_norm(ref_act(x, F.silu), w, 1e-6)
    torch.testing.assert_close(out, expected, atol=3e-2, rtol=3e-2)


@pytest.mark.cuda
def test_cuda_on_side_stream():
    x = torch.randn(128, 2 * 1024, device="cuda", dtype=torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = wk.silu_and_mul(x)
    side.synchronize()
    torch.testing.assert_close(out, ref_act(x, F.silu), **tol(torch.float16))
