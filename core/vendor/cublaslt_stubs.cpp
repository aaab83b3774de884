// cuBLASLt functions minitrain calls, forwarded to libcublasLt opened on first use (Note [vendor
// stubs] in core/vendor/vendor_library.h).

#include <cublasLt.h>

#include "core/vendor/forward.h"

MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmul,
                  (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                   const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                   cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                   cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                   const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream),
                  (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
                   workspace, workspace_bytes, stream))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,
                  (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                   cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                   cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference,
                   int requested, cublasLtMatmulHeuristicResult_t results[], int* returned),
                  (handle, desc, Adesc, Bdesc, Cdesc, Ddesc, preference, requested, results,
                   returned))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulDescCreate,
                  (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                  (desc, compute, scale))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc),
                  (desc))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulDescSetAttribute,
                  (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                   size_t bytes),
                  (desc, attr, buf, bytes))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulPreferenceCreate,
                  (cublasLtMatmulPreference_t * pref), (pref))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulPreferenceDestroy,
                  (cublasLtMatmulPreference_t pref), (pref))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,
                  (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                   const void* buf, size_t bytes),
                  (pref, attr, buf, bytes))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatrixLayoutCreate,
                  (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols,
                   int64_t ld),
                  (layout, type, rows, cols, ld))
MT_VENDOR_FORWARD(cublaslt, cublasStatus_t, cublasLtMatrixLayoutDestroy,
                  (cublasLtMatrixLayout_t layout), (layout))
