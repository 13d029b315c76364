/* An op library built with CUDA 12's runtime: DT_NEEDED libcudart.so.12, cudaGetDeviceCount
   from it (build.sh links a stand-in libcudart.so.12). */
int cudaGetDeviceCount(int *count);
int devices(void) { int n = 0; return cudaGetDeviceCount(&n) == 0 ? n : -1; }
