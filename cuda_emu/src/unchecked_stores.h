#pragma once
// Note [stores GCC leaves unchecked]: GCC's sanopt pass (at -O1 and above; emulated kernels build
// at -O1) drops an access's AddressSanitizer check when a check of the same pointer, at least as
// wide, dominates it with no call in between, load or store alike (maybe_optimize_asan_check_ifn
// in GCC's sanopt.cc; no flag turns it off). So in `x[i] += v`, and in `x[i] = a; y = z[j];
// x[i] = y;`, the second access reaches none of the checkers, and the store of a read-modify-write
// would be missing from the counters, initcheck and racecheck alike.
//
// The checkers therefore get a GPU thread's accesses through routed_access, which remembers the
// last few (kRemembered) with the bytes they left: a load the bytes it read, a store or an
// atomic those it wrote (read at the thread's next access, once it has run). A remembered range
// is compared with memory when the thread accesses it again (before that access), when it is
// replaced by a newer one, and when the thread yields (a barrier, a warp collective, its end):
// bytes that changed were written by the thread itself, since no other thread of its block ran
// in between and another block writing there without an atomic would be a race. The checkers
// then get that store, in the order it happened, with the site of the access that saw the old
// bytes (the same source line in a read-modify-write). Words that the running grids' atomics
// target are left out: another block may change them at any moment. What this misses: a store
// of the value already there, and a second hidden store to a range the thread did not access
// in between (`x[i] = a; y = z[j]; x[i] = b; w = v[k]; x[i] = c;` counts 2 stores, not 3).
// tests/cuda_emu/emu_counters_test.cu counts each kind of hidden store.

#include <cstddef>
#include <cstdint>

namespace mtemu::detail {

/// A routed access of the running GPU thread (or of host code, which no checker counts): the
/// stores GCC left unchecked that it reveals first, then the access itself, go to the checkers
/// that are on (memory_hooks, counters.h).
void routed_access(uintptr_t addr, uint32_t size, bool store, uintptr_t site);

/// Around each grid's run (the words its atomics target are remembered while it runs).
void routed_grid_begin();
void routed_grid_end();

/// The running GPU thread is about to yield or end: its hidden stores are revealed, and what it
/// remembered is forgotten (the next thread to run is another).
void routed_thread_yield();

}  // namespace mtemu::detail
