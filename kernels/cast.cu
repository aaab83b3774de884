// Cast on the GPU: a grid-stride loop, one conversion per element, with the CPU loop's
// conversion (kernels/convert.h), so both devices give the same bits. Memory-bound: 6 to 12 bytes
// moved per element, at the device's bandwidth.

#include <vector>

#include "kernels/cast.h"
#include "kernels/cast_multi.h"
#include "kernels/cast_pairs.h"
#include "kernels/convert.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/multi_tensor_apply.cuh"

namespace minitrain {

template <typename To, typename From>
__global__ void cast_kernel(To* out, const From* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = convert<To>(in[i]);
}

template <typename To, typename From>
void cast_cuda(To* out, const From* in, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  cast_kernel<To, From><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, in, n);
  CHECK_CUDA_LAUNCH();
}
#define MT_INSTANTIATE_CAST_CUDA(To, From) \
  template void cast_cuda<To, From>(To*, const From*, int64_t, CUstream_st*);
MT_CAST_PAIRS(MT_INSTANTIATE_CAST_CUDA)

template <typename T>
__global__ void round_to_precision_kernel(float* out, const float* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = round_to<T>(in[i]);
}

template <typename T>
void round_to_precision_cuda(float* out, const float* in, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  round_to_precision_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, in, n);
  CHECK_CUDA_LAUNCH();
}
template void round_to_precision_cuda<BFloat16>(float*, const float*, int64_t, CUstream_st*);
template void round_to_precision_cuda<Half>(float*, const float*, int64_t, CUstream_st*);

// ---- the multi-tensor cast ----

// Each launch's tensors' RoundedInto, by position in the launch (a second kernel argument beside
// the table: 3136 + 64 bytes, under the 4 KiB limit).
struct RoundedIntoTable {
  RoundedInto how[TensorListArgs<2>::kMaxTensors];
};

// Block b rounds chunk block_chunk[b] of its tensor: operand 0 the output, 1 the input.
template <typename T>
__global__ void round_to_precision_multi_kernel(TensorListArgs<2> args, RoundedIntoTable table) {
  const ChunkOf<2> chunk(args);
  const RoundedInto how = table.how[args.block_tensor[blockIdx.x]];
  const float* in = chunk.template ptr<float>(1);
  if (how == RoundedInto::Narrow) {  // a tensor's blocks all take one branch
    T* out = chunk.template ptr<T>(0);
    for (int64_t i = threadIdx.x; i < chunk.len; i += blockDim.x) out[i] = narrow<T>(in[i]);
    return;
  }
  float* out = chunk.template ptr<float>(0);
  for (int64_t i = threadIdx.x; i < chunk.len; i += blockDim.x)
    out[i] = rounded_into<T>(out + i, in[i], how);
}

template <typename T>
void round_to_precision_multi_cuda(const std::vector<void*>& outs,
                                   const std::vector<const float*>& ins,
                                   const std::vector<int64_t>& sizes,
                                   const std::vector<RoundedInto>& how, CUstream_st* stream) {
  constexpr int kMax = TensorListArgs<2>::kMaxTensors;
  for (const MultiTensorLaunch& l :
       plan_multi_tensor_launches(sizes, kMax, kMultiTensorMaxBlocks, kMultiTensorChunk)) {
    TensorListArgs<2> args{};
    RoundedIntoTable table{};
    for (std::size_t t = 0; t < l.tensors.size(); ++t) {
      const auto k = static_cast<std::size_t>(l.tensors[t]);
      args.ptrs[0][t] = outs[k];
      args.ptrs[1][t] = const_cast<float*>(ins[k]);
      args.sizes[t] = sizes[k];
      table.how[t] = how[k];
    }
    for (std::size_t b = 0; b < l.block_tensor.size(); ++b) {
      args.block_tensor[b] = static_cast<uint8_t>(l.block_tensor[b]);
      args.block_chunk[b] = l.block_chunk[b];
    }
    round_to_precision_multi_kernel<T>
        <<<static_cast<unsigned>(l.block_tensor.size()), kBlock, 0, as_cuda(stream)>>>(args, table);
    CHECK_CUDA_LAUNCH();
  }
}
template void round_to_precision_multi_cuda<BFloat16>(const std::vector<void*>&,
                                                      const std::vector<const float*>&,
                                                      const std::vector<int64_t>&,
                                                      const std::vector<RoundedInto>&,
                                                      CUstream_st*);
template void round_to_precision_multi_cuda<Half>(const std::vector<void*>&,
                                                  const std::vector<const float*>&,
                                                  const std::vector<int64_t>&,
                                                  const std::vector<RoundedInto>&, CUstream_st*);

}  // namespace minitrain
