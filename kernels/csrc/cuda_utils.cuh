// CUDA helpers: the current stream through the stable C shim, element type mapping,
// 16-byte vector access and a block-wide sum.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <torch/csrc/stable/accelerator.h>

#include "common.h"

namespace wfk {

// aoti_torch_get_current_cuda_stream lives in libtorch_cuda, which a CPU-only torch lacks.
// wheelforge declares the CUDA-only shim functions weak (see docs/stable-abi.md), so on a
// CPU-only torch this module still loads and the pointer is null; CUDA tensors cannot exist
// there, so the CUDA ops are never dispatched.
inline cudaStream_t current_stream(int32_t device_index) {
  STD_TORCH_CHECK(&aoti_torch_get_current_cuda_stream != nullptr,
                  "this torch has no CUDA support (aoti_torch_get_current_cuda_stream is missing)");
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device_index, &stream));
  return static_cast<cudaStream_t>(stream);
}

inline void check_launch(const char* op) {
  const cudaError_t err = cudaGetLastError();
  STD_TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

// Maps the header-only torch element types to CUDA's own.
template <typename T> struct CudaType { using type = T; };
template <> struct CudaType<c10::Half> { using type = __half; };
template <> struct CudaType<c10::BFloat16> { using type = __nv_bfloat16; };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N elements moved as one 16-byte (or smaller) access.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per 16-byte access when a row of length d starting at every given pointer allows it.
template <typename T>
inline int vec_width(int64_t d, std::initializer_list<const void*> ptrs) {
  constexpr int kMax = 16 / static_cast<int>(sizeof(T));
  if (d % kMax != 0) return 1;
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 1;
  }
  return kMax;
}

// Sum over the block; every thread gets the result. blockDim.x must be a multiple of 32.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    float s = lane < warps ? partial[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) total = s;
  }
  __syncthreads();
  return total;
}

inline int round_up_warp(int64_t n) {
  return static_cast<int>(((n + 31) / 32) * 32);
}

}  // namespace wfk
