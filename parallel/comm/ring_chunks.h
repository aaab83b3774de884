#pragma once
// The ring all-reduce's chunk arithmetic, shared by the generic ring over send_recv
// (parallel/comm/ring.cpp) and the MPI backend's native ring (parallel/comm/mpi_communicator.cpp):
// the tensor's `length` elements cut into n chunks, each chunk sent in slices.

#include <algorithm>
#include <cstdint>

namespace minitrain::ring_chunks {

/// Elements [begin, begin + length) of the flat tensor.
struct Range {
  int64_t begin, length;
};

/// Chunk c of n over `length` elements: [length*c/n, length*(c+1)/n). Chunks differ by at most
/// one element; with fewer elements than ranks some are empty.
inline Range chunk_range(int64_t length, int n, int c) {
  const int64_t begin = length * c / n, end = length * (c + 1) / n;
  return {begin, end - begin};
}

/// Slice s of a chunk, clamped: may be empty when this chunk is one element shorter than others.
inline Range slice_range(Range chunk, int64_t slice_elems, int64_t s) {
  const int64_t begin = std::min(chunk.length, s * slice_elems);
  const int64_t end = std::min(chunk.length, (s + 1) * slice_elems);
  return {chunk.begin + begin, end - begin};
}

/// a mod n in [0, n), for ring neighbours and chunk indices that step below zero.
inline int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace minitrain::ring_chunks
