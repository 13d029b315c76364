#!/usr/bin/env bash
# Issue 22: do wheelforge's own nvcc flags cost compile time? One FA3 source compiled with the
# command wheelforge generates (`wheelforge build --dry-run --archs 9.0a`) and with the same
# command without wheelforge's additions (--objdir-as-tempdir, the weak-shims -include, the
# -ffile-prefix-map's, --frandom-seed, -Xcudafe=--orig_src_path_name) and with hopper/setup.py's
# --threads 2 instead: A and B side by side (one core each), twice, in swapped order.
#
#   bash bench/flags_ab.sh PROJECT SHIMS [SOURCE]
#
# PROJECT: FA3's tree as bench/bigbuild.py prepares it (`tar xzf .bench/fa3.tar.gz`, then
# PROJECT=flash-attention); SHIMS: a gen/wheelforge_weak_shims.h from a wheelforge build of it;
# SOURCE: hopper/flash_fwd_combine.cu. Prints one line per compile: wall, user CPU, peak RSS.
set -euo pipefail
P=$(cd "${1:?the FA3 project folder}" && pwd)
SHIMS=$(realpath "${2:?a wheelforge_weak_shims.h}")
SRC=${3:-hopper/flash_fwd_combine.cu}
PY=${PYTHON:-python3}
T=$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
PYI=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
CUDA=$(dirname "$(dirname "$(command -v nvcc)")")
W=$(mktemp -d /tmp/wheelforge-flags-ab.XXXXXX)
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
WF="--objdir-as-tempdir -Xcompiler=-ffile-prefix-map=$P=. -Xcompiler=-ffile-prefix-map=$CUDA=cuda
 -Xcompiler=-ffile-prefix-map=$PYI=python/include -Xcompiler=-ffile-prefix-map=$T=torch -include $SHIMS
 -Xcudafe=--orig_src_path_name=$SRC --frandom-seed=$SRC"
OWN="--threads 2"
one() {  # one() NAME EXTRA-FLAGS
    mkdir -p "$W/$1"
    # shellcheck disable=SC2086  # the flag lists: words
    /usr/bin/time -f "$1 %e s wall, %U s user, %M KB peak" nvcc --generate-dependencies-with-compile \
        --dependency-output "$W/$1/x.o.d" $COMMON $2 -c "$P/$SRC" -o "$W/$1/x.o"
}
one A1-wheelforge "$WF" & one B1-setup.py "$OWN" & wait
one B2-setup.py "$OWN" & one A2-wheelforge "$WF" & wait
rm -rf "$W"
