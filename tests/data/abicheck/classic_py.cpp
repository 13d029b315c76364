// A classic extension (torch/extension.h code: libtorch's C++ API, mangled) that also calls a
// Python function outside the limited API, as a cp3X-abi3 tag must not allow.
namespace at { struct Tensor { ~Tensor(); }; }
namespace c10 { struct Error { Error(const char* msg); }; }
extern "C" const char* PyUnicode_AsUTF8(void* s);
extern "C" void* PyModule_Create2(void* def, int apiver);
int use() {
  { at::Tensor t; }
  c10::Error e("x");
  PyUnicode_AsUTF8(nullptr);
  return PyModule_Create2(nullptr, 3) != nullptr;
}

/* The module init function its file name (_C.abi3.so) asks for. */
extern "C" void* PyInit__C(void) { return nullptr; }
