#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "sanitizer.h"

namespace ctx = boost::context::detail;

namespace mtemu::detail {

namespace {
std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Announces a switch to AddressSanitizer (a no-op without it). `save` is null when the side
// being left will never run again.
void asan_leave(void** save, const void* bottom, std::size_t size) {
#if MTEMU_ASAN
  __sanitizer_start_switch_fiber(save, bottom, size);
#else
  (void)save, (void)bottom, (void)size;
#endif
}
void asan_arrive(void* saved, const void** old_bottom, std::size_t* old_size) {
#if MTEMU_ASAN
  __sanitizer_finish_switch_fiber(saved, old_bottom, old_size);
#else
  (void)saved, (void)old_bottom, (void)old_size;
#endif
}
// Switches without implied ordering: only barriers, collectives and grid boundaries order threads.
void tsan_switch(void* fiber) {
#if MTEMU_TSAN
  __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
#else
  (void)fiber;
#endif
}
}  // namespace

Fiber::Fiber(std::size_t stack_bytes) {
  const std::size_t page = page_size();
  size_ = (stack_bytes + page - 1) / page * page;
  void* base = mmap(nullptr, size_ + page, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    std::fprintf(stderr, "cuda-emu: cannot map a %zu-byte fiber stack\n", size_);
    std::abort();
  }
  mprotect(base, page, PROT_NONE);  // guard page: a stack overflow faults here
  stack_ = static_cast<char*>(base) + page;
}

Fiber::~Fiber() {
#if MTEMU_TSAN
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  munmap(static_cast<char*>(stack_) - page_size(), size_ + page_size());
}

void Fiber::start(Entry entry, void* arg, const char* name) {
  entry_ = entry;
  arg_ = arg;
  finished_.store(false, std::memory_order_relaxed);
  // A fiber abandoned mid-way (a faulting block) left its frames' redzones poisoned.
  san::unpoison(stack_, size_);
  san::fresh_memory(stack_, size_);  // the last GPU thread on this stack is not this one's past
#if MTEMU_TSAN
  // The same for ThreadSanitizer's shadow, which AnnotateNewMemory leaves as it is: mapping the
  // stack anew resets it (the caller ignores accesses, so the mapping counts as no write). Without
  // it the last thread's frames on this stack raced with this one's.
  if (mmap(stack_, size_, PROT_READ | PROT_WRITE,
           MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
    std::fprintf(stderr, "cuda-emu: cannot map a %zu-byte fiber stack anew\n", size_);
    std::abort();
  }
#endif
  context_ = ctx::make_fcontext(static_cast<char*>(stack_) + size_, size_, &Fiber::trampoline);
#if MTEMU_TSAN
  // A new TSan fiber per run: it inherits the host thread's history (the grid's launch), not
  // that of the thread that ran on this stack before.
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
  tsan_fiber_ = __tsan_create_fiber(0);
  __tsan_set_fiber_name(tsan_fiber_, name);
#else
  (void)name;
#endif
}

void Fiber::resume() {
#if MTEMU_TSAN
  tsan_host_.store(__tsan_get_current_fiber(), std::memory_order_relaxed);
#endif
  asan_leave(&host_fake_stack_, stack_, size_);
  tsan_switch(tsan_fiber_);
  const ctx::transfer_t t = ctx::jump_fcontext(context_, this);
  asan_arrive(host_fake_stack_, nullptr, nullptr);
  context_ = t.fctx;
}

void Fiber::yield() {
  asan_leave(&fake_stack_, host_bottom_, host_size_);
  tsan_switch(tsan_host_.load(std::memory_order_relaxed));
  const ctx::transfer_t t = ctx::jump_fcontext(host_.load(std::memory_order_relaxed), nullptr);
  host_.store(t.fctx, std::memory_order_relaxed);
  asan_arrive(fake_stack_, &host_bottom_, &host_size_);
}

void Fiber::release_as_if_finished(void* token) {
#if MTEMU_TSAN
  void* const host = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, __tsan_switch_to_fiber_no_sync);  // TSan's view only: no jump
  __tsan_release(token);
  __tsan_switch_to_fiber(host, __tsan_switch_to_fiber_no_sync);
#else
  (void)token;
#endif
}

void Fiber::trampoline(ctx::transfer_t t) {
  Fiber* self = static_cast<Fiber*>(t.data);
  self->host_.store(t.fctx, std::memory_order_relaxed);
  asan_arrive(nullptr, &self->host_bottom_, &self->host_size_);
  self->entry_(self->arg_);
  self->finished_.store(true, std::memory_order_relaxed);
  asan_leave(nullptr, self->host_bottom_, self->host_size_);
  tsan_switch(self->tsan_host_.load(std::memory_order_relaxed));
  ctx::jump_fcontext(self->host_.load(std::memory_order_relaxed), nullptr);  // never resumed
  std::abort();
}

}  // namespace mtemu::detail
