#!/usr/bin/env bash
# Rebuilds the small shared objects the abicheck unit tests read (undefined symbols are the point).
set -euo pipefail
cd "$(dirname "$0")"
gcc -O1 -shared -fPIC -o ext.so ext.c
gcc -O1 -shared -fPIC -o newer_shim.so newer_shim.c
gcc -O1 -shared -fPIC -o shim_215.so shim_215.c
g++ -O1 -shared -fPIC -o cxx_symbol.so cxx_symbol.cpp
g++ -O1 -shared -fPIC -o classic_py.so classic_py.cpp
gcc -O1 -shared -fPIC -o glibc234.so glibc234.c
gcc -O1 -shared -fPIC -fvisibility=hidden -o hidden_init.so hidden_init.c
gcc -O1 -shared -fPIC -o oplib.so oplib.c
gcc -O1 -shared -fPIC -o own_cxx.so own_cxx.c
gcc -O1 -shared -fPIC -o unresolved_oplib.so unresolved_oplib.c
gcc -O1 -shared -fPIC -Wl,-soname,libhelper.so -o libhelper.so helper.c
gcc -O1 -shared -fPIC -o linked_oplib.so unresolved_oplib.c -L. -lhelper
# linked to torch's libc10.so, as the stable ABI's builds are (a stand-in made only to link it)
stub=$(mktemp -d)
echo 'void c10_stub(void) {}' > "$stub/c10.c"
gcc -shared -fPIC -Wl,-soname,libc10.so -o "$stub/libc10.so" "$stub/c10.c"
gcc -O1 -shared -fPIC -o torch_oplib.so unresolved_oplib.c -Wl,--no-as-needed -L"$stub" -lc10
rm -r "$stub"
gcc -O1 -o program program.c
# torch's lib folder in small: libtorch_cpu.so needs the libgomp.so.1 beside it (as torch's
# wheels ship it); gomp_oplib.so links libtorch_cpu.so and calls GOMP_parallel, unversioned
mkdir -p torchlib
gcc -shared -fPIC -Wl,-soname,libgomp.so.1 -o torchlib/libgomp.so.1 gomp.c
gcc -shared -fPIC -Wl,-soname,libtorch_cpu.so -o torchlib/libtorch_cpu.so torch_cpu.c \
    -Wl,--no-as-needed -Ltorchlib -l:libgomp.so.1
gcc -O1 -shared -fPIC -o gomp_oplib.so gomp_oplib.c -Wl,--no-as-needed -Ltorchlib -ltorch_cpu \
    -Wl,--allow-shlib-undefined

# References without a symbol version to glibc's and libstdc++'s functions, as released wheels
# carry them (cupy's nvtx module: dlopen; xformers: GOMP_parallel): linked against stand-ins of
# libc.so.6, libstdc++.so.6 and libcudart.so.12 that version nothing.
stub=$(mktemp -d)
echo 'void libc_stub(void) {}' > "$stub/s.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libc.so.6 -o "$stub/libc.so.6" "$stub/s.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libstdc++.so.6 -o "$stub/libstdc++.so.6" "$stub/s.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libcudart.so.12 -o "$stub/libcudart.so.12" "$stub/s.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libcudart.so.11.0 -o "$stub/libcudart.so.11.0" "$stub/s.c"
gcc -O1 -shared -fPIC -nostdlib -o dl_unversioned.so dl_unversioned.c -Wl,--no-as-needed \
    -L"$stub" -l:libc.so.6
gcc -O1 -shared -fPIC -nostdlib -o getrandom_unversioned.so getrandom_unversioned.c \
    -Wl,--no-as-needed \
    -L"$stub" -l:libc.so.6
gcc -O1 -shared -fPIC -nostdlib -o new_unversioned.so new_unversioned.c -Wl,--no-as-needed \
    -L"$stub" -l:libstdc++.so.6 -l:libc.so.6
gcc -O1 -shared -fPIC -nostdlib -o gomp_alone.so gomp_oplib.c -L"$stub" -l:libc.so.6
gcc -O1 -shared -fPIC -o cudart12_oplib.so cudart12_oplib.c -Wl,--no-as-needed \
    -L"$stub" -l:libcudart.so.12
# the same built for CUDA 11 (as bitsandbytes ships one library per CUDA)
gcc -O1 -shared -fPIC -o cudart11_oplib.so cudart12_oplib.c -Wl,--no-as-needed \
    -L"$stub" -l:libcudart.so.11.0
rm -r "$stub"
# an op library whose symbol binds in its dependency's dependency (libmid.so needs libhelper.so)
gcc -O1 -shared -fPIC -Wl,-soname,libmid.so -o libmid.so mid.c -Wl,--no-as-needed -L. -lhelper
gcc -O1 -shared -fPIC -o mid_oplib.so unresolved_oplib.c -Wl,--no-as-needed -L. -lmid
strip --strip-unneeded ./*.so torchlib/*.so* program
