// BufferSlot (Note [buffers that live across steps] in core/buffer_slot.h): a short list of
// tensors searched for one of the right kind that nothing else holds.

#include "core/buffer_slot.h"

#include <atomic>

#include "core/error.h"
#include "core/stream.h"

namespace minitrain {

BufferSlot::BufferSlot(std::size_t kept) : kept_(kept) {
  MT_CHECK_AS(ValueError, kept >= 1, "BufferSlot: must keep at least one buffer, got ", kept);
}

Tensor BufferSlot::get(const Shape& shape, DType dtype, Device device) {
  ++uses_;
  const void* stream = device.is_cpu() ? nullptr : current_stream(device).native_handle();
  for (Entry& e : entries_) {
    const Tensor& b = e.buffer;
    if (b.storage_use_count() != 1 || b.shape() != shape || b.dtype() != dtype ||
        b.device() != device || e.stream != stream)
      continue;
    // The count fell to 1 when the last other handle went (a release decrement, perhaps on
    // another thread: a data loader's worker reuses what the training thread dropped); the
    // fence orders everything that thread did before, its queued readers included, before the
    // caller's writes.
    std::atomic_thread_fence(std::memory_order_acquire);
    e.last_use = uses_;
    return b;
  }
  Tensor fresh = Tensor::empty(shape, dtype, device);
  if (entries_.size() < kept_) {
    entries_.push_back(Entry{fresh, stream, uses_});
  } else {
    Entry* oldest = &entries_.front();
    for (Entry& e : entries_)
      if (e.last_use < oldest->last_use) oldest = &e;
    *oldest = Entry{fresh, stream, uses_};  // a holder of the old buffer keeps it; the slot lets go
  }
  return fresh;
}

void BufferSlot::clear() noexcept { entries_.clear(); }

std::size_t BufferSlot::size() const noexcept { return entries_.size(); }

}  // namespace minitrain
