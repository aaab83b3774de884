#pragma once
// Buffers that live across training steps and are rewritten, as llm.c allocates its activations,
// gradients and scratch once (Note [buffers that live across steps]).
//
// Note [buffers that live across steps]: a step asks for the same tensors every time (a layer's
// output, the pre-activation it keeps, its input gradient, the loss's value and gradient, a
// batch's device copy), and the caching allocator served each from its cache, one handout per
// tensor per step. A BufferSlot belongs to the one owner that writes such a tensor (a layer, a
// loss, a staging buffer) and hands it back out step after step, with no allocator call:
//
// - only when nothing else holds it: the slot's tensor is handed out again only when the slot's
//   handle is the last one on its storage (views included), so a caller who keeps a tensor the
//   owner returned never sees it rewritten; the slot then allocates as before and keeps the new
//   one beside it;
// - only of the same shape, dtype and device; the slot keeps up to `kept` buffers (default 3),
//   the least recently handed out one making room for a new one: the one this step writes, the
//   one the layers' caches still hold from the last step (it is free again once the next step's
//   forward has replaced them), and one of another shape (the epoch's partial last batch, an
//   evaluation's batch), so that a run's steady state allocates nothing;
// - the contents are stale: the owner overwrites every element (Tensor::empty's contract).
//
// - only on the stream it was made on (the calling thread's current stream of its device then):
//   work on one stream runs in order, so a buffer whose last other holder was dropped after its
//   readers were queued may be rewritten by work queued later on that stream, as the caching
//   allocator reuses a block (Note [streams and the caching allocator] in
//   core/caching_allocator.h); on another stream the slot allocates.
//
// - not while a CUDA graph captured with it lives: a buffer handed out under a capture is that
//   graph's until the graph is destroyed (Note [a slot under capture] in buffer_slot.cpp).
//
// A slot serves one thread at a time. A get that hands a kept buffer out takes no lock while no
// graph is being captured (Note [capture_pool_here without the lock] in
// core/caching_allocator.h): it reads the slot's own list and an atomic count.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace minitrain {
class Allocator;
}

namespace minitrain {

class BufferSlot {
 public:
  static constexpr std::size_t kDefaultKept = 3;
  explicit BufferSlot(std::size_t kept = kDefaultKept);

  /// A tensor of `shape`, `dtype` on `device` with stale contents: a kept one that no other
  /// handle shares, else a new one (Tensor::empty), which the slot then keeps.
  Tensor get(const Shape& shape, DType dtype, Device device);
  /// Drops the slot's handles (their memory goes back when no one else holds it).
  void clear() noexcept;
  /// The buffers the slot holds now.
  std::size_t size() const noexcept;

 private:
  struct Entry {
    Tensor buffer;
    Allocator* allocator = nullptr;  // its device's (the one that knows its graph pools)
    const void* stream = nullptr;    // the current stream of its device when it was made
    uint64_t last_use = 0;           // when it was last handed out: the smallest makes room first
    uint64_t graph_pool = 0;  // handed out under that graph's capture: its until it is destroyed
  };
  // The allocator of `device` (allocator_for locks a process-wide mutex: asked once per device).
  Allocator& allocator_of(Device device);

  std::size_t kept_;
  std::vector<Entry> entries_;
  Device last_device_ = Device::cpu();
  Allocator* last_allocator_ = nullptr;  // allocator_for(last_device_), once asked
  uint64_t uses_ = 0;
};

}  // namespace minitrain
