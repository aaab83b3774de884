#pragma once
// The ladder's launchers, one per technique file in this folder. Each runs C = alpha * op(A) op(B)
// + beta * C for m, n >= 1, k >= 0 on `stream` and the current CUDA device; the registry entries
// in gemm_ladder.cu validate arguments and pick the device and stream.

#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

struct CUstream_st;

namespace minitrain::gemm_ladder {

void gemm_naive_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_coalesced_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_smem_tiled_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_blocktile_1d_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_blocktile_2d_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_vectorized_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_warptile_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_tc_tf32_cuda(const GemmArgs& g, CUstream_st* stream);
void gemm_tc_bf16_cuda(const GemmArgs& g, CUstream_st* stream);

}  // namespace minitrain::gemm_ladder
