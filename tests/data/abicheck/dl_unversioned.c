/* Loads a library itself, as cupy's nvtx module and cuda-bindings' modules do: dlopen, dlsym and
   dlclose are referenced without a symbol version (linked against a libc.so.6 that versions
   nothing, build.sh), so the loader binds them to the default version of whatever has them. */
void *dlopen(const char *file, int mode);
void *dlsym(void *handle, const char *name);
int dlclose(void *handle);
int probe(const char *file) {
    void *h = dlopen(file, 2);
    if (!h) return 0;
    int found = dlsym(h, "probe") != 0;
    dlclose(h);
    return found;
}
