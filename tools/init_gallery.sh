#!/usr/bin/env bash
# The gallery of docs/your-extension.md: real projects adopted with `wheelforge init`, each from
# its own repository (fetched mirrors: `fetch github:OWNER/NAME` gives /work/.mirror/OWNER+NAME/repo),
# then built and checked with no edit. One project per call, into a scratch folder:
#
#     bash tools/init_gallery.sh fa3|xformers|activation|fht|megablocks|fast_rnnt  [SCRATCH]
#
# WF: the wheelforge to run (default: .venv/bin/wheelforge); WF312: a wheelforge installed in a
# Python 3.12 venv with setuptools and wheel and no torch (fht and fast_rnnt build for torch
# 2.11 / cp312, the H200's). Unstable-ABI builds make a CUDA torch environment with pip: PIP_FIND_LINKS
# is unset for them so pip takes torch from PyPI, not a local CPU wheel, and --cache-dir keeps it
# out of the shared cache.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WF=${WF:-$REPO/.venv/bin/wheelforge}
WF312=${WF312:-wheelforge}
MIRROR=${MIRROR:-/work/.mirror}
SCRATCH=${2:-/tmp/wheelforge-init-gallery}
CACHE=${CACHE:-$SCRATCH/cache}
mkdir -p "$SCRATCH"

checkout() {  # checkout MIRROR-NAME REV FOLDER [PATHS...]: a clean tree of REV
    local git=$MIRROR/$1/repo rev=$2 dest=$3
    shift 3
    rm -rf "$dest" && mkdir -p "$dest"
    git --git-dir="$git" archive -o "$dest.tar" "$rev" "$@"
    tar -xf "$dest.tar" -C "$dest" && rm "$dest.tar"
}

cutlass() {  # cutlass REV FOLDER: CUTLASS's headers at a commit (a submodule's checkout)
    mkdir -p "$2"
    git --git-dir="$MIRROR/NVIDIA+cutlass/repo" archive "$1" include tools/util/include examples \
        | tar -x -C "$2"
}

build_and_check() {  # in the project folder
    time "$@" build
    "$@" check dist/*.whl || echo "check: exit $?"
}

case "$1" in
fa3)
    checkout Dao-AILab+flash-attention 0251105a "$SCRATCH/fa3" hopper
    git --git-dir="$MIRROR/Dao-AILab+flash-attention/repo" show 0251105a:README.md > "$SCRATCH/fa3/README.md"
    cutlass 7127592069c2fe01b041e174ba4345ef9b279671 "$SCRATCH/fa3/csrc/cutlass"
    cd "$SCRATCH/fa3/hopper"
    for s in BACKWARD SPLIT PAGEDKV APPENDKV LOCAL SOFTCAP PACKGQA FP16 FP8 VARLEN CLUSTER \
             HDIM64 HDIM96 HDIM192 HDIM256 SM80 HDIMDIFF64 HDIMDIFF192; do
        export "FLASH_ATTENTION_DISABLE_$s=TRUE"
    done
    "$WF" init --archs 9.0a .
    build_and_check "$WF"
    ;;
xformers)
    checkout facebookresearch+xformers ca6d2aa0 "$SCRATCH/xformers"
    cutlass 8afb19d9047afc26816a046059afe66763e68aa5 "$SCRATCH/xformers/third_party/cutlass"
    cd "$SCRATCH/xformers"
    "$WF" init --archs 9.0 .
    build_and_check "$WF"
    ;;
activation)
    checkout huggingface+kernels-community 40d4194f "$SCRATCH/kernels-community" activation
    cd "$SCRATCH/kernels-community/activation"
    "$WF" init --archs 9.0 .
    build_and_check "$WF"
    ;;
fht)
    checkout Dao-AILab+fast-hadamard-transform e7706fa "$SCRATCH/fht"
    cd "$SCRATCH/fht"
    "$WF312" init --torch 2.11.0 --archs 9.0 .
    time env -u PIP_FIND_LINKS "$WF312" build --cache-dir "$CACHE"
    ;;
megablocks)
    checkout databricks+megablocks 78eea65 "$SCRATCH/megablocks"
    cd "$SCRATCH/megablocks"
    "$WF312" init --torch 2.11.0 --archs 9.0 .
    # The one edit: CUDA 13's CCCL 3 changed cub::DeviceScan (csrc/cumsum.h:34); CUDA 12 builds it.
    printf '\ncuda: ["12.4"]\n' >> matrix.yaml
    # A CUDA 12.4 provisioned in the user cache, seen from $CACHE (which holds the CUDA torch).
    mkdir -p "$CACHE/toolkits"
    ln -sfn ~/.cache/wheelforge/toolkits/cuda-12.4-debian "$CACHE/toolkits/cuda-12.4-debian"
    time env -u PIP_FIND_LINKS "$WF312" build --cache-dir "$CACHE"
    ;;
fast_rnnt)
    checkout k2-fsa+fast_rnnt 83e4637 "$SCRATCH/fast_rnnt"
    checkout pybind+pybind11 v2.6.0 "$SCRATCH/pybind11-2.6.0"
    cd "$SCRATCH/fast_rnnt"
    # CMake needs torch in the build Python: the torch 2.11 environment an fht build made.
    TORCH_PY=${TORCH_PY:?set TORCH_PY to a Python with a CUDA torch 2.11 (the fht environment)}
    NVRTC=$("$TORCH_PY" -c 'import glob, nvidia, os; print(glob.glob(os.path.join(nvidia.__path__[0], "*", "lib", "libnvrtc.so*"))[0])')
    "$WF312" init --python "$TORCH_PY" --torch 2.11.0 --archs 8.0 \
        --cmake-arg=-DFT_BUILD_TESTS=OFF \
        --cmake-arg=-DFETCHCONTENT_SOURCE_DIR_PYBIND11="$SCRATCH/pybind11-2.6.0" \
        --cmake-arg=-DCUDA_nvrtc_LIBRARY="$NVRTC" .
    time env -u PIP_FIND_LINKS "$WF312" build --cache-dir "$CACHE"
    ;;
*)
    echo "usage: $0 fa3|xformers|activation|fht|megablocks|fast_rnnt [SCRATCH]" >&2
    exit 2
    ;;
esac
