/* An op library whose kernel calls a helper of the project that no source of the extension
   defines (a source left out of `sources`): it links, as shared objects may, and fails
   torch.ops.load_library with "undefined symbol: scale_rows". Built twice: alone, and linked to
   libhelper.so (which defines it), as linked_oplib.so. */
typedef int AOTITorchError;
AOTITorchError aoti_torch_library_init_impl(const char* ns, const char* key, const char* file,
                                            unsigned line, void** ret);
AOTITorchError torch_library_impl(void* lib, const char* name, void* fn, unsigned long long v);
void scale_rows(void* data, int n);
static void kernel(void* stack) { scale_rows(stack, 4); }
__attribute__((constructor)) static void register_ops(void) {
  void* lib;
  aoti_torch_library_init_impl("demo", "CPU", "unresolved_oplib.c", 1, &lib);
  torch_library_impl(lib, "demo::scale", (void*)kernel, 0);
}
