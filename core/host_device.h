#pragma once
// MT_HOST_DEVICE marks per-element math that the CPU loops and the CUDA kernels share, so the
// math is tested on machines without a GPU.
#if defined(__CUDACC__)
#define MT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define MT_HOST_DEVICE inline
#endif
