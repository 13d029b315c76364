#!/usr/bin/env bash
# Issue 22: do wheelforge's own nvcc flags cost compile time? One source compiled with the
# command wheelforge generates (`wheelforge build --dry-run`) and with the same command without
# wheelforge's additions (--objdir-as-tempdir, the weak-shims -include, the -ffile-prefix-map's,
# --frandom-seed, -Xcudafe=--orig_src_path_name) and with the project's own setup.py's flags
# instead: A and B side by side (one core each), twice, in swapped order.
#
#   bash bench/flags_ab.sh [fa3|fa2] PROJECT SHIMS [SOURCE]
#
# fa3 (the default): FA3's tree as bench/bigbuild.py prepares it (`tar xzf .bench/fa3.tar.gz`,
# then PROJECT=flash-attention), for sm_90a; setup.py's own: hopper/setup.py's --threads 2;
# SOURCE: hopper/flash_fwd_combine.cu.
# fa2: kernels-community's FA2 port as bench/bigbuild.py prepares it (`tar xzf
# .bench/fa2.tar.gz`, PROJECT=flash-attn2), for sm_90; setup.py's own: what
# torch.utils.cpp_extension adds to every nvcc command (COMMON_NVCC_FLAGS' four
# -D__CUDA_NO_HALF*/BFLOAT16* defines and -DTORCH_API_INCLUDE_EXTENSION_H), which wheelforge does
# not pass; SOURCE: flash_attn/src/flash_fwd_split_hdim128_bf16_sm80.cu (FA2's longest on the H200).
# SHIMS: a gen/wheelforge_weak_shims.h from a wheelforge build (or --dry-run) of it.
# Prints one line per compile: wall, user CPU, peak RSS.
set -euo pipefail
KIND=fa3
case ${1:-} in fa3 | fa2) KIND=$1 && shift ;; esac
P=$(cd "${1:?the project folder}" && pwd)
SHIMS=$(realpath "${2:?a wheelforge_weak_shims.h}")
PY=${PYTHON:-python3}
T=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
PYI=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
W=$(mktemp -d /tmp/wheelforge-flags-ab.XXXXXX)
case $KIND in
fa3)  # hopper/setup.py's flags for sm_90a and the switches bench/bigbuild.py sets
    SRC=${3:-hopper/flash_fwd_combine.cu}
    FEATURES=""
    for f in BACKWARD FP16 FP8 HDIM64 HDIM96 HDIM192 HDIM256 SM8x HDIMDIFF64 HDIMDIFF192; do
        FEATURES+=" -DFLASHATTENTION_DISABLE_$f"
    done
    COMMON="-std=c++17 -O3 -ccbin=/usr/bin/c++ -Xcompiler=-fPIC -DUSE_CUDA -DTORCH_TARGET_VERSION=0x0209000000000000
 -DPy_LIMITED_API=0x030a0000 -DTORCH_EXTENSION_NAME=_C -I$P/hopper -I$P/csrc/cutlass/include -I$T/include -I$PYI
 --ftemplate-backtrace-limit=0 --use_fast_math -lineinfo -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED
 -DCUTLASS_ENABLE_GDC_FOR_SM90 -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG --expt-relaxed-constexpr
 --expt-extended-lambda -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
 -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ $FEATURES -gencode=arch=compute_90a,code=sm_90a"
    OWN="--threads 2" ;;
fa2)  # the port's build.toml flags, as bench/bigbuild.py's matrix.yaml has them, for sm_90
    SRC=${3:-flash_attn/src/flash_fwd_split_hdim128_bf16_sm80.cu}
    COMMON="-std=c++17 -O3 -ccbin=/usr/bin/c++ -Xcompiler=-fPIC -DUSE_CUDA -DTORCH_TARGET_VERSION=0x020a000000000000
 -DPy_LIMITED_API=0x030a0000 -DTORCH_EXTENSION_NAME=_flash_attn2_wf -I$P/flash_attn -I$P/flash_attn/src -I$P/torch-ext
 -I$P/cutlass/include -I$T/include -I$PYI --expt-relaxed-constexpr --expt-extended-lambda --use_fast_math
 -gencode=arch=compute_90,code=sm_90"
    OWN="-D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__
 -D__CUDA_NO_HALF2_OPERATORS__ -DTORCH_API_INCLUDE_EXTENSION_H" ;;
esac
WF="--objdir-as-tempdir -Xcompiler=-ffile-prefix-map=$P=. -Xcompiler=-ffile-prefix-map=$CUDA=cuda
 -Xcompiler=-ffile-prefix-map=$PYI=python/include -Xcompiler=-ffile-prefix-map=$T=torch -include $SHIMS
 -Xcudafe=--orig_src_path_name=$SRC --frandom-seed=$SRC"
one() {  # one() NAME EXTRA-FLAGS
    mkdir -p "$W/$1"
    # shellcheck disable=SC2086  # the flag lists: words
    /usr/bin/time -f "$1 %e s wall, %U s user, %M KB peak" nvcc --generate-dependencies-with-compile \
        --dependency-output "$W/$1/x.o.d" $COMMON $2 -c "$P/$SRC" -o "$W/$1/x.o"
}
one A1-wheelforge "$WF" & one B1-setup.py "$OWN" & wait
one B2-setup.py "$OWN" & one A2-wheelforge "$WF" & wait
rm -rf "$W"
