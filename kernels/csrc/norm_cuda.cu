// CUDA implementations of rms_norm and fused_add_rms_norm: one block per row, a float32 sum
// of squares reduced across the block, then a second pass over the row (served from L1/L2).
#include "cuda_utils.cuh"
#include "norm.h"

namespace wfk {
namespace {

template <typename T, int N>
__global__ void rms_norm_kernel(T* __restrict__ out, const T* __restrict__ in,
                                const T* __restrict__ weight, int64_t d, float eps) {
  using V = Vec<T, N>;
  const int64_t nvec = d / N;
  const V* x = reinterpret_cast<const V*>(in + blockIdx.x * d);
  const V* w = reinterpret_cast<const V*>(weight);
  V* y = reinterpret_cast<V*>(out + blockIdx.x * d);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const V v = x[i];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float f = to_float(v.v[k]);
      sum += f * f;
    }
  }
  const float inv = rsqrtf(block_sum(sum) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const V v = x[i];
    const V wv = w[i];
    V o;
#pragma unroll
    for (int k = 0; k < N; ++k) o.v[k] = from_float<T>(to_float(v.v[k]) * inv * to_float(wv.v[k]));
    y[i] = o;
  }
}

template <typename T, int N>
__global__ void fused_add_rms_norm_kernel(T* __restrict__ inout, T* __restrict__ residual,
                                          const T* __restrict__ weight, int64_t d, float eps) {
  using V = Vec<T, N>;
  const int64_t nvec = d / N;
  V* x = reinterpret_cast<V*>(inout + blockIdx.x * d);
  V* r = reinterpret_cast<V*>(residual + blockIdx.x * d);
  const V* w = reinterpret_cast<const V*>(weight);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const V xv = x[i];
    V rv = r[i];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      // Round to the storage type first, as `residual = input + residual` would.
      rv.v[k] = from_float<T>(to_float(xv.v[k]) + to_float(rv.v[k]));
      const float f = to_float(rv.v[k]);
      sum += f * f;
    }
    r[i] = rv;
  }
  const float inv = rsqrtf(block_sum(sum) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const V rv = r[i];
    const V wv = w[i];
    V o;
#pragma unroll
    for (int k = 0; k < N; ++k) o.v[k] = from_float<T>(to_float(rv.v[k]) * inv * to_float(wv.v[k]));
    x[i] = o;
  }
}

// Many rows: smaller blocks keep more of them resident; few rows: wide blocks use the GPU.
inline dim3 norm_block(int64_t rows, int64_t nvec) {
  const int cap = rows >= 256 ? 256 : 1024;
  return dim3(std::max(32, std::min(cap, round_up_warp(nvec))));
}

Tensor rms_norm_cuda(Tensor input, Tensor weight, double epsilon) {
  const char* op = "rms_norm";
  check_norm_args(input, weight, epsilon, op);
  STD_TORCH_CHECK(input.is_cuda(), op, ": expected CUDA tensors");
  torch::stable::accelerator::DeviceGuard guard(input.get_device_index());
  const Tensor x = torch::stable::contiguous(input);
  const Tensor w = torch::stable::contiguous(weight);
  Tensor out = torch::stable::new_empty(x, sizes_of(x));
  const int64_t d = x.size(x.dim() - 1);
  const int64_t rows = rows_of(x);
  if (rows == 0 || d == 0) return out;
  STD_TORCH_CHECK(rows < (int64_t{1} << 31), op, ": too many rows (", rows, ")");
  const cudaStream_t stream = current_stream(input.get_device_index());
  const float eps = static_cast<float>(epsilon);
  WFK_DISPATCH_FLOAT_TYPES(x.scalar_type(), op, [&] {
    using T = typename CudaType<scalar_t>::type;
    T* o = static_cast<T*>(out.mutable_data_ptr());
    const T* in = static_cast<const T*>(x.const_data_ptr());
    const T* wp = static_cast<const T*>(w.const_data_ptr());
    const int n = vec_width<T>(d, {o, in, wp});
    const dim3 grid(static_cast<unsigned>(rows));
    const dim3 block = norm_block(rows, d / n);
    if (n == 1) {
      rms_norm_kernel<T, 1><<<grid, block, 0, stream>>>(o, in, wp, d, eps);
    } else {
      rms_norm_kernel<T, 16 / sizeof(T)><<<grid, block, 0, stream>>>(o, in, wp, d, eps);
    }
  });
  check_launch(op);
  return out;
}

void fused_add_rms_norm_cuda(Tensor input, Tensor residual, Tensor weight, double epsilon) {
  const char* op = "fused_add_rms_norm";
  check_norm_args(input, weight, epsilon, op);
  check_input(residual, op, "residual");
  check_same(input, residual, op, "input and residual");
  STD_TORCH_CHECK(input.is_cuda(), op, ": expected CUDA tensors");
  STD_TORCH_CHECK(sizes_of(input) == sizes_of(residual), op,
                  ": input and residual must have the same shape");
  STD_TORCH_CHECK(input.is_contiguous() && residual.is_contiguous(), op,
                  ": input and residual must be contiguous");
  torch::stable::accelerator::DeviceGuard guard(input.get_device_index());
  const Tensor w = torch::stable::contiguous(weight);
  const int64_t d = input.size(input.dim() - 1);
  const int64_t rows = rows_of(input);
  if (rows == 0 || d == 0) return;
  STD_TORCH_CHECK(rows < (int64_t{1} << 31), op, ": too many rows (", rows, ")");
  const cudaStream_t stream = current_stream(input.get_device_index());
  const float eps = static_cast<float>(epsilon);
  WFK_DISPATCH_FLOAT_TYPES(input.scalar_type(), op, [&] {
    using T = typename CudaType<scalar_t>::type;
    T* x = static_cast<T*>(input.mutable_data_ptr());
    T* r = static_cast<T*>(residual.mutable_data_ptr());
    const T* wp = static_cast<const T*>(w.const_data_ptr());
    const int n = vec_width<T>(d, {x, r, wp});
    const dim3 grid(static_cast<unsigned>(rows));
    const dim3 block = norm_block(rows, d / n);
    if (n == 1) {
      fused_add_rms_norm_kernel<T, 1><<<grid, block, 0, stream>>>(x, r, wp, d, eps);
    } else {
      fused_add_rms_norm_kernel<T, 16 / sizeof(T)><<<grid, block, 0, stream>>>(x, r, wp, d, eps);
    }
  });
  check_launch(op);
}

}  // namespace
}  // namespace wfk

STABLE_TORCH_LIBRARY_IMPL(wheelforge_kernels, CUDA, m) {
  m.impl("rms_norm", TORCH_BOX(&wfk::rms_norm_cuda));
  m.impl("fused_add_rms_norm", TORCH_BOX(&wfk::fused_add_rms_norm_cuda));
}
