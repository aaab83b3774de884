#pragma once
// A fiber: a stack and a saved register context (Boost.Context's fcontext, a few dozen
// instructions per switch), run by its host thread until it yields. The emulator gives each GPU
// thread of a block one, so a thread can stop at a barrier and let the others catch up. Stacks
// are mmap'd with a guard page below, so a runaway kernel faults instead of overwriting memory.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <boost/context/detail/fcontext.hpp>

namespace mtemu::detail {

class Fiber {
 public:
  using Entry = void (*)(void* arg);

  explicit Fiber(std::size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// Prepares a fresh run of `entry(arg)` on this fiber's stack (nothing runs yet). `name`
  /// labels the fiber in ThreadSanitizer reports.
  void start(Entry entry, void* arg, const char* name);
  /// From the host thread: runs the fiber until it yields or returns.
  void resume();
  /// From inside the fiber: back to the host thread, until the next resume().
  void yield();
  /// For a fiber abandoned mid-way (its block faulted): a ThreadSanitizer release of `token` as
  /// if the fiber had run to its end, so what it did is ordered before the grid's end.
  void release_as_if_finished(void* token);
  /// Whether `addr` lies on this fiber's stack.
  bool contains(uintptr_t addr) const noexcept {
    const auto lo = reinterpret_cast<uintptr_t>(stack_);
    return addr >= lo && addr < lo + size_;
  }
  /// The stack's usable range [begin, end).
  uintptr_t stack_begin() const noexcept { return reinterpret_cast<uintptr_t>(stack_); }
  uintptr_t stack_end() const noexcept { return stack_begin() + size_; }
  bool finished() const noexcept { return finished_.load(std::memory_order_relaxed); }

 private:
  static void trampoline(boost::context::detail::transfer_t t);

  void* stack_ = nullptr;  // lowest usable address (the guard page lies below it)
  std::size_t size_ = 0;   // usable bytes
  boost::context::detail::fcontext_t context_ = nullptr;  // the fiber's, while suspended
  std::atomic<boost::context::detail::fcontext_t> host_{
      nullptr};  // the host thread's, while the fiber runs
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
  // Written by one side of a switch and read by the other. Switches carry no ordering under TSan
  // (user memory must be ordered by barriers), so the emulator's own fields shared across a
  // switch are atomics: a switch is a plain jump on one host thread, so relaxed is enough.
  std::atomic<bool> finished_{true};
  // AddressSanitizer: the host's stack bounds and both sides' fake stacks.
  const void* host_bottom_ = nullptr;
  std::size_t host_size_ = 0;
  void* host_fake_stack_ = nullptr;
  void* fake_stack_ = nullptr;
  // ThreadSanitizer: this fiber and the host thread's own.
  void* tsan_fiber_ = nullptr;
  std::atomic<void*> tsan_host_{nullptr};
};

}  // namespace mtemu::detail
