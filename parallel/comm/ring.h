#pragma once
// The ring all-reduce, written over send_recv so that it runs on every backend: reduce-scatter
// then all-gather, n-1 steps each, the tensor cut into n chunks (any length: chunks differ by at
// most one element, some may be empty), each chunk further cut into pipelined slices. The
// reduction of a received slice runs as a kernel on the data's device (kernels/elementwise.h).
// Bandwidth-optimal: each rank sends and receives 2(n-1)/n of the tensor.

#include "parallel/comm/communicator.h"

namespace minitrain {

void ring_all_reduce(Communicator& comm, Tensor& t, ReduceOp op);

}  // namespace minitrain
