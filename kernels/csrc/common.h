// Shared helpers for the wheelforge_kernels ops: checks and dtype dispatch.
//
// Everything here is written against PyTorch's stable ABI only (torch/csrc/stable and
// torch/headeronly), so one binary loads on every torch from the matrix's target version up.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>
#include <vector>

namespace wfk {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The ops accept float32, float16 and bfloat16 and compute in float32.
inline bool is_supported_dtype(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16;
}

inline void check_input(const Tensor& t, const char* op, const char* name) {
  STD_TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  STD_TORCH_CHECK(is_supported_dtype(t.scalar_type()), op, ": ", name,
                  " must be float32, float16 or bfloat16, got ",
                  torch::headeronly::toString(t.scalar_type()));
  STD_TORCH_CHECK(t.dim() >= 1, op, ": ", name, " must have at least one dimension");
}

inline void check_same(const Tensor& a, const Tensor& b, const char* op, const char* what) {
  STD_TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": ", what,
                  " must have the same dtype, got ", torch::headeronly::toString(a.scalar_type()),
                  " and ", torch::headeronly::toString(b.scalar_type()));
  STD_TORCH_CHECK(a.get_device_index() == b.get_device_index() && a.is_cuda() == b.is_cuda(), op,
                  ": ", what, " must be on the same device");
}

inline std::vector<int64_t> sizes_of(const Tensor& t) {
  auto s = t.sizes();
  return std::vector<int64_t>(s.begin(), s.end());
}

// Rows of a tensor seen as [rows, last_dim].
inline int64_t rows_of(const Tensor& t) {
  const int64_t last = t.size(t.dim() - 1);
  return last == 0 ? 0 : t.numel() / last;
}

}  // namespace wfk

// Calls BODY with `scalar_t` bound to the C++ element type of DTYPE.
// CPU code uses the header-only c10::Half / c10::BFloat16; CUDA code maps them to its own types.
#define WFK_DISPATCH_FLOAT_TYPES(DTYPE, OP, ...)                                      \
  [&] {                                                                               \
    switch (DTYPE) {                                                                  \
      case torch::headeronly::ScalarType::Float: {                                    \
        using scalar_t = float;                                                       \
        return __VA_ARGS__();                                                         \
      }                                                                               \
      case torch::headeronly::ScalarType::Half: {                                     \
        using scalar_t = c10::Half;                                                   \
        return __VA_ARGS__();                                                         \
      }                                                                               \
      case torch::headeronly::ScalarType::BFloat16: {                                 \
        using scalar_t = c10::BFloat16;                                               \
        return __VA_ARGS__();                                                         \
      }                                                                               \
      default:                                                                        \
        STD_TORCH_CHECK(false, OP, ": unsupported dtype ",                           \
                        torch::headeronly::toString(DTYPE));                          \
    }                                                                                 \
  }()
