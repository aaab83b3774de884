#pragma once
// Batches on their way to a GPU: rows are gathered into pinned host buffers, then copied to the
// device asynchronously on the consumer's stream (Note [data loader streams] in data_loader.cpp).
// Several loader workers stage batches at once, each in a buffer of its own; a buffer is refilled
// only after the Event recorded behind the copies out of it has completed, so a batch still in
// flight never sees a later batch's rows. Each buffer also keeps the device tensors its batches
// are copied into, allocated with the buffers before the first batch and rewritten while no one
// holds them any more (Note [buffers that live across steps] in core/buffer_slot.h): a batch
// costs the caching allocator nothing after construction, and a step sees no cudaMalloc of the
// loader's worker at a time set by thread timing.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "core/buffer_slot.h"
#include "core/device.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace minitrain {

class PinnedStaging {
 public:
  /// `count` buffer pairs ([rows, in_dim] and [rows, out_dim] float32), pinned, and as many on
  /// `device` (allocated here, on `stream`), for copies queued on `stream` (which must outlive
  /// this). `count` must exceed the number of threads that call stage() at once, so that each
  /// finds a free buffer.
  PinnedStaging(Device device, const Stream& stream, int64_t rows, int64_t in_dim, int64_t out_dim,
                std::size_t count);
  /// Waits for the copies still in flight: pinned blocks go back to a cache that hands them out
  /// again.
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  /// Fills the first k rows of a free buffer pair with `fill(x, y)` (host tensors [k, in_dim] and
  /// [k, out_dim]), then queues the copies into device tensors x and y: the first k rows of the
  /// buffer's device pair when no earlier batch from it is still held, else newly allocated ones
  /// (which the buffer then keeps). Safe to call from several threads. An exception from `fill`
  /// leaves the buffer free again.
  void stage(int64_t k, const std::function<void(Tensor&, Tensor&)>& fill, Tensor& x, Tensor& y);

 private:
  struct Buffer {
    Tensor x, y;                    // pinned
    BufferSlot device_x, device_y;  // [rows, in_dim] and [rows, out_dim] on the device
    Event copied;
    bool pending = false;  // `copied` was recorded and may not have completed
    bool busy = false;     // a thread is filling it
  };
  std::size_t acquire();  // a buffer no other thread holds, its last copy complete

  Device device_;
  const Stream& stream_;
  int64_t rows_, in_dim_, out_dim_;
  std::mutex mu_;  // guards `busy` and the round-robin position
  std::vector<Buffer> buffers_;
  std::size_t next_ = 0;
};

}  // namespace minitrain
