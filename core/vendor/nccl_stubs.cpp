// NCCL functions minitrain calls, forwarded to libnccl opened on first use (Note [vendor stubs] in
// core/vendor/vendor_library.h).

#include <nccl.h>

#include "core/vendor/forward.h"

MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclGetVersion, (int* version), (version))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclCommInitRank,
                  (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank),
                  (comm, nranks, id, rank))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclCommInitAll,
                  (ncclComm_t * comms, int ndev, const int* devices), (comms, ndev, devices))
// NCCL 2.18 and later: the hybrid's per-stage communicators (parallel/comm/nccl_communicator.cpp).
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config),
                  (comm, color, key, newcomm, config))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclCommGetAsyncError,
                  (ncclComm_t comm, ncclResult_t* result), (comm, result))
MT_VENDOR_FORWARD(nccl, const char*, ncclGetErrorString, (ncclResult_t result), (result))
MT_VENDOR_FORWARD(nccl, const char*, ncclGetLastError, (ncclComm_t comm), (comm))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclGroupStart, (), ())
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclGroupEnd, (), ())
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclBroadcast,
                  (const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                   ncclComm_t comm, cudaStream_t stream),
                  (send, recv, count, type, root, comm, stream))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclAllReduce,
                  (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream),
                  (send, recv, count, type, op, comm, stream))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclReduceScatter,
                  (const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream),
                  (send, recv, count, type, op, comm, stream))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclAllGather,
                  (const void* send, void* recv, size_t count, ncclDataType_t type, ncclComm_t comm,
                   cudaStream_t stream),
                  (send, recv, count, type, comm, stream))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclSend,
                  (const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                   cudaStream_t stream),
                  (send, count, type, peer, comm, stream))
MT_VENDOR_FORWARD(nccl, ncclResult_t, ncclRecv,
                  (void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                   cudaStream_t stream),
                  (recv, count, type, peer, comm, stream))
