// The fully fused small MLP on the GPU: the whole forward in one launch, the whole backward in
// two. A block owns a tile of kRows batch rows and carries it through EVERY layer: the tile's
// activations stay in shared memory between layers (never written to be read back by another
// launch), each thread owns one output neuron with its kRows sums in registers, and the weights
// stream through shared memory in slices of kSlice rows or columns. Bound, at these widths, by
// latency (a handful of blocks per SM, short dependent loops), not by launches any more: a
// 3-layer step is 3 launches where the layer-by-layer path makes 14 or more.
//
// The weight gradients are sums over the WHOLE batch, across blocks. Without float atomics (whose
// order, hence bits, would depend on the blocks' timing) they take a second, small launch: one
// thread per weight or bias gradient element, summing its column of dz^T h over the batch rows in
// order, exactly as the layer path's naive GEMM and sum_rows do (fused_mlp_math.h).

#include "kernels/column_reduce.cuh"
#include "kernels/cuda_launch.cuh"
#include "kernels/fused_mlp/fused_mlp.h"

namespace minitrain {

static_assert(kFusedMlpBiasSlices == kRowSlices,
              "the fused bias gradient must fold the slices of sum_rows' column sum");

namespace {

constexpr int kRows = 16;                    // batch rows per block: the sums a thread keeps
constexpr int kThreads = kFusedMlpMaxWidth;  // one thread per neuron of the widest layer
constexpr int kSlice = 32;                   // weight rows (or columns) staged per pass
constexpr int kGradThreads = 256;            // the parameter-gradient kernel's block

// ---- CUDA kernels ----

// Forward: tile -> layer 0 -> ... -> last layer, activations ping-ponging between two shared
// buffers. Layer l: thread o computes z[r, o] = sum_k act[r, k] w[o, k] + b[o] for the tile's
// rows r, k in order (the naive rung's order), from slices of W^T in shared memory.
__global__ void __launch_bounds__(kThreads) fused_mlp_forward_kernel(FusedMlpArgs a) {
  __shared__ float act[2][kRows][kFusedMlpMaxWidth];
  __shared__ float wt[kSlice][kFusedMlpMaxWidth + 1];  // W^T slice; +1: no bank conflicts
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  const int rows = static_cast<int>(a.batch - row0 < kRows ? a.batch - row0 : kRows);
  const int in0 = a.width[0];
  for (int t = tid; t < kRows * in0; t += kThreads) {  // the tile of x, zero rows past the batch
    const int r = t / in0, c = t % in0;
    act[0][r][c] = r < rows ? a.x[(row0 + r) * in0 + c] : 0.f;
  }
  __syncthreads();
  int cur = 0;
  for (int l = 0; l < a.layers; ++l) {
    const int in = a.width[l], out = a.width[l + 1];
    const float* w = a.w[l];
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
    for (int k0 = 0; k0 < in; k0 += kSlice) {
      const int kc = in - k0 < kSlice ? in - k0 : kSlice;
      for (int t = tid; t < out * kc; t += kThreads) {  // consecutive threads, consecutive k
        const int o = t / kc, kk = t % kc;
        wt[kk][o] = w[int64_t(o) * in + k0 + kk];
      }
      __syncthreads();
      if (tid < out)
        for (int kk = 0; kk < kc; ++kk) {
          const float wv = wt[kk][tid];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r] += act[cur][r][k0 + kk] * wv;
        }
      __syncthreads();  // the slice is read before the next one overwrites it
    }
    if (tid < out) {
      const float bias = a.b[l] != nullptr ? a.b[l][tid] : 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float hv = 0.f;  // rows past the batch stay zero: never stored, never uninitialised
        if (r < rows) {
          const float z = a.b[l] != nullptr ? acc[r] + bias : acc[r];
          const int64_t i = (row0 + r) * out + tid;  // consecutive threads: coalesced stores
          a.z[l][i] = z;
          hv = fused_mlp_act_forward(a.act[l], z);
          if (a.h[l] != a.z[l]) a.h[l][i] = hv;
        }
        act[cur ^ 1][r][tid] = hv;
      }
    }
    __syncthreads();
    cur ^= 1;
  }
}

// Backward, step 1: the tile's dL/dz from the last layer back to the first. Layer l: thread k
// computes dh[r, k] = sum_o dz[r, o] w[o, k], o in order (the naive rung's dx = dz W), from
// slices of W's rows in shared memory, then dz of layer l - 1 = act'(z) dh. Every dz is stored
// for step 2; the first layer's dh is dL/dx.
__global__ void __launch_bounds__(kThreads) fused_mlp_input_grad_kernel(FusedMlpArgs a) {
  __shared__ float grad[2][kRows][kFusedMlpMaxWidth];
  __shared__ float ws[kSlice][kFusedMlpMaxWidth];  // W rows o0..o0+kSlice: read along k
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = int64_t(blockIdx.x) * kRows;
  const int rows = static_cast<int>(a.batch - row0 < kRows ? a.batch - row0 : kRows);
  const int last = a.layers - 1;
  const int n_last = a.width[a.layers];
  for (int t = tid; t < kRows * n_last; t += kThreads) {
    const int r = t / n_last, c = t % n_last;
    float g = 0.f;
    if (r < rows) {
      const int64_t i = (row0 + r) * n_last + c;
      g = fused_mlp_act_backward(a.act[last], a.grad_out[i], a.z[last][i]);
      a.dz[last][i] = g;
    }
    grad[0][r][c] = g;
  }
  __syncthreads();
  int cur = 0;
  for (int l = last; l >= (a.grad_x != nullptr ? 0 : 1); --l) {
    const int in = a.width[l], out = a.width[l + 1];
    const float* w = a.w[l];
    float acc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
    for (int o0 = 0; o0 < out; o0 += kSlice) {
      const int oc = out - o0 < kSlice ? out - o0 : kSlice;
      for (int t = tid; t < oc * in; t += kThreads) {  // W's rows are contiguous: coalesced
        const int oo = t / in, k = t % in;
        ws[oo][k] = w[int64_t(o0 + oo) * in + k];
      }
      __syncthreads();
      if (tid < in)
        for (int oo = 0; oo < oc; ++oo) {
          const float wv = ws[oo][tid];
#pragma unroll
          for (int r = 0; r < kRows; ++r) acc[r] += grad[cur][r][o0 + oo] * wv;
        }
      __syncthreads();
    }
    if (tid < in) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float g = 0.f;
        if (r < rows) {
          const int64_t i = (row0 + r) * in + tid;
          if (l == 0) {
            a.grad_x[i] = acc[r];
          } else {
            g = fused_mlp_act_backward(a.act[l - 1], acc[r], a.z[l - 1][i]);
            a.dz[l - 1][i] = g;
          }
        }
        grad[cur ^ 1][r][tid] = g;
      }
    }
    __syncthreads();
    cur ^= 1;
  }
}

// Backward, step 2: one thread per weight or bias gradient element of every layer. A warp's
// threads take consecutive inputs k of one neuron o: the h reads coalesce, the dz read is one
// broadcast.
__global__ void __launch_bounds__(kGradThreads) fused_mlp_param_grad_kernel(FusedMlpArgs a) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < a.grad_begin[a.layers];
       e += int64_t(gridDim.x) * blockDim.x)
    fused_mlp_param_grad(a, e);
}

unsigned row_tiles(int64_t batch) { return static_cast<unsigned>((batch + kRows - 1) / kRows); }

}  // namespace

// ---- launchers ----

void fused_mlp_forward_cuda(const FusedMlpArgs& a, CUstream_st* stream) {
  if (a.batch == 0) return;
  fused_mlp_forward_kernel<<<row_tiles(a.batch), kThreads, 0, as_cuda(stream)>>>(a);
  CHECK_CUDA_LAUNCH();
}

void fused_mlp_backward_cuda(const FusedMlpArgs& a, CUstream_st* stream) {
  if (a.batch > 0) {
    fused_mlp_input_grad_kernel<<<row_tiles(a.batch), kThreads, 0, as_cuda(stream)>>>(a);
    CHECK_CUDA_LAUNCH();
  }
  const int64_t elements = a.grad_begin[a.layers];
  if (elements == 0) return;
  fused_mlp_param_grad_kernel<<<grid_for(elements, kGradThreads), kGradThreads, 0,
                                as_cuda(stream)>>>(a);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain
