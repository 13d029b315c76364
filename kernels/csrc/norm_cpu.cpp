// CPU implementations of rms_norm and fused_add_rms_norm.
#include <cmath>

#include "norm.h"

namespace wfk {
namespace {

Tensor rms_norm_cpu(Tensor input, Tensor weight, double epsilon) {
  const char* op = "rms_norm";
  check_norm_args(input, weight, epsilon, op);
  STD_TORCH_CHECK(input.is_cpu(), op, ": expected CPU tensors");
  const Tensor x = torch::stable::contiguous(input);
  const Tensor w = torch::stable::contiguous(weight);
  Tensor out = torch::stable::new_empty(x, sizes_of(x));
  const int64_t d = x.size(x.dim() - 1);
  const int64_t rows = rows_of(x);
  if (rows == 0 || d == 0) return out;
  const float eps = static_cast<float>(epsilon);
  WFK_DISPATCH_FLOAT_TYPES(x.scalar_type(), op, [&] {
    const scalar_t* in = static_cast<const scalar_t*>(x.const_data_ptr());
    const scalar_t* wp = static_cast<const scalar_t*>(w.const_data_ptr());
    scalar_t* o = static_cast<scalar_t*>(out.mutable_data_ptr());
    torch::stable::parallel_for(0, rows, std::max<int64_t>(1, 16384 / d), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const scalar_t* xr = in + r * d;
        float sum = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          const float v = static_cast<float>(xr[i]);
          sum += v * v;
        }
        const float inv = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
        for (int64_t i = 0; i < d; ++i) {
          o[r * d + i] = static_cast<scalar_t>(static_cast<float>(xr[i]) * inv *
                                               static_cast<float>(wp[i]));
        }
      }
    });
  });
  return out;
}

void fused_add_rms_norm_cpu(Tensor input, Tensor residual, Tensor weight, double epsilon) {
  const char* op = "fused_add_rms_norm";
  check_norm_args(input, weight, epsilon, op);
  check_input(residual, op, "residual");
  check_same(input, residual, op, "input and residual");
  STD_TORCH_CHECK(input.is_cpu(), op, ": expected CPU tensors");
  STD_TORCH_CHECK(sizes_of(input) == sizes_of(residual), op,
                  ": input and residual must have the same shape");
  // Both are written in place, so they must be contiguous already: a copy would lose the writes.
  STD_TORCH_CHECK(input.is_contiguous() && residual.is_contiguous(), op,
                  ": input and residual must be contiguous");
  const Tensor w = torch::stable::contiguous(weight);
  const int64_t d = input.size(input.dim() - 1);
  const int64_t rows = rows_of(input);
  if (rows == 0 || d == 0) return;
  const float eps = static_cast<float>(epsilon);
  WFK_DISPATCH_FLOAT_TYPES(input.scalar_type(), op, [&] {
    scalar_t* x = static_cast<scalar_t*>(input.mutable_data_ptr());
    scalar_t* res = static_cast<scalar_t*>(residual.mutable_data_ptr());
    const scalar_t* wp = static_cast<const scalar_t*>(w.const_data_ptr());
    torch::stable::parallel_for(0, rows, std::max<int64_t>(1, 16384 / d), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        scalar_t* xr = x + r * d;
        scalar_t* rr = res + r * d;
        float sum = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          // Round the sum to the storage type first, as `residual = input + residual` would.
          const scalar_t z = static_cast<scalar_t>(static_cast<float>(xr[i]) + static_cast<float>(rr[i]));
          rr[i] = z;
          const float v = static_cast<float>(z);
          sum += v * v;
        }
        const float inv = 1.0f / std::sqrt(sum / static_cast<float>(d) + eps);
        for (int64_t i = 0; i < d; ++i) {
          xr[i] = static_cast<scalar_t>(static_cast<float>(rr[i]) * inv * static_cast<float>(wp[i]));
        }
      }
    });
  });
}

}  // namespace
}  // namespace wfk

STABLE_TORCH_LIBRARY_IMPL(wheelforge_kernels, CPU, m) {
  m.impl("rms_norm", TORCH_BOX(&wfk::rms_norm_cpu));
  m.impl("fused_add_rms_norm", TORCH_BOX(&wfk::fused_add_rms_norm_cpu));
}
