// The ring all-reduce over send_recv (Patarasuk & Yuan; NCCL's ring). The n ranks form a ring
// r -> r+1; the tensor is cut into n chunks. Reduce-scatter: in n-1 steps each rank passes one
// chunk to its successor and folds the chunk it receives into its own copy, so that rank r ends
// owning the full reduction of chunk r+1. All-gather: n-1 more steps pass the reduced chunks
// around the ring. Each rank sends 2(n-1)/n of the tensor: bandwidth-bound, independent of n.
// Within a step a chunk goes in slices of kSliceBytes, so the reduction of one slice overlaps
// the transfer of the next where the backend is asynchronous.

#include "parallel/comm/ring.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "parallel/comm/ring_chunks.h"

namespace minitrain {

namespace {

/// Bytes per message: large enough to amortise a message's latency, small enough to pipeline.
constexpr int64_t kSliceBytes = 64 * 1024;

using ring_chunks::chunk_range;
using ring_chunks::mod;
using ring_chunks::Range;
using ring_chunks::slice_range;

void reduce_into(Tensor& acc, const Tensor& x, ReduceOp op) {
  if (op == ReduceOp::Max)
    maximum(acc, acc, x);
  else
    add(acc, acc, x);  // Sum, and Avg before its final scaling
}

/// Runs one ring step, slice by slice: sends chunk `send_c` to `next`, receives chunk `recv_c`
/// from `prev` into `scratch` and either reduces it into place or copies it there.
void ring_step(Communicator& comm, Tensor& flat, Tensor& scratch, int send_c, int recv_c,
               bool reduce, ReduceOp op, const char* phase, int step) {
  const int n = comm.size(), rank = comm.rank();
  const int next = mod(rank + 1, n), prev = mod(rank - 1, n);
  const int64_t length = flat.numel();
  const int64_t slice_elems = scratch.numel();
  const Range send_chunk = chunk_range(length, n, send_c);
  const Range recv_chunk = chunk_range(length, n, recv_c);
  // Every rank loops over the slices of the largest chunk, so that the k-th message on each
  // link is the k-th slice of the same chunk on both of its ends.
  const int64_t largest = (length + n - 1) / n;
  const int64_t slices = std::max<int64_t>(1, (largest + slice_elems - 1) / slice_elems);
  for (int64_t s = 0; s < slices; ++s) {
    const Range out = slice_range(send_chunk, slice_elems, s);
    const Range in = slice_range(recv_chunk, slice_elems, s);
    Tensor dst = flat.narrow(in.begin, in.length);
    Tensor buf = reduce ? scratch.narrow(0, in.length) : dst;
    try {
      comm.send_recv(flat.narrow(out.begin, out.length), next, buf, prev);
    } catch (const CommError& e) {
      MT_THROW(CommError, "all_reduce (ring ", phase, " step ", step, ", slice ", s,
               "): ", e.what());
    }
    if (reduce) reduce_into(dst, buf, op);
  }
}

}  // namespace

void ring_all_reduce(Communicator& comm, Tensor& t, ReduceOp op) {
  const int n = comm.size(), r = comm.rank();
  if (n == 1 || t.numel() == 0) return;  // nothing to exchange (Avg over one rank is the identity)
  Tensor flat = t.flatten();
  const int64_t slice_elems =
      std::max<int64_t>(1, kSliceBytes / static_cast<int64_t>(dtype_size(t.dtype())));
  Tensor scratch = Tensor::empty({slice_elems}, t.dtype(), t.device());

  // Reduce-scatter.
  // step k: send chunk (r - k) to rank r+1, receive chunk (r - k - 1) from rank r-1 and fold it
  // into ours. After step k our chunk (r - k - 1) holds the reduction over k + 2 ranks, so after
  // n-1 steps chunk (r + 1) holds all n contributions.
  for (int k = 0; k < n - 1; ++k)
    ring_step(comm, flat, scratch, mod(r - k, n), mod(r - k - 1, n), /*reduce=*/true, op,
              "reduce-scatter", k);

  // All-gather.
  // step k: send chunk (r + 1 - k), which is complete, to rank r+1; receive chunk (r - k),
  // complete, from rank r-1 and copy it in place. After n-1 steps every chunk is complete.
  for (int k = 0; k < n - 1; ++k)
    ring_step(comm, flat, scratch, mod(r + 1 - k, n), mod(r - k, n), /*reduce=*/false, op,
              "all-gather", k);

  if (op == ReduceOp::Avg) scale(flat, flat, 1.0 / n);
}

}  // namespace minitrain
