// A second translation unit, so a shared object carries two fatbin containers.
__global__ void scale(float* x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

extern "C" void launch_scale(float* x, float s, int n) { scale<<<(n + 255) / 256, 256>>>(x, s, n); }
