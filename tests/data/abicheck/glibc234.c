/* Needs glibc 2.34 (pthread functions moved into libc there), like builds on Debian 12. */
#include <pthread.h>
int use(pthread_t t) { return pthread_join(t, 0); }

/* The module init function its file name (_C.abi3.so) asks for. */
void* PyInit__C(void) { return 0; }
