// BufferSlot (Note [buffers that live across steps] in core/buffer_slot.h): a short list of
// tensors searched for one of the right kind that nothing else holds.

#include "core/buffer_slot.h"

#include <atomic>

#include "core/allocator.h"
#include "core/error.h"
#include "core/stream.h"

namespace minitrain {

BufferSlot::BufferSlot(std::size_t kept) : kept_(kept) {
  MT_CHECK_AS(ValueError, kept >= 1, "BufferSlot: must keep at least one buffer, got ", kept);
}

Tensor BufferSlot::get(const Shape& shape, DType dtype, Device device) {
  ++uses_;
  // Note [a slot under capture]: a CUDA graph writes the buffers it was captured with at every
  // replay, while the host runs none of the step's code and so asks no slot for them: a kept
  // buffer would look unused, be handed to eager work (a partial last batch) or dropped to make
  // room, and the replays would write into memory that is someone else's or freed. So a buffer
  // handed out under a capture belongs to that graph (its pool id) until the graph is destroyed
  // (the allocator's pool released): it is neither handed out nor dropped meanwhile. A new one a
  // capture needs comes from the graph's own pool, which keeps it; the slot does not.
  // No lock while nothing captures (Note [capture_pool_here without the lock]).
  const uint64_t capture = device.is_cpu() ? 0 : allocator_of(device).capture_pool_here();
  for (Entry& e : entries_)
    if (e.graph_pool != 0 && !e.allocator->pool_alive(e.graph_pool)) e.graph_pool = 0;
  const void* stream = device.is_cpu() ? nullptr : current_stream(device).native_handle();
  for (Entry& e : entries_) {
    const Tensor& b = e.buffer;
    // A buffer of this same capture may serve it again once free, as a pool block does: the
    // replay runs the requests in the captured order on one stream, as the eager step did.
    if ((e.graph_pool != 0 && e.graph_pool != capture) || b.storage_use_count() != 1 ||
        b.shape() != shape || b.dtype() != dtype || b.device() != device || e.stream != stream)
      continue;
    // The count fell to 1 when the last other handle went (a release decrement, perhaps on
    // another thread: a data loader's worker reuses what the training thread dropped); the
    // fence orders everything that thread did before, its queued readers included, before the
    // caller's writes.
    std::atomic_thread_fence(std::memory_order_acquire);
    e.last_use = uses_;
    e.graph_pool = capture;
    return b;
  }
  Tensor fresh = Tensor::empty(shape, dtype, device);
  if (capture != 0) return fresh;  // a block of the graph's pool: the pool keeps it
  // Room among the buffers no graph holds: `kept_` of them at most.
  Entry* oldest = nullptr;
  std::size_t free_entries = 0;
  for (Entry& e : entries_) {
    if (e.graph_pool != 0) continue;
    ++free_entries;
    if (oldest == nullptr || e.last_use < oldest->last_use) oldest = &e;
  }
  Allocator* allocator = device.is_cpu() ? nullptr : &allocator_of(device);
  if (free_entries < kept_)
    entries_.push_back(Entry{fresh, allocator, stream, uses_, 0});
  else
    *oldest = Entry{fresh, allocator, stream, uses_, 0};  // a holder of the old buffer keeps it
  return fresh;
}

Allocator& BufferSlot::allocator_of(Device device) {
  if (last_allocator_ == nullptr || last_device_ != device) {
    last_allocator_ = &allocator_for(device);  // lives for the process
    last_device_ = device;
  }
  return *last_allocator_;
}

void BufferSlot::clear() noexcept { entries_.clear(); }

std::size_t BufferSlot::size() const noexcept { return entries_.size(); }

}  // namespace minitrain
