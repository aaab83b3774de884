// A standalone CUDA program (no minitrain headers) for scripts/emucc.sh's test (emucc_test.sh):
// 100 floats doubled by one block of 128 threads, 3 full warps and one of 4 lanes.
#include <cstdio>
__global__ void twice(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.f * in[i];
}
int main() {
  const int n = 100;
  float *in, *out;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  cudaMemset(in, 0, n * sizeof(float));
  twice<<<1, 128>>>(in, out, n);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s\n", cudaGetErrorString(e));
  cudaFree(in);
  cudaFree(out);
  return e == cudaSuccess ? 0 : 1;
}
