// CPU implementations of silu_and_mul, gelu_and_mul and gelu_tanh_and_mul.
#include <cmath>

#include "activation.h"

namespace wfk {
namespace {

struct Silu {
  static float apply(float x) { return x / (1.0f + std::exp(-x)); }
};
struct Gelu {
  static float apply(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }
};
struct GeluTanh {
  static float apply(float x) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(inner));
  }
};

template <typename Act>
Tensor act_and_mul_cpu(Tensor input, const char* op) {
  STD_TORCH_CHECK(input.is_cpu(), op, ": expected a CPU tensor");
  Tensor out = act_and_mul_output(input, op);
  const Tensor x = torch::stable::contiguous(input);
  const int64_t d = out.size(out.dim() - 1);
  const int64_t rows = rows_of(out);
  if (rows == 0 || d == 0) return out;
  WFK_DISPATCH_FLOAT_TYPES(x.scalar_type(), op, [&] {
    const scalar_t* in = static_cast<const scalar_t*>(x.const_data_ptr());
    scalar_t* o = static_cast<scalar_t*>(out.mutable_data_ptr());
    const int64_t grain = std::max<int64_t>(1, 32768 / d);
    torch::stable::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* a = in + r * 2 * d;
        const scalar_t* b = a + d;
        scalar_t* y = o + r * d;
        for (int64_t i = 0; i < d; ++i) {
          y[i] = static_cast<scalar_t>(Act::apply(static_cast<float>(a[i])) *
                                       static_cast<float>(b[i]));
        }
      }
    });
  });
  return out;
}

Tensor silu_and_mul_cpu(Tensor input) { return act_and_mul_cpu<Silu>(input, "silu_and_mul"); }
Tensor gelu_and_mul_cpu(Tensor input) { return act_and_mul_cpu<Gelu>(input, "gelu_and_mul"); }
Tensor gelu_tanh_and_mul_cpu(Tensor input) {
  return act_and_mul_cpu<GeluTanh>(input, "gelu_tanh_and_mul");
}

}  // namespace
}  // namespace wfk

STABLE_TORCH_LIBRARY_IMPL(wheelforge_kernels, CPU, m) {
  m.impl("silu_and_mul", TORCH_BOX(&wfk::silu_and_mul_cpu));
  m.impl("gelu_and_mul", TORCH_BOX(&wfk::gelu_and_mul_cpu));
  m.impl("gelu_tanh_and_mul", TORCH_BOX(&wfk::gelu_tanh_and_mul_cpu));
}
