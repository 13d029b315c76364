/* The helper library unresolved_oplib.c's kernel calls (libhelper.so). */
void scale_rows(void* data, int n) { (void)data; (void)n; }
