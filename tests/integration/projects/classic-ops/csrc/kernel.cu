// ATen/cuda/CUDAContext.h includes cusparse.h and cublas_v2.h: with pip's CUDA torch they lie
// in its environment's nvidia/ folders, not in a toolkit that only compiles.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

__global__ void add_one_kernel(const float* in, float* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1.0f;
}

at::Tensor add_one_cuda(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "add_one: float32 only");
  const c10::cuda::CUDAGuard guard(x.device());
  auto in = x.contiguous();
  auto out = at::empty_like(in);
  int64_t n = in.numel();
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads);
  add_one_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      in.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

int cuda_runtime_version() { return CUDART_VERSION; }
