/* A stand-in extension: shims of torch 2.9/2.10 and limited-API Python (cp310). */
typedef int AOTITorchError;
AOTITorchError aoti_torch_get_data_ptr(void* t, void** ret);
AOTITorchError torch_library_impl(void* lib, const char* name, void* fn, unsigned long long v);
void* PyModule_Create2(void* def, int apiver);
void* PyUnicode_AsUTF8AndSize(void* s, long* size);
int use(void) {
  void* p;
  aoti_torch_get_data_ptr(0, &p);
  torch_library_impl(0, "x", 0, 0);
  PyUnicode_AsUTF8AndSize(0, 0);
  return PyModule_Create2(0, 3) != 0;
}

/* The module init function its file name (_C.abi3.so) asks for. */
void* PyInit__C(void) { return 0; }
