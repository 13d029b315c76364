#!/bin/sh
# Rebuilds the binaries that tests/unit/test_fatbin.py reads (made with nvcc 13.0.88, gcc, Linux x86-64).
# -cudart none keeps them small: no static CUDA runtime (and no fatbin of its own) is linked in.
set -eu
cd "$(dirname "$0")"
so="nvcc -shared -cudart none -Xcompiler -fPIC"

# Two translation units: two containers of SASS sm_80, SASS sm_90a (raw) and PTX compute_90 (zstd).
$so -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
    -gencode arch=compute_90,code=compute_90 -o sm80_sm90a_ptx90.so add_one.cu scale.cu
# Family and arch-specific variants, everything zstd-compressed, 112-byte entry headers.
$so -Xfatbin=-compress-all -gencode arch=compute_100f,code=[sm_100f,compute_100f] \
    -gencode arch=compute_120a,code=sm_120a -o sm100f_sm120a_zstd.so add_one.cu
# -compress-mode=speed compresses with LZ4.
$so -Xfatbin=-compress-all -Xfatbin=-compress-mode=speed \
    -gencode arch=compute_75,code=[sm_75,compute_75] -o sm75_lz4.so add_one.cu
# Object files: nvcc -c keeps .nv_fatbin; -rdc=true puts the images in __nv_relfatbin instead.
nvcc -c -Xcompiler -fPIC -gencode arch=compute_80,code=[sm_80,compute_80] -o add_one_sm80.o add_one.cu
nvcc -c -rdc=true -Xcompiler -fPIC -gencode arch=compute_86,code=[sm_86,compute_86] \
    -o add_one_rdc_sm86.o add_one.cu
gcc -shared -fPIC -o no_cuda.so no_cuda.c
# Device-linked relocatable code: __nv_relfatbin (the objects' images) next to .nv_fatbin (the
# linked image); cuobjdump lists only .nv_fatbin unless given --all-fatbin.
tmp=$(mktemp -d)
nvcc -c -rdc=true -Xcompiler -fPIC -gencode arch=compute_80,code=[sm_80,compute_80] -o "$tmp/a.o" add_one.cu
nvcc -dlink -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -o "$tmp/dlink.o" "$tmp/a.o"
g++ -shared -o rdc_linked_sm80.so "$tmp/a.o" "$tmp/dlink.o"
rm -r "$tmp"
