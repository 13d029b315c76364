#!/usr/bin/env bash
# On the H200 (Python 3.12, torch 2.11.0+cu130, no network): the gallery's wheels (built with
# wheelforge init + build; docs/your-extension.md) installed into a folder on PYTHONPATH beside the machine's
# torch, then the projects' own tests from the built wheels (smoke runs where their tests need
# what the machine cannot install). BUNDLE holds wheels/ (the six wheels, einops, numpy) and the
# projects' test files (fa3/, fht/, fast_rnnt/, xformers/tests/), as tools/init_gallery.sh and
# the report describe:
#
#     bash tools/init_gallery_gpu.sh BUNDLE
set -u
cd "${1:?the bundle folder}"
HERE=$(pwd)
# python3 there is itself a venv (/opt/torch/.venv): a venv made from it would not see its torch,
# so the wheels go into a folder on PYTHONPATH instead.
python3 -m pip install --no-index --no-deps --quiet --target /tmp/wf-gallery-site $(ls wheels/*.whl | grep -vE "/(numpy|einops)-") || exit 1
export PYTHONPATH=/tmp/wf-gallery-site${PYTHONPATH:+:$PYTHONPATH}
python() { python3 "$@"; }
python -c 'import torch; print("torch", torch.__version__, "gpu", torch.cuda.get_device_name(0))'
python3 -m pip list --path /tmp/wf-gallery-site 2>/dev/null | grep -iE "^(flash.attn.3|fast.hadamard|activation|xformers|einops|pytest) "

echo "== FlashAttention-3 (sm90, forward, hdim 128, bf16): its test_flash_attn.py, the build's switches"
for s in BACKWARD SPLIT PAGEDKV APPENDKV LOCAL SOFTCAP PACKGQA FP16 FP8 VARLEN CLUSTER \
         HDIM64 HDIM96 HDIM192 HDIM256 SM80 HDIMDIFF64 HDIMDIFF192; do
    export "FLASH_ATTENTION_DISABLE_$s=TRUE"
done
(cd "$HERE/fa3" && python -m pytest -q -rs -p no:cacheprovider --maxfail=20 test_flash_attn.py -k "test_flash_attn_output") 2>&1 | tail -15
for s in BACKWARD SPLIT PAGEDKV APPENDKV LOCAL SOFTCAP PACKGQA FP16 FP8 VARLEN CLUSTER \
         HDIM64 HDIM96 HDIM192 HDIM256 SM80 HDIMDIFF64 HDIMDIFF192; do
    unset "FLASH_ATTENTION_DISABLE_$s"
done

echo "== fast-hadamard-transform (unstable ABI, torch 2.11, cp312): its tests"
(cd "$HERE/fht" && python -m pytest -q -rs -p no:cacheprovider tests) 2>&1 | tail -8

echo "== fast_rnnt (CMake, unstable ABI, torch 2.11, cp312): its tests (CPU and CUDA devices)"
(cd "$HERE/fast_rnnt" && python -m pytest -q -rs -p no:cacheprovider mutual_information_test.py rnnt_loss_test.py) 2>&1 | tail -8

echo "== MegaBlocks (unstable ABI, CUDA 12.x): its CUB ops against torch (its tests need composer and stanford-stk)"
# The gallery builds it for torch 2.10 (CUDA 12.8's): wheelforge refuses CUDA 12.4 against a
# CUDA 13 torch, and CUDA 13's CCCL 3 breaks its cumsum.h. This machine's torch is 2.11+cu130,
# so a MegaBlocks wheel runs here only from a CUDA 12 torch: skipped when the bundle has none.
ls wheels/megablocks-*cp312*.whl >/dev/null 2>&1 || echo "skipped: no cp312 MegaBlocks wheel for this machine's torch in the bundle"
ls wheels/megablocks-*cp312*.whl >/dev/null 2>&1 && python - <<'PY'
import torch
import megablocks_ops
x = torch.randint(0, 64, (4, 4096), device="cuda", dtype=torch.int32)
hist = megablocks_ops.histogram(x, 64)
ref = torch.stack([torch.bincount(r, minlength=64) for r in x]).to(hist.dtype)
assert torch.equal(hist, ref), (hist, ref)
out = torch.empty_like(x)
megablocks_ops.exclusive_cumsum(x, 1, out)
assert torch.equal(out, torch.cumsum(x, 1) - x)
print("megablocks_ops.histogram and exclusive_cumsum match torch on", torch.cuda.get_device_name(0))
PY

echo "== kernels-community activation (stable ABI): a smoke run (its own tests load kernels from the Hub)"
python - <<'PY'
import torch
import torch.nn.functional as F
import activation
x = torch.randn(64, 2 * 512, device="cuda", dtype=torch.bfloat16)
out = torch.empty(64, 512, device="cuda", dtype=torch.bfloat16)
activation.silu_and_mul(out, x)
ref = F.silu(x[:, :512]) * x[:, 512:]
torch.testing.assert_close(out, ref, atol=2e-2, rtol=2e-2)
print("activation.silu_and_mul on", torch.cuda.get_device_name(0), "matches torch")
PY

echo "== xformers (stable ABI): its sparse24 ops, as tests/test_sparsity24.py's test_sparse24_largest_mask_2d checks them"
# Its test suite cannot be collected here: tests/utils.py imports xformers.ops.fmha, which now
# imports mslk (Meta's attention kernels; PyPI's 'mslk' is an empty 0.0.0 placeholder).
python3 - <<'PY'
import torch
import xformers._cpp_lib as lib
assert lib._cpp_library_load_exception is None, lib._cpp_library_load_exception
inp = torch.tensor([[4, 3, 2, 1], [0, 0, 0.5, 0.5], [1, 2, 3, 4], [10, 2, -1, 5]], device="cuda", dtype=torch.float16)
out = torch.ops.xformers.sparse24_largest_mask_2d(inp)
assert out.int().tolist() == [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 1]], out
big = torch.randn([2048, 2048], device="cuda", dtype=torch.bfloat16)
mask = torch.ops.xformers.sparse24_largest_mask_2d(big)  # test_sparse24_largest_mask_2d_big: runs
assert (mask.view(2048, 512, 4).sum(-1) <= 2).all(), "more than 2 of 4 kept along a row"
try:
    torch.ops.xformers.sparse24_largest_mask_2d(torch.randn([5, 5], device="cuda", dtype=torch.float16))
    raise SystemExit("a 5x5 input was accepted")
except RuntimeError:
    pass
print("xformers sparse24_largest_mask_2d: the test's mask, at most 2 of 4 on 2048x2048 bf16, 5x5 refused, on", torch.cuda.get_device_name(0))
PY

echo "== MegaBlocks' setup.py on a GPU machine, through init (needs wheelforge importable by PY): the --generate-code append it makes for the local GPU becomes the arch set"
PY=${PY:-}
if [ -n "$PY" ]; then
    (cd "$HERE/megablocks-src" && "$PY" -m wheelforge init --force --python python3 . 2>&1 | tail -8; grep -A1 "arch-sets" matrix.yaml)
else
    echo "skipped: set PY to a Python with wheelforge installed (the device's venv)"
fi
