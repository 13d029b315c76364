// Schemas of the wheelforge_kernels ops. Implementations register per dispatch key in
// activation_cpu.cpp, norm_cpu.cpp (CPU) and activation_cuda.cu, norm_cuda.cu (CUDA).
#include "common.h"

STABLE_TORCH_LIBRARY(wheelforge_kernels, m) {
  // x: [..., 2 * d] -> act(x[..., :d]) * x[..., d:]: [..., d]
  m.def("silu_and_mul(Tensor input) -> Tensor");
  m.def("gelu_and_mul(Tensor input) -> Tensor");
  m.def("gelu_tanh_and_mul(Tensor input) -> Tensor");
  // x * rsqrt(mean(x^2, -1) + epsilon) * weight, computed in float32.
  m.def("rms_norm(Tensor input, Tensor weight, float epsilon) -> Tensor");
  // residual += input; input = rms_norm(residual) * weight; both in place.
  m.def(
      "fused_add_rms_norm(Tensor(a!) input, Tensor(b!) residual, Tensor weight, float epsilon) "
      "-> ()");
}
