/* operator new and delete, unversioned, with libstdc++.so.6 a DT_NEEDED library (build.sh links
   a libstdc++.so.6 that versions nothing): libstdc++'s own, not a namespace of std::. */
void *_Znwm(unsigned long size);
void _ZdlPvm(void *p, unsigned long size);
void roundtrip(void) { _ZdlPvm(_Znwm(8), 8); }
