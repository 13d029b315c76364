// CUDA implementations of silu_and_mul, gelu_and_mul and gelu_tanh_and_mul.
// One block per row; 16-byte loads and stores where the row length and alignment allow.
#include "activation.h"
#include "cuda_utils.cuh"

namespace wfk {
namespace {

struct Silu {
  __device__ __forceinline__ static float apply(float x) { return x / (1.0f + __expf(-x)); }
};
struct Gelu {
  __device__ __forceinline__ static float apply(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  }
};
struct GeluTanh {
  __device__ __forceinline__ static float apply(float x) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
  }
};

template <typename Act, typename T, int N>
__global__ void act_and_mul_kernel(T* __restrict__ out, const T* __restrict__ in, int64_t d) {
  const int64_t row = blockIdx.x;
  const T* a = in + row * 2 * d;
  const T* b = a + d;
  T* y = out + row * d;
  using V = Vec<T, N>;
  const int64_t nvec = d / N;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const V va = reinterpret_cast<const V*>(a)[i];
    const V vb = reinterpret_cast<const V*>(b)[i];
    V vy;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      vy.v[k] = from_float<T>(Act::apply(to_float(va.v[k])) * to_float(vb.v[k]));
    }
    reinterpret_cast<V*>(y)[i] = vy;
  }
}

template <typename Act, typename T>
void launch(T* out, const T* in, int64_t rows, int64_t d, cudaStream_t stream) {
  const int n = vec_width<T>(d, {out, in, in + d});
  const int64_t nvec = d / n;
  const dim3 block(std::min(1024, round_up_warp(nvec)));
  const dim3 grid(static_cast<unsigned>(rows));
  if (n == 1) {
    act_and_mul_kernel<Act, T, 1><<<grid, block, 0, stream>>>(out, in, d);
  } else {
    act_and_mul_kernel<Act, T, 16 / sizeof(T)><<<grid, block, 0, stream>>>(out, in, d);
  }
}

template <typename Act>
Tensor act_and_mul_cuda(Tensor input, const char* op) {
  STD_TORCH_CHECK(input.is_cuda(), op, ": expected a CUDA tensor");
  torch::stable::accelerator::DeviceGuard guard(input.get_device_index());
  Tensor out = act_and_mul_output(input, op);
  const Tensor x = torch::stable::contiguous(input);
  const int64_t d = out.size(out.dim() - 1);
  const int64_t rows = rows_of(out);
  if (rows == 0 || d == 0) return out;
  STD_TORCH_CHECK(rows < (int64_t{1} << 31), op, ": too many rows (", rows, ")");
  const cudaStream_t stream = current_stream(input.get_device_index());
  WFK_DISPATCH_FLOAT_TYPES(x.scalar_type(), op, [&] {
    using T = typename CudaType<scalar_t>::type;
    launch<Act, T>(static_cast<T*>(out.mutable_data_ptr()),
                   static_cast<const T*>(x.const_data_ptr()), rows, d, stream);
  });
  check_launch(op);
  return out;
}

Tensor silu_and_mul_cuda(Tensor input) { return act_and_mul_cuda<Silu>(input, "silu_and_mul"); }
Tensor gelu_and_mul_cuda(Tensor input) { return act_and_mul_cuda<Gelu>(input, "gelu_and_mul"); }
Tensor gelu_tanh_and_mul_cuda(Tensor input) {
  return act_and_mul_cuda<GeluTanh>(input, "gelu_tanh_and_mul");
}

}  // namespace
}  // namespace wfk

STABLE_TORCH_LIBRARY_IMPL(wheelforge_kernels, CUDA, m) {
  m.impl("silu_and_mul", TORCH_BOX(&wfk::silu_and_mul_cuda));
  m.impl("gelu_and_mul", TORCH_BOX(&wfk::gelu_and_mul_cuda));
  m.impl("gelu_tanh_and_mul", TORCH_BOX(&wfk::gelu_tanh_and_mul_cuda));
}
