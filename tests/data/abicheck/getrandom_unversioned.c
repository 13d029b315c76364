/* getrandom, unversioned: libc.so.6 has it from GLIBC_2.25 on (build.sh links a libc.so.6 that
   versions nothing). */
long getrandom(void *buf, unsigned long len, unsigned flags);
long fill(void *buf, unsigned long len) { return getrandom(buf, len, 0); }
