/* Issue 9, defect 1: a module init function defined without PyMODINIT_FUNC, compiled with
   -fvisibility=hidden: the symbol is there, but not exported, so 'import' fails. */
void* PyInit__C(void) { return 0; }
