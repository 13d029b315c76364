#!/usr/bin/env bash
# Rebuilds the small shared objects the abicheck unit tests read (undefined symbols are the point).
set -euo pipefail
cd "$(dirname "$0")"
gcc -O1 -shared -fPIC -o ext.so ext.c
gcc -O1 -shared -fPIC -o newer_shim.so newer_shim.c
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
strip --strip-unneeded ./*.so program
