/* A stand-in op library (what STABLE_TORCH_LIBRARY compiles to): it registers its operators
   through the stable ABI's shims and exports no PyInit, so torch.ops.load_library loads it and no
   'import' does, whatever its file is named. */
typedef int AOTITorchError;
AOTITorchError aoti_torch_library_init_impl(const char* ns, const char* key, const char* file,
                                            unsigned line, void** ret);
AOTITorchError torch_library_impl(void* lib, const char* name, void* fn, unsigned long long v);
AOTITorchError aoti_torch_get_data_ptr(void* t, void** ret);
static void kernel(void* stack) {
  void* p;
  aoti_torch_get_data_ptr(stack, &p);
}
__attribute__((constructor)) static void register_ops(void) {
  void* lib;
  aoti_torch_library_init_impl("demo", "CPU", "oplib.c", 1, &lib);
  torch_library_impl(lib, "demo::scale", (void*)kernel, 0);
}
