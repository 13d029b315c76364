/* Uses a shim function that arrived in torch 2.13, and Python API beyond cp310. */
typedef int AOTITorchError;
AOTITorchError torch_exception_get_what_without_backtrace(const char** out);
int PyObject_GetBuffer(void* o, void* view, int flags);
const char* PyUnicode_AsUTF8(void* s);
int use(void) {
  const char* what;
  torch_exception_get_what_without_backtrace(&what);
  PyUnicode_AsUTF8(0);
  return PyObject_GetBuffer(0, 0, 0);
}

/* The module init function its file name (_C.abi3.so) asks for. */
void* PyInit__C(void) { return 0; }
