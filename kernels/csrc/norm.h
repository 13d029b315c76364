// Host-side checks shared by the CPU and CUDA RMSNorm ops.
#pragma once

#include "common.h"

namespace wfk {

inline void check_norm_args(const Tensor& x, const Tensor& weight, double epsilon, const char* op) {
  check_input(x, op, "input");
  check_input(weight, op, "weight");
  check_same(x, weight, op, "input and weight");
  STD_TORCH_CHECK(weight.dim() == 1, op, ": weight must be 1-D, got ", weight.dim(), " dims");
  STD_TORCH_CHECK(weight.size(0) == x.size(x.dim() - 1), op, ": weight has ", weight.size(0),
                  " elements but the last dimension of input is ", x.size(x.dim() - 1));
  STD_TORCH_CHECK(epsilon >= 0.0, op, ": epsilon must be non-negative, got ", epsilon);
}

}  // namespace wfk
