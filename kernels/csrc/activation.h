// Host-side shape checks and output allocation shared by the CPU and CUDA activation ops.
#pragma once

#include "common.h"

namespace wfk {

// Validates x: [..., 2 * d] and returns a new empty [..., d] tensor on x's device.
inline Tensor act_and_mul_output(const Tensor& x, const char* op) {
  check_input(x, op, "input");
  const int64_t last = x.size(x.dim() - 1);
  STD_TORCH_CHECK(last % 2 == 0, op, ": the last dimension of input must be even, got ", last);
  auto sizes = sizes_of(x);
  sizes.back() = last / 2;
  return torch::stable::new_empty(x, sizes);
}

}  // namespace wfk
