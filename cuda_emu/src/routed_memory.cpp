// Note [accesses routed to the checkers] (routed_memory.h).

#include "routed_memory.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "counters.h"
#include "sanitizer.h"

namespace mtemu::detail {

namespace {

#if MTEMU_ASAN
// x86-64 Linux's shadow: one byte per 8-byte granule at (addr >> 3) + 0x7fff8000; 0: all 8
// addressable, k in 1..7: the first k, negative: none (ASan's magic values, 0xf1 to 0xfe and
// 0xac, 0xbb, 0xca, 0xcb). 0xe0 to 0xe7 are none of them, and negative, so they fail every inline
// check: kRouted | k marks a granule whose own value was k.
constexpr uintptr_t kShadowOffset = 0x7fff8000;
constexpr uint8_t kRouted = 0xe0, kRoutedMask = 0xf8;

__attribute__((no_sanitize_address)) inline uint8_t* shadow_of(uintptr_t a) {
  return reinterpret_cast<uint8_t*>((a >> 3) + kShadowOffset);
}

// Marks or unmarks the granules of [p, p + n); granules ASan poisoned itself stay as they are.
__attribute__((no_sanitize_address)) void mark(const void* p, std::size_t n) {
  if (n == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (uint8_t *s = shadow_of(a), *end = shadow_of(a + n - 1) + 1; s < end; ++s)
    if (*s < 8) *s = uint8_t(kRouted | *s);
}
__attribute__((no_sanitize_address)) void unmark(const void* p, std::size_t n) {
  if (n == 0) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (uint8_t *s = shadow_of(a), *end = shadow_of(a + n - 1) + 1; s < end; ++s)
    if ((*s & kRoutedMask) == kRouted) *s = uint8_t(*s & 7);
}

// The live device allocations, so that the routing can follow the checkers on and off.
struct Routing {
  std::mutex mutex;
  std::map<const void*, std::size_t> allocations;
  bool on = false;  // guarded by mutex; `on_now` mirrors it for readers without the lock
};
Routing& routing() {
  static auto* r = new Routing();  // never destroyed: allocations are freed at exit too
  return *r;
}
bool on_now = false;

void apply_locked(Routing& r, bool on) {
  r.on = on;
  __atomic_store_n(&on_now, on, __ATOMIC_RELAXED);
  for (const auto& [p, bytes] : r.allocations) on ? mark(p, bytes) : unmark(p, bytes);
}

template <class F>
F libc_function(const char* name) {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  void* f = libc != nullptr ? dlsym(libc, name) : nullptr;
  if (f == nullptr) {
    std::fprintf(stderr, "cuda-emu: glibc's %s not found (%s)\n", name, dlerror());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}
#endif

}  // namespace

void update_routing() {
#if MTEMU_ASAN
  Routing& r = routing();
  std::lock_guard<std::mutex> lock(r.mutex);
  const bool want = __atomic_load_n(&memory_hooks, __ATOMIC_RELAXED) != 0;
  if (want != r.on) apply_locked(r, want);
#endif
}

void routed_allocation_added(const void* p, std::size_t bytes) {
#if MTEMU_ASAN
  Routing& r = routing();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.allocations[p] = bytes;
  if (r.on) mark(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

void routed_allocation_removed(const void* p, std::size_t bytes) {
#if MTEMU_ASAN
  Routing& r = routing();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.allocations.erase(p);
  san::unpoison(p, bytes);  // ASan's own marks too: limit_access may have poisoned a tail
#else
  (void)p, (void)bytes;
#endif
}

void routed_allocation_limit(const void* p, std::size_t bytes, std::size_t usable) {
  // Under the lock, so that a checker turned on or off meanwhile sees ASan's marks whole (its
  // poisoning of a partial granule reads the granule's value, which must not be a routed one).
#if MTEMU_ASAN
  Routing& r = routing();
  std::lock_guard<std::mutex> lock(r.mutex);
  san::unpoison(p, bytes);
  san::poison(static_cast<const char*>(p) + usable, bytes - usable);
  if (r.on) mark(p, bytes);
#else
  (void)p, (void)bytes, (void)usable;
#endif
}

void route_block_memory(const void* p, std::size_t bytes) {
#if MTEMU_ASAN
  if (__atomic_load_n(&on_now, __ATOMIC_RELAXED)) mark(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

void unroute_block_memory(const void* p, std::size_t bytes) {
#if MTEMU_ASAN
  unmark(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

__attribute__((no_sanitize_address)) bool routed_access_is_valid(uintptr_t a, std::size_t bytes) {
#if MTEMU_ASAN
  if (bytes == 0) return true;
  const uintptr_t last = a + bytes - 1;
  for (uintptr_t g = a >> 3; g <= last >> 3; ++g) {
    uint8_t v = *reinterpret_cast<const uint8_t*>(g + kShadowOffset);
    if ((v & kRoutedMask) == kRouted) v &= 7;
    if (v == 0) continue;
    // 1..7: the granule's first v bytes are addressable; the access's last byte in it must be one.
    if (v >= 8 || (std::min(last, (g << 3) + 7) & 7) >= v) return false;
  }
  return true;
#else
  (void)a, (void)bytes;
  return false;
#endif
}

void lift_routing_for_report() {
#if MTEMU_ASAN
  Routing& r = routing();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.on) apply_locked(r, false);
#endif
}

void restore_routing_after_report() { update_routing(); }

void raw_copy(void* dst, const void* src, std::size_t bytes) {
#if MTEMU_ASAN
  using Memmove = void* (*)(void*, const void*, std::size_t);
  static const Memmove memmove_of_libc = libc_function<Memmove>("memmove");
  memmove_of_libc(dst, src, bytes);
#else
  std::memmove(dst, src, bytes);
#endif
}

void raw_set(void* dst, int value, std::size_t bytes) {
#if MTEMU_ASAN
  using Memset = void* (*)(void*, int, std::size_t);
  static const Memset memset_of_libc = libc_function<Memset>("memset");
  memset_of_libc(dst, value, bytes);
#else
  std::memset(dst, value, bytes);
#endif
}

}  // namespace mtemu::detail
