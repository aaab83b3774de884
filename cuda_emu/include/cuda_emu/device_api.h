#pragma once
// The device side of the emulated CUDA language: function qualifiers, the built-in index
// variables, barriers, warp intrinsics and atomics, as seen by kernel source compiled as host
// C++. Each emulated GPU thread is a fiber (cuda_emu/src/fiber.h); a block's fibers take turns on
// one host thread, so threadIdx and friends read the running fiber's context, and a barrier or a
// warp collective suspends the fiber until the threads it waits for arrive. Threads are
// independent (no lock-step warps, as on Volta and later): a collective meets only the lanes its
// mask names, and a lane that never comes is reported, not waited for.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cuda_emu/vector_types.h"
#include "cuda_emu/counters.h"
#include "cuda_emu/initcheck.h"
#include "cuda_emu/racecheck.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
// The bound is read at the launch site by the build-time rewrite (cuda_emu/rewrite_cuda.py),
// which checks each launch against it as the GPU does.
#define __launch_bounds__(...)

namespace mtemu::detail {

struct BlockRun;

/// What one emulated GPU thread sees: its indices and its block.
struct ThreadCtx {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int linear;  ///< threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  BlockRun* block;
};

// Set by the block scheduler before each switch. Atomic (relaxed: one host thread) because the
// GPU threads read it from their own TSan fibers, which the scheduler's writes do not order.
extern thread_local std::atomic<ThreadCtx*> tls_thread;
[[noreturn]] void outside_kernel(const char* what);

inline ThreadCtx& current(const char* what) {
  ThreadCtx* t = tls_thread.load(std::memory_order_relaxed);
  if (t == nullptr) outside_kernel(what);
  return *t;
}

// ---- runtime entry points (cuda_emu/src/block.cpp) ----
/// One __syncthreads() of the source, as reports name it.
struct BarrierSite {
  const char* file;
  int line;
};
void syncthreads(const BarrierSite* site);
void syncwarp(unsigned mask);
/// `site` names the __activemask() expression: lanes waiting at different ones are on different
/// sides of a branch, and each side gets its own mask.
unsigned activemask(const void* site);
enum class Shfl : int { Idx, Up, Down, Xor };
void shuffle(unsigned mask, Shfl kind, int arg, int width, const void* in, void* out,
             std::size_t size);
unsigned ballot(unsigned mask, bool predicate);
/// Claims `bytes` of static shared memory for the declaration `tag` in the running block (the
/// first thread to get there allocates; every thread of the block gets the same storage).
void* block_shared(const void* tag, std::size_t bytes, std::size_t align, const char* name);
void* dynamic_shared(std::size_t align);
[[noreturn]] void device_trap(const char* what);

}  // namespace mtemu::detail

#define threadIdx (::mtemu::detail::current("threadIdx").thread_idx)
#define blockIdx (::mtemu::detail::current("blockIdx").block_idx)
#define blockDim (::mtemu::detail::current("blockDim").block_dim)
#define gridDim (::mtemu::detail::current("gridDim").grid_dim)
constexpr int warpSize = 32;

namespace mtemu {
/// `__shared__ T name[N];` becomes `auto& name = ::mtemu::shared_var<T[N], align>(&tag, "name");`
/// (rewrite_cuda.py): storage per block, allocated apart so the memory checks see its bounds.
template <class T, std::size_t kAlign>
T& shared_var(const void* tag, const char* name) {
  static_assert(std::is_trivially_default_constructible<T>::value,
                "__shared__ variables cannot have initialisers");
  return *static_cast<T*>(
      detail::block_shared(tag, sizeof(T), kAlign < alignof(T) ? alignof(T) : kAlign, name));
}
/// `extern __shared__ T name[];`: the launch's dynamic shared memory.
template <class T>
T* dynamic_shared_var(std::size_t align) {
  return static_cast<T*>(detail::dynamic_shared(align < alignof(T) ? alignof(T) : align));
}
}  // namespace mtemu

// ---- barriers and warp intrinsics ----

// Each __syncthreads() names itself by a static of its own, with its file and line: threads of a
// block that wait at different ones are reported (as compute-sanitizer's synccheck does), naming
// both. A static rather than the call's return address, which the compiler changes when it
// duplicates a call (unrolling, tail duplication) or merges two identical ones.
#define __syncthreads()                                                       \
  ::mtemu::detail::syncthreads([]() noexcept {                                \
    static const ::mtemu::detail::BarrierSite mtemu_site{__FILE__, __LINE__}; \
    return &mtemu_site;                                                       \
  }())
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::mtemu::detail::syncwarp(mask); }
// Each __activemask() expression names itself by a static of its own (the compiler may merge two
// identical calls on the two sides of a branch into one, but not two different addresses): lanes
// at different ones diverged, and get disjoint masks, as on a GPU.
#define __activemask()                        \
  ::mtemu::detail::activemask([]() noexcept { \
    static const char mtemu_site = 0;         \
    return &mtemu_site;                       \
  }())
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return ::mtemu::detail::ballot(mask, predicate != 0);
}
inline int __all_sync(unsigned mask, int predicate) {
  return ::mtemu::detail::ballot(mask, predicate != 0) == mask;
}
inline int __any_sync(unsigned mask, int predicate) {
  return ::mtemu::detail::ballot(mask, predicate != 0) != 0;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
[[noreturn]] inline void __trap() { ::mtemu::detail::device_trap("__trap()"); }

namespace mtemu::detail {
template <class T>
T shuffle_as(unsigned mask, T v, Shfl kind, int arg, int width) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16,
                "shuffles move up to 16 bytes");
  T out;
  shuffle(mask, kind, arg, width, &v, &out, sizeof(T));
  return out;
}
}  // namespace mtemu::detail

template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  return ::mtemu::detail::shuffle_as(mask, v, ::mtemu::detail::Shfl::Idx, src_lane, width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::mtemu::detail::shuffle_as(mask, v, ::mtemu::detail::Shfl::Up, int(delta), width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  return ::mtemu::detail::shuffle_as(mask, v, ::mtemu::detail::Shfl::Down, int(delta), width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  return ::mtemu::detail::shuffle_as(mask, v, ::mtemu::detail::Shfl::Xor, lane_mask, width);
}

// ---- atomics: blocks run on several host threads at once, so these are real atomics ----

namespace mtemu::detail {
template <class T, class F>
T atomic_update(T* address, F f) {  // compare-and-swap loop for the floating-point forms
  T old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, f(old), true, __ATOMIC_SEQ_CST,
                                      __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T>
T atomic_update_fp(T* address, T (*f)(T, T), T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "32- or 64-bit floating point");
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits* bits = reinterpret_cast<Bits*>(address);
  Bits old_bits = __atomic_load_n(bits, __ATOMIC_RELAXED);
  for (;;) {
    T old_value;
    std::memcpy(&old_value, &old_bits, sizeof(T));
    const T new_value = f(old_value, v);
    Bits new_bits;
    std::memcpy(&new_bits, &new_value, sizeof(T));
    if (__atomic_compare_exchange_n(bits, &old_bits, new_bits, true, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
      return old_value;
  }
}
}  // namespace mtemu::detail

namespace mtemu::detail {
extern unsigned char memory_hooks;  // a bit per checker that is on (cuda_emu/src/counters.h)
extern thread_local int in_atomic;  // > 0 inside an atomic while a checker is on
// Its accesses are not checked as loads and stores: an atomic orders itself (racecheck), counts
// as one atomic request (the counters), and what it changes is no hidden plain store (Note
// [stores GCC leaves unchecked], cuda_emu/src/unchecked_stores.h).
void atomic_scope_begin(const void* address, std::size_t bytes);
struct AtomicScope {
  __attribute__((always_inline)) AtomicScope(const void* a, std::size_t n) {
    if (__builtin_expect(memory_hooks != 0, 0)) {
      active = true;
      atomic_scope_begin(a, n);
    }
  }
  ~AtomicScope() {
    if (active) --in_atomic;
  }
  bool active = false;
};
}  // namespace mtemu::detail

// Each atomic counts as one atomic request (cuda_emu/counters.h), not as the loads and stores
// it is made of.
#define MTEMU_COUNT_ATOMIC(a)                                       \
  ::mtemu::detail::AtomicCount mtemu_count_atomic_(a, sizeof *(a)); \
  ::mtemu::detail::AtomicScope mtemu_atomic_scope_(a, sizeof *(a))
// Under initcheck (cuda_emu/initcheck.h) a read-modify-write reads the old value: a read of
// unwritten memory is reported; an exchange only writes. (AddressSanitizer's hooks do not see the
// integer atomics as reads.)
#define MTEMU_ATOMIC_INITCHECK(a, reads)                  \
  if (__builtin_expect(::mtemu::detail::initcheck_on, 0)) \
  ::mtemu::detail::initcheck_atomic(a, sizeof *(a), reads)
#define MTEMU_ATOMIC_RMW(a) \
  MTEMU_COUNT_ATOMIC(a);    \
  MTEMU_ATOMIC_INITCHECK(a, true)
#define MTEMU_INTEGER_ATOMICS(T)                                                            \
  inline T atomicAdd(T* a, T v) {                                                           \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                      \
  }                                                                                         \
  inline T atomicSub(T* a, T v) {                                                           \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                      \
  }                                                                                         \
  inline T atomicExch(T* a, T v) {                                                          \
    MTEMU_COUNT_ATOMIC(a);                                                                  \
    MTEMU_ATOMIC_INITCHECK(a, false);                                                       \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                     \
  }                                                                                         \
  inline T atomicAnd(T* a, T v) {                                                           \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                      \
  }                                                                                         \
  inline T atomicOr(T* a, T v) {                                                            \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                       \
  }                                                                                         \
  inline T atomicXor(T* a, T v) {                                                           \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                      \
  }                                                                                         \
  inline T atomicMax(T* a, T v) {                                                           \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return ::mtemu::detail::atomic_update(a, [v](T o) { return o < v ? v : o; });           \
  }                                                                                         \
  inline T atomicMin(T* a, T v) {                                                           \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    return ::mtemu::detail::atomic_update(a, [v](T o) { return v < o ? v : o; });           \
  }                                                                                         \
  inline T atomicCAS(T* a, T compare, T v) {                                                \
    MTEMU_ATOMIC_RMW(a);                                                                    \
    __atomic_compare_exchange_n(a, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
    return compare;                                                                         \
  }
MTEMU_INTEGER_ATOMICS(int)
MTEMU_INTEGER_ATOMICS(unsigned int)
MTEMU_INTEGER_ATOMICS(unsigned long long)
#undef MTEMU_INTEGER_ATOMICS

inline float atomicAdd(float* a, float v) {
  MTEMU_ATOMIC_RMW(a);
  return ::mtemu::detail::atomic_update_fp<float>(
      a, [](float o, float x) { return o + x; }, v);
}
inline double atomicAdd(double* a, double v) {
  MTEMU_ATOMIC_RMW(a);
  return ::mtemu::detail::atomic_update_fp<double>(
      a, [](double o, double x) { return o + x; }, v);
}
inline float atomicExch(float* a, float v) {
  MTEMU_COUNT_ATOMIC(a);
  MTEMU_ATOMIC_INITCHECK(a, false);
  uint32_t bits;  // an exchange, not a compare-and-swap loop: it does not read the old value first
  std::memcpy(&bits, &v, sizeof bits);
  const uint32_t old = __atomic_exchange_n(reinterpret_cast<uint32_t*>(a), bits, __ATOMIC_SEQ_CST);
  float r;
  std::memcpy(&r, &old, sizeof r);
  return r;
}

// ---- device math that CUDA has and C++ spells differently ----
inline float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
