// A classic (unstable-ABI) extension: torch's full C++ API and pybind11, as setup.py's
// CUDAExtension builds them.
#include <torch/extension.h>

at::Tensor add_one_cuda(const at::Tensor& x);
int cuda_runtime_version();

at::Tensor add_one(const at::Tensor& x) {
  if (x.is_cuda()) return add_one_cuda(x);
  return x + 1;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_one", &add_one, "x + 1 (a CUDA kernel on the current stream for CUDA tensors)");
  m.def("cuda_version", &cuda_runtime_version, "the CUDA runtime it was built with (CUDART_VERSION)");
}
