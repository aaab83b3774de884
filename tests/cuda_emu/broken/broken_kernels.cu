// A table of small broken CUDA programs, each with its correct twin, written as a user writes
// them (runtime API, <<<>>>, __shared__), in the bug families NVIDIA's compute-sanitizer covers.
// `broken_kernels CASE` runs the bug, `broken_kernels CASE_twin` its fixed twin. A case either
// trips one of the emulated GPU's checks (a sanitizer report, a device fault, the watchdog) or
// computes a wrong answer that the program checks and exits 1 for; a twin exits 0, silent.
// The table, what catches each case and the ctest names: docs/emulator_checks.md; the
// registration: CMakeLists.txt next to this file.

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(call)                                                                        \
  do {                                                                                     \
    const cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, \
                   __LINE__, cudaGetErrorString(e_));                                      \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

int wrong_answer(const char* kernel, const char* what) {
  std::fprintf(stderr, "WRONG ANSWER from %s: %s\n", kernel, what);
  return 1;
}

// ---------------------------------------------------------------- memcheck

__global__ void oob_global_read_kernel(float* out, const float* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + in[i + 1];  // bug: thread n-1 reads in[n]
}
__global__ void oob_global_read_twin_kernel(float* out, const float* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + (i + 1 < n ? in[i + 1] : 0.f);
}

int oob_global_read(bool twin) {
  const int n = 100;
  std::vector<float> h(n, 1.f);
  float *in, *out;
  CHECK(cudaMalloc((void**)&in, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, n * sizeof(float)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  if (twin)
    oob_global_read_twin_kernel<<<1, 128>>>(out, in, n);
  else
    oob_global_read_kernel<<<1, 128>>>(out, in, n);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return h[n - 1] == 1.f && h[0] == 2.f ? 0 : wrong_answer("oob_global_read_kernel", "sum");
}

__global__ void oob_global_write_kernel(int* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i <= n) out[i] = i;  // bug: `<=` writes out[n]
}
__global__ void oob_global_write_twin_kernel(int* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = i;
}

int oob_global_write(bool twin) {
  const int n = 64;
  int* out;
  CHECK(cudaMalloc((void**)&out, n * sizeof(int)));
  if (twin)
    oob_global_write_twin_kernel<<<1, 128>>>(out, n);
  else
    oob_global_write_kernel<<<1, 128>>>(out, n);
  CHECK(cudaDeviceSynchronize());
  std::vector<int> h(n);
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(out));
  return h[n - 1] == n - 1 ? 0 : wrong_answer("oob_global_write_kernel", "values");
}

// n is not a multiple of the block size, and the kernel has no bounds check: the last block's
// extra threads write past the end.
__global__ void last_block_kernel(float* y, const float* x, float a, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  y[i] = a * x[i] + y[i];  // bug: no `if (i < n)`
  (void)n;
}
__global__ void last_block_twin_kernel(float* y, const float* x, float a, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

int last_block(bool twin) {
  const int n = 1000, block = 256, grid = (n + block - 1) / block;
  std::vector<float> hx(n, 1.f), hy(n, 2.f);
  float *x, *y;
  CHECK(cudaMalloc((void**)&x, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&y, n * sizeof(float)));
  CHECK(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(y, hy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  if (twin)
    last_block_twin_kernel<<<grid, block>>>(y, x, 3.f, n);
  else
    last_block_kernel<<<grid, block>>>(y, x, 3.f, n);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(hy.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  for (float v : hy)
    if (v != 5.f) return wrong_answer("last_block_kernel", "saxpy");
  return 0;
}

// A block-wide tile of 128 floats, indexed by a thread's position plus a halo of one.
__global__ void shared_oob_kernel(float* out, const float* in) {
  __shared__ float tile[128];
  tile[threadIdx.x + 1] = in[threadIdx.x];  // bug: thread 127 writes tile[128]
  if (threadIdx.x == 0) tile[0] = 0.f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}
__global__ void shared_oob_twin_kernel(float* out, const float* in) {
  __shared__ float tile[129];
  tile[threadIdx.x + 1] = in[threadIdx.x];
  if (threadIdx.x == 0) tile[0] = 0.f;
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

int shared_oob(bool twin) {
  const int n = 128;
  std::vector<float> h(n, 1.f);
  float *in, *out;
  CHECK(cudaMalloc((void**)&in, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, n * sizeof(float)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  if (twin)
    shared_oob_twin_kernel<<<1, n>>>(out, in);
  else
    shared_oob_kernel<<<1, n>>>(out, in);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return h[0] == 0.f && h[n - 1] == 1.f ? 0 : wrong_answer("shared_oob_kernel", "shift");
}

__global__ void fill_kernel(float* p, float v, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) p[i] = v;
}

int use_after_free(bool twin) {
  const int n = 256;
  float* p;
  CHECK(cudaMalloc((void**)&p, n * sizeof(float)));
  if (!twin) CHECK(cudaFree(p));  // bug: freed before the kernel that uses it
  fill_kernel<<<1, n>>>(p, 1.f, n);
  CHECK(cudaDeviceSynchronize());
  if (twin) CHECK(cudaFree(p));
  return 0;
}

int double_free(bool twin) {
  float* p;
  CHECK(cudaMalloc((void**)&p, 1024));
  fill_kernel<<<1, 256>>>(p, 1.f, 256);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(p));
  if (!twin) CHECK(cudaFree(p));  // bug: freed twice
  return 0;
}

// A vectorised sum that loads four floats at a time from an offset that is not a multiple of 4.
__global__ void misaligned_float4_kernel(float* out, const float* in, int offset) {
  const float4 v = reinterpret_cast<const float4*>(in + offset)[threadIdx.x];
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

int misaligned_float4(bool twin) {
  const int n = 260;
  std::vector<float> h(n, 1.f);
  float *in, *out;
  CHECK(cudaMalloc((void**)&in, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, 64 * sizeof(float)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  misaligned_float4_kernel<<<1, 64>>>(out, in, twin ? 4 : 1);  // bug: offset 1 (4 bytes)
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), out, 64 * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return h[63] == 4.f ? 0 : wrong_answer("misaligned_float4_kernel", "sum");
}

int memcpy_past_end(bool twin) {
  const int n = 100;
  std::vector<float> h(n + 1, 1.f);
  float* d;
  CHECK(cudaMalloc((void**)&d, n * sizeof(float)));
  // bug: copies n + 1 floats (the host vector's size) into an allocation of n
  CHECK(cudaMemcpy(d, h.data(), (twin ? n : h.size()) * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaFree(d));
  return 0;
}

// A 16-bit index: fine for the first 32768 elements, then it wraps to -32768 and the thread
// writes 128 KiB before the allocation.
__global__ void index16_wrap_kernel(float* out, int n) {
  const short i = short(blockIdx.x * blockDim.x + threadIdx.x);  // bug: 16 bits
  if (i < n) out[i] = 1.f;
}
__global__ void index16_wrap_twin_kernel(float* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 1.f;
}

int index16_wrap(bool twin) {
  const int n = 40000, block = 256, grid = (n + block - 1) / block;
  // The wrapped indices (-32768 and up) land in 32768 floats of the same allocation before `out`:
  // memory the program owns, so the bug shows as a wrong answer every time. Landing in memory
  // nobody owns (128 KiB before a bare allocation) it corrupted the AddressSanitizer allocator's
  // own data in about one run in eight, and the program then crashed elsewhere.
  const int front = 32768;
  float* base;
  CHECK(cudaMalloc((void**)&base, (front + n) * sizeof(float)));
  float* out = base + front;
  if (twin)
    index16_wrap_twin_kernel<<<grid, block>>>(out, n);
  else
    index16_wrap_kernel<<<grid, block>>>(out, n);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> h(n);
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(base));
  for (float v : h)
    if (v != 1.f) return wrong_answer("index16_wrap_kernel", "fill");
  return 0;
}

// A 1-D stencil with an unsigned 32-bit index: at i = 0, `i - 1` wraps to 4294967295, and the
// read lands 16 GiB past the allocation.
__global__ void index32_wrap_kernel(float* out, const float* in, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i - 1] + in[i];  // bug: i - 1 wraps at i = 0
}
__global__ void index32_wrap_twin_kernel(float* out, const float* in, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (i > 0 ? in[i - 1] : 0.f) + in[i];
}

int index32_wrap(bool twin) {
  const unsigned n = 256;
  std::vector<float> h(n, 1.f);
  float *in, *out;
  CHECK(cudaMalloc((void**)&in, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, n * sizeof(float)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  if (twin)
    index32_wrap_twin_kernel<<<1, n>>>(out, in, n);
  else
    index32_wrap_kernel<<<1, n>>>(out, in, n);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return h[0] == 1.f && h[1] == 2.f ? 0 : wrong_answer("index32_wrap_kernel", "stencil");
}

// ---------------------------------------------------------------- racecheck

// Reverse a block's values through shared memory.
__global__ void missing_syncthreads_kernel(int* out, const int* in) {
  __shared__ int s[256];
  s[threadIdx.x] = in[threadIdx.x];
  // bug: no __syncthreads() between the write and the read of another thread's slot
  out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
__global__ void missing_syncthreads_twin_kernel(int* out, const int* in) {
  __shared__ int s[256];
  s[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}

int missing_syncthreads(bool twin) {
  const int n = 256;
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i;
  int *in, *out;
  CHECK(cudaMalloc((void**)&in, n * sizeof(int)));
  CHECK(cudaMalloc((void**)&out, n * sizeof(int)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  if (twin)
    missing_syncthreads_twin_kernel<<<1, n>>>(out, in);
  else
    missing_syncthreads_kernel<<<1, n>>>(out, in);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  for (int i = 0; i < n; ++i)
    if (h[i] != n - 1 - i) return wrong_answer("missing_syncthreads_kernel", "reverse");
  return 0;
}

// The last warp of a shared-memory tree reduction, unrolled without __syncwarp() between the
// steps (the pre-Volta "warp-synchronous" idiom).
__global__ void warp_reduce_kernel(int* out, const int* in) {
  __shared__ int s[64];
  const unsigned t = threadIdx.x;
  s[t] = in[t] + in[t + 32];
  __syncwarp();
  if (t < 16) s[t] += s[t + 16];  // bug: no __syncwarp() between the steps
  if (t < 8) s[t] += s[t + 8];
  if (t < 4) s[t] += s[t + 4];
  if (t < 2) s[t] += s[t + 2];
  if (t < 1) s[t] += s[t + 1];
  if (t == 0) *out = s[0];
}
__global__ void warp_reduce_twin_kernel(int* out, const int* in) {
  __shared__ int s[64];
  const unsigned t = threadIdx.x;
  s[t] = in[t] + in[t + 32];
  __syncwarp();
  for (int offset = 16; offset > 0; offset /= 2) {
    const int v = t < unsigned(offset) ? s[t + offset] : 0;
    __syncwarp();
    if (t < unsigned(offset)) s[t] += v;
    __syncwarp();
  }
  if (t == 0) *out = s[0];
}

int warp_reduce(bool twin) {
  std::vector<int> h(64);
  for (int i = 0; i < 64; ++i) h[i] = i;
  int *in, *out;
  CHECK(cudaMalloc((void**)&in, 64 * sizeof(int)));
  CHECK(cudaMalloc((void**)&out, sizeof(int)));
  CHECK(cudaMemcpy(in, h.data(), 64 * sizeof(int), cudaMemcpyHostToDevice));
  if (twin)
    warp_reduce_twin_kernel<<<1, 32>>>(out, in);
  else
    warp_reduce_kernel<<<1, 32>>>(out, in);
  CHECK(cudaDeviceSynchronize());
  int sum = 0;
  CHECK(cudaMemcpy(&sum, out, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return sum == 64 * 63 / 2 ? 0 : wrong_answer("warp_reduce_kernel", "sum");
}

// Every thread adds its value to one global total.
__global__ void cross_block_sum_kernel(int* total, const int* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) *total += in[i];  // bug: not atomicAdd
}
__global__ void cross_block_sum_twin_kernel(int* total, const int* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(total, in[i]);
}

int cross_block_sum(bool twin) {
  const int n = 1 << 12, block = 256;
  std::vector<int> h(n, 1);
  int *in, *total;
  CHECK(cudaMalloc((void**)&in, n * sizeof(int)));
  CHECK(cudaMalloc((void**)&total, sizeof(int)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(total, 0, sizeof(int)));
  if (twin)
    cross_block_sum_twin_kernel<<<n / block, block>>>(total, in, n);
  else
    cross_block_sum_kernel<<<n / block, block>>>(total, in, n);
  CHECK(cudaDeviceSynchronize());
  int sum = 0;
  CHECK(cudaMemcpy(&sum, total, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(total));
  return sum == n ? 0 : wrong_answer("cross_block_sum_kernel", "total");
}

// A 16-bin histogram per block in shared memory, merged into the global one.
__global__ void shared_histogram_kernel(int* hist, const int* in, int n) {
  __shared__ int bins[16];
  if (threadIdx.x < 16) bins[threadIdx.x] = 0;
  __syncthreads();
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) bins[in[i] & 15]++;  // bug: not atomicAdd(&bins[...], 1)
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&hist[threadIdx.x], bins[threadIdx.x]);
}
__global__ void shared_histogram_twin_kernel(int* hist, const int* in, int n) {
  __shared__ int bins[16];
  if (threadIdx.x < 16) bins[threadIdx.x] = 0;
  __syncthreads();
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(&bins[in[i] & 15], 1);
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&hist[threadIdx.x], bins[threadIdx.x]);
}

int shared_histogram(bool twin) {
  const int n = 4096, block = 256;
  std::vector<int> h(n);
  for (int i = 0; i < n; ++i) h[i] = i;
  int *in, *hist;
  CHECK(cudaMalloc((void**)&in, n * sizeof(int)));
  CHECK(cudaMalloc((void**)&hist, 16 * sizeof(int)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(hist, 0, 16 * sizeof(int)));
  if (twin)
    shared_histogram_twin_kernel<<<n / block, block>>>(hist, in, n);
  else
    shared_histogram_kernel<<<n / block, block>>>(hist, in, n);
  CHECK(cudaDeviceSynchronize());
  std::vector<int> bins(16);
  CHECK(cudaMemcpy(bins.data(), hist, 16 * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(hist));
  for (int b : bins)
    if (b != n / 16) return wrong_answer("shared_histogram_kernel", "bins");
  return 0;
}

__global__ void scale_kernel(float* dst, const float* src, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) dst[i] = 2.f * src[i];
}

// A pipeline: the copy stream uploads the input and moves it into a staging buffer; the
// compute stream scales what is staged. Only an event orders the two streams.
int cross_stream(bool twin) {
  const int n = 1024;
  std::vector<float> h(n, 1.f);
  float *src, *staged, *out;
  CHECK(cudaMalloc((void**)&src, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&staged, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, n * sizeof(float)));
  CHECK(cudaMemset(staged, 0, n * sizeof(float)));
  CHECK(cudaDeviceSynchronize());
  cudaStream_t copy, compute;
  cudaEvent_t copied;
  CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
  CHECK(cudaMemcpyAsync(src, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, copy));
  CHECK(cudaMemcpyAsync(staged, src, n * sizeof(float), cudaMemcpyDeviceToDevice, copy));
  CHECK(cudaEventRecord(copied, copy));
  if (twin) CHECK(cudaStreamWaitEvent(compute, copied, 0));  // bug: the broken one has no wait
  scale_kernel<<<n / 256, 256, 0, compute>>>(out, staged, n);
  CHECK(cudaStreamSynchronize(compute));
  CHECK(cudaStreamSynchronize(copy));
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaEventDestroy(copied));
  CHECK(cudaStreamDestroy(copy));
  CHECK(cudaStreamDestroy(compute));
  CHECK(cudaFree(src));
  CHECK(cudaFree(staged));
  CHECK(cudaFree(out));
  for (float v : h)
    if (v != 2.f) return wrong_answer("scale_kernel", "read the staging buffer before the copy");
  return 0;
}

// ---------------------------------------------------------------- synccheck

// Only the threads with work meet at the barrier.
__global__ void divergent_barrier_kernel(float* out, const float* in, int n) {
  __shared__ float tile[64];
  const int i = int(threadIdx.x);
  if (i < n) {
    tile[i] = in[i];
    __syncthreads();  // bug: threads i >= n never get here
    out[i] = tile[n - 1 - i];
  }
}
__global__ void divergent_barrier_twin_kernel(float* out, const float* in, int n) {
  __shared__ float tile[64];
  const int i = int(threadIdx.x);
  if (i < n) tile[i] = in[i];
  __syncthreads();
  if (i < n) out[i] = tile[n - 1 - i];
}

int divergent_barrier(bool twin) {
  const int n = 48;
  std::vector<float> h(64, 1.f);
  float *in, *out;
  CHECK(cudaMalloc((void**)&in, 64 * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, 64 * sizeof(float)));
  CHECK(cudaMemcpy(in, h.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
  if (twin)
    divergent_barrier_twin_kernel<<<1, 64>>>(out, in, n);
  else
    divergent_barrier_kernel<<<1, 64>>>(out, in, n);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return 0;
}

// Even and odd warps take different paths, each with its own barrier.
__global__ void if_else_barriers_kernel(int* out) {
  __shared__ int s[64];
  const int t = int(threadIdx.x);
  if ((t / 32) % 2 == 0) {
    s[t] = t;
    __syncthreads();  // bug: a different barrier from the else branch's
    out[t] = s[63 - t];
  } else {
    s[t] = -t;
    __syncthreads();
    out[t] = s[63 - t];
  }
}
__global__ void if_else_barriers_twin_kernel(int* out) {
  __shared__ int s[64];
  const int t = int(threadIdx.x);
  s[t] = (t / 32) % 2 == 0 ? t : -t;
  __syncthreads();
  out[t] = s[63 - t];
}

int if_else_barriers(bool twin) {
  int* out;
  CHECK(cudaMalloc((void**)&out, 64 * sizeof(int)));
  if (twin)
    if_else_barriers_twin_kernel<<<1, 64>>>(out);
  else
    if_else_barriers_kernel<<<1, 64>>>(out);
  CHECK(cudaDeviceSynchronize());
  std::vector<int> h(64);
  CHECK(cudaMemcpy(h.data(), out, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(out));
  return h[0] == -63 && h[63] == 0 ? 0 : wrong_answer("if_else_barriers_kernel", "values");
}

// A warp sum over n < 32 values: the lanes past n return early, but the shuffle's mask still
// names all 32.
__global__ void shfl_exited_lane_kernel(int* out, const int* in, int n) {
  const int lane = int(threadIdx.x);
  if (lane >= n) return;
  int v = in[lane];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);  // bug: lanes >= n have exited
  if (lane == 0) *out = v;
}
__global__ void shfl_exited_lane_twin_kernel(int* out, const int* in, int n) {
  const int lane = int(threadIdx.x);
  int v = lane < n ? in[lane] : 0;  // every lane stays for the shuffles
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) *out = v;
}

int shfl_exited_lane(bool twin) {
  const int n = 20;
  std::vector<int> h(32, 1);
  int *in, *out;
  CHECK(cudaMalloc((void**)&in, 32 * sizeof(int)));
  CHECK(cudaMalloc((void**)&out, sizeof(int)));
  CHECK(cudaMemcpy(in, h.data(), 32 * sizeof(int), cudaMemcpyHostToDevice));
  if (twin)
    shfl_exited_lane_twin_kernel<<<1, 32>>>(out, in, n);
  else
    shfl_exited_lane_kernel<<<1, 32>>>(out, in, n);
  CHECK(cudaDeviceSynchronize());
  int sum = 0;
  CHECK(cudaMemcpy(&sum, out, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  return sum == n ? 0 : wrong_answer("shfl_exited_lane_kernel", "sum");
}

// ---------------------------------------------------------------- initcheck

// Accumulates into an output the program never cleared.
__global__ void accumulate_kernel(float* acc, const float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) acc[i] += x[i];  // bug when acc was never written: reads uninitialised memory
}

int uninitialised_read(bool twin) {
  const int n = 256;
  std::vector<float> h(n, 1.f);
  float *x, *acc;
  CHECK(cudaMalloc((void**)&x, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&acc, n * sizeof(float)));
  CHECK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  if (twin) CHECK(cudaMemset(acc, 0, n * sizeof(float)));  // bug: the broken one has no memset
  accumulate_kernel<<<1, n>>>(acc, x, n);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), acc, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(x));
  CHECK(cudaFree(acc));
  for (float v : h)
    if (v != 1.f) return wrong_answer("accumulate_kernel", "accumulated into uncleared memory");
  return 0;
}

// Per-block partial sums into a buffer cleared with cudaMemset(p, 0, blocks): a count of bytes
// where it needs blocks * sizeof(float), so only the first partial sum starts from zero.
__global__ void partial_sums_kernel(float* partial, const float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(&partial[blockIdx.x], x[i]);  // reads partial[b] for b >= 1 uncleared
}

int memset_too_short(bool twin) {
  const int n = 1024, block = 128, blocks = n / block;
  std::vector<float> h(n, 1.f);
  float *x, *partial;
  CHECK(cudaMalloc((void**)&x, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&partial, blocks * sizeof(float)));
  CHECK(cudaMemcpy(x, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(partial, 0, twin ? blocks * sizeof(float) : blocks));  // bug: bytes, not floats
  partial_sums_kernel<<<blocks, block>>>(partial, x, n);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> sums(blocks);
  CHECK(cudaMemcpy(sums.data(), partial, blocks * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(x));
  CHECK(cudaFree(partial));
  for (float v : sums)
    if (v != float(block)) return wrong_answer("partial_sums_kernel", "partial sums");
  return 0;
}

// A grid sized n / block, rounded down: the last n % block elements are never written, and the
// copy back to the host reads them.
__global__ void square_kernel(float* out, const float* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * in[i];
}

int grid_rounds_down(bool twin) {
  const int n = 1000, block = 256;
  const int grid = twin ? (n + block - 1) / block : n / block;  // bug: 3 blocks cover 768
  std::vector<float> h(n, 3.f);
  float *in, *out;
  CHECK(cudaMalloc((void**)&in, n * sizeof(float)));
  CHECK(cudaMalloc((void**)&out, n * sizeof(float)));
  CHECK(cudaMemcpy(in, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  square_kernel<<<grid, block>>>(out, in, n);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));
  for (float v : h)
    if (v != 9.f) return wrong_answer("square_kernel", "squares");
  return 0;
}

// ---------------------------------------------------------------- hangs

// Each block waits for the other's flag before raising its own: a deadlock on any GPU.
__global__ void blocks_spin_kernel(int* flags) {
  if (threadIdx.x != 0) return;
  const int me = int(blockIdx.x), other = 1 - me;
  while (atomicAdd(&flags[other], 0) == 0) {  // bug: both blocks wait first
  }
  atomicExch(&flags[me], 1);
}
// Block 1 waits for block 0, which waits for no one (both blocks are resident at once).
__global__ void blocks_spin_twin_kernel(int* flags) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 1) {
    while (atomicAdd(&flags[0], 0) == 0) {
    }
  }
  atomicExch(&flags[blockIdx.x], 1);
}

int blocks_spin(bool twin) {
  int* flags;
  CHECK(cudaMalloc((void**)&flags, 2 * sizeof(int)));
  CHECK(cudaMemset(flags, 0, 2 * sizeof(int)));
  if (twin)
    blocks_spin_twin_kernel<<<2, 32>>>(flags);
  else
    blocks_spin_kernel<<<2, 32>>>(flags);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaFree(flags));
  return 0;
}

struct Case {
  const char* name;
  int (*run)(bool twin);
};

const Case kCases[] = {
    {"oob_global_read", oob_global_read},
    {"oob_global_write", oob_global_write},
    {"last_block", last_block},
    {"shared_oob", shared_oob},
    {"use_after_free", use_after_free},
    {"double_free", double_free},
    {"misaligned_float4", misaligned_float4},
    {"memcpy_past_end", memcpy_past_end},
    {"index16_wrap", index16_wrap},
    {"index32_wrap", index32_wrap},
    {"missing_syncthreads", missing_syncthreads},
    {"warp_reduce", warp_reduce},
    {"cross_block_sum", cross_block_sum},
    {"shared_histogram", shared_histogram},
    {"cross_stream", cross_stream},
    {"divergent_barrier", divergent_barrier},
    {"if_else_barriers", if_else_barriers},
    {"shfl_exited_lane", shfl_exited_lane},
    {"uninitialised_read", uninitialised_read},
    {"memset_too_short", memset_too_short},
    {"grid_rounds_down", grid_rounds_down},
    {"blocks_spin", blocks_spin},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2) {
    const std::size_t len = std::strlen(argv[1]);
    const bool twin = len > 5 && std::strcmp(argv[1] + len - 5, "_twin") == 0;
    const std::string name(argv[1], twin ? len - 5 : len);
    for (const Case& c : kCases)
      if (name == c.name) return c.run(twin);
  }
  std::fprintf(stderr, "usage: %s CASE[_twin]; cases:", argv[0]);
  for (const Case& c : kCases) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, "\n");
  return 2;
}
