// Uses libtorch's C++ API the way torch/extension.h code does: the symbols are mangled.
namespace at { struct Tensor { ~Tensor(); }; }
namespace c10 { struct Error { Error(const char* msg); }; }
int use() {
  { at::Tensor t; }
  c10::Error e("x");
  return 0;
}

/* The module init function its file name (_C.abi3.so) asks for. */
extern "C" void* PyInit__C(void) { return nullptr; }
