/* A shared object without any fatbin. */
int answer(void) { return 42; }
