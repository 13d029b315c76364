#!/usr/bin/env bash
# The gallery of docs/your-extension.md: real projects adopted with `wheelforge init`, each from
# its own repository (fetched mirrors: `fetch github:OWNER/NAME` gives /work/.mirror/OWNER+NAME/repo),
# then built and checked with no edit. One project per call, into a scratch folder:
#
#     bash tools/init_gallery.sh fa3|xformers|activation|punica|scatter|fht|megablocks|fast_rnnt  [SCRATCH]
#
# fa3 and xformers are git clones with their CUTLASS submodule checked out (sparse: the mirrors
# lack some media blobs), so init finds CUTLASS as a header library and the build reads its
# commit; fa3 drops hopper/instantiations/*.cu first (FA3_GENERATED=keep keeps them), so init
# finds generate_kernels.py writes them and makes it a generate step.
#
# BUILD=0 runs init only (what it writes and its "needs a hand" list).
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

clone() {  # clone MIRROR-NAME REV FOLDER SPARSE-PATHS...: a git checkout of REV, sparse
    local git=$MIRROR/$1/repo rev=$2 dest=$3
    shift 3
    rm -rf "$dest"
    git clone -q --no-checkout "$git" "$dest"
    git -C "$dest" sparse-checkout set --no-cone "$@"
    git -C "$dest" checkout -q "$rev"
}

submodule() {  # submodule CHECKOUT PATH MIRROR-NAME SPARSE-PATHS...: PATH at the commit CHECKOUT pins
    local top=$1 path=$2 git=$MIRROR/$3/repo
    shift 3
    # the full checkout fails on blobs a mirror lacks, after the submodule's HEAD is set
    git -C "$top" -c protocol.file.allow=always -c "submodule.$path.url=$git" \
        submodule update --init "$path" 2>/dev/null || true
    git -C "$top/$path" sparse-checkout set --no-cone "$@"
    git -C "$top/$path" checkout -q "$(git -C "$top" ls-tree HEAD "$path" | awk '{print $3}')"
}

build_and_check() {  # in the project folder; BUILD=0: init only
    [ "${BUILD:-1}" = 0 ] && return 0
    time "$@" build
    "$@" check dist/*.whl || echo "check: exit $?"
}

case "$1" in
fa3)
    clone Dao-AILab+flash-attention 0251105a "$SCRATCH/fa3" /hopper/ /.gitmodules /csrc/cutlass /README.md
    submodule "$SCRATCH/fa3" csrc/cutlass NVIDIA+cutlass /include/ /tools/util/include/
    cd "$SCRATCH/fa3/hopper"
    [ "${FA3_GENERATED:-drop}" = keep ] || rm instantiations/*.cu
    for s in BACKWARD SPLIT PAGEDKV APPENDKV LOCAL SOFTCAP PACKGQA FP16 FP8 VARLEN CLUSTER \
             HDIM64 HDIM96 HDIM192 HDIM256 SM80 HDIMDIFF64 HDIMDIFF192; do
        export "FLASH_ATTENTION_DISABLE_$s=TRUE"
    done
    "$WF" init --archs 9.0a .
    build_and_check "$WF"
    ;;
xformers)
    clone facebookresearch+xformers ca6d2aa0 "$SCRATCH/xformers" '/*'
    submodule "$SCRATCH/xformers" third_party/cutlass NVIDIA+cutlass /include/ /tools/util/include/ /examples/
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
punica)
    # a kernel-builder kernel with a CUTLASS dependency (cutlass_3_8: nvidia-cutlass 3.8.0.0
    # from PyPI); unstable ABI: the build uses the CUDA torch 2.13 environment of the cache
    checkout huggingface+kernels-community 40d4194f "$SCRATCH/kernels-community" punica-sgmv
    cd "$SCRATCH/kernels-community/punica-sgmv"
    "$WF" init --archs 9.0 .
    build_and_check "$WF"
    ;;
scatter)
    # several shared objects in one wheel: torch_scatter's four CUDA operator libraries
    # (FORCE_ONLY_CUDA=1: its switch for the CUDA ones only), each kind: library; unstable ABI:
    # the build uses the CUDA torch 2.13 environment of the cache
    pip download -q --no-deps --no-binary :all: -d "$SCRATCH" torch-scatter==2.1.2
    rm -rf "$SCRATCH/torch_scatter-2.1.2"
    tar -xzf "$SCRATCH/torch_scatter-2.1.2.tar.gz" -C "$SCRATCH"
    cd "$SCRATCH/torch_scatter-2.1.2"
    FORCE_ONLY_CUDA=1 "$WF" init --archs 9.0 .
    build_and_check "$WF"
    ;;
fht)
    checkout Dao-AILab+fast-hadamard-transform e7706fa "$SCRATCH/fht"
    cd "$SCRATCH/fht"
    "$WF312" init --torch 2.11.0 --archs 9.0 .
    [ "${BUILD:-1}" = 0 ] || time env -u PIP_FIND_LINKS "$WF312" build --cache-dir "$CACHE"
    ;;
megablocks)
    checkout databricks+megablocks 78eea65 "$SCRATCH/megablocks"
    cd "$SCRATCH/megablocks"
    # torch 2.10.0: PyPI's build of it is CUDA 12.8's, the last torch of CUDA 12; a classic
    # extension is built with its torch's CUDA major (issue 20), and CUDA 13's CCCL 3 breaks it
    "$WF" init --torch 2.10.0 --archs 9.0 .
    # The one edit: CUDA 13's CCCL 3 changed cub::DeviceScan (csrc/cumsum.h:34); CUDA 12 builds it.
    printf '\ncuda: ["12.4"]\n' >> matrix.yaml
    # A CUDA 12.4 provisioned in the user cache, seen from $CACHE (which holds the CUDA torch).
    mkdir -p "$CACHE/toolkits"
    [ -e "$CACHE/toolkits/cuda-12.4-debian" ] ||
        ln -s ~/.cache/wheelforge/toolkits/cuda-12.4-debian "$CACHE/toolkits/cuda-12.4-debian"
    [ "${BUILD:-1}" = 0 ] || time env -u PIP_FIND_LINKS "$WF" build --cache-dir "$CACHE"
    "$WF" check dist/*.whl || echo "check: exit $?"
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
    [ "${BUILD:-1}" = 0 ] || time env -u PIP_FIND_LINKS "$WF312" build --cache-dir "$CACHE"
    ;;
*)
    echo "usage: $0 fa3|xformers|activation|punica|scatter|fht|megablocks|fast_rnnt [SCRATCH]" >&2
    exit 2
    ;;
esac
