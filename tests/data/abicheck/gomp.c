void GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags) { fn(data); }
