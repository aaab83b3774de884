#pragma once
// The sanitizers' view of the emulator. Under AddressSanitizer, fiber switches are announced so
// that it tracks the right stack. Under ThreadSanitizer each emulated GPU thread is a TSan fiber,
// switched without implied ordering, so that only what orders threads on a GPU orders them here:
// a barrier or warp collective (release on arrival, acquire on leaving), the end of a grid before
// what its stream does next, and events between streams. The emulator's own bookkeeping is
// excluded from race detection (IgnoreAll): it is not the user's memory.

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define MTEMU_ASAN 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#else
#define MTEMU_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define MTEMU_TSAN 1
#include <sanitizer/tsan_interface.h>
extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateNewMemory(const char* file, int line, const volatile void* mem, unsigned long size);
}
#else
#define MTEMU_TSAN 0
#endif

namespace mtemu::san {

/// Reads and writes in this scope are invisible to ThreadSanitizer; synchronisation (creating a
/// fiber, release/acquire) still counts.
class IgnoreAccesses {
 public:
#if MTEMU_TSAN
  IgnoreAccesses() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  }
  ~IgnoreAccesses() {
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
#else
  IgnoreAccesses() {}  // user-provided, so that an unused guard is not a warning
  ~IgnoreAccesses() {}
#endif
  IgnoreAccesses(const IgnoreAccesses&) = delete;
  IgnoreAccesses& operator=(const IgnoreAccesses&) = delete;
};

/// Accesses and synchronisation in this scope are invisible to ThreadSanitizer.
class IgnoreAll {
 public:
#if MTEMU_TSAN
  IgnoreAll() { AnnotateIgnoreSyncBegin(__FILE__, __LINE__); }
  ~IgnoreAll() { AnnotateIgnoreSyncEnd(__FILE__, __LINE__); }
#else
  IgnoreAll() {}
  ~IgnoreAll() {}
#endif
  IgnoreAll(const IgnoreAll&) = delete;
  IgnoreAll& operator=(const IgnoreAll&) = delete;

 private:
  IgnoreAccesses accesses_;
};

inline void release(void* addr) {
#if MTEMU_TSAN
  __tsan_release(addr);
#else
  (void)addr;
#endif
}
inline void acquire(void* addr) {
#if MTEMU_TSAN
  __tsan_acquire(addr);
#else
  (void)addr;
#endif
}

/// [p, p + n) starts a new life (a fiber stack reused by the next GPU thread): what earlier
/// threads did there orders nothing and races with nothing.
inline void fresh_memory(const void* p, std::size_t n) {
#if MTEMU_TSAN
  AnnotateNewMemory(__FILE__, __LINE__, p, n);
#else
  (void)p, (void)n;
#endif
}

/// Marks [p, p + n) unusable (AddressSanitizer reports any access) or usable again.
inline void poison(const void* p, std::size_t n) {
#if MTEMU_ASAN
  if (n) __asan_poison_memory_region(p, n);
#else
  (void)p, (void)n;
#endif
}
inline void unpoison(const void* p, std::size_t n) {
#if MTEMU_ASAN
  if (n) __asan_unpoison_memory_region(p, n);
#else
  (void)p, (void)n;
#endif
}

}  // namespace mtemu::san
