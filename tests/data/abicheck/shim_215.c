/* Uses a shim function that arrived in torch 2.15 (torch/csrc/stable/c/shim.h declares it under
   TORCH_VERSION_2_15_0), beside one of 2.10. */
#include <stdint.h>
typedef int AOTITorchError;
AOTITorchError torch_dtype_from_pyobject(void* py_obj, int32_t* ret_dtype);
AOTITorchError torch_library_impl(void* lib, const char* name, void* fn, uint64_t extension_build_version);
int use(void* o) {
  int32_t dtype;
  torch_library_impl(0, "f", 0, 0);
  return torch_dtype_from_pyobject(o, &dtype) + dtype;
}

/* The module init function its file name (_C.abi3.so) asks for. */
void* PyInit__C(void) { return 0; }
