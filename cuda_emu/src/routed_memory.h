#pragma once
// Note [accesses routed to the checkers]: how a kernel's loads and stores reach the emulator's
// checkers (the counters, initcheck, racecheck) at no cost while all three are off.
//
// Emulated kernels are compiled with AddressSanitizer's own inline shadow check and
// -fsanitize-recover=address (cmake/MinitrainHelpers.cmake), so a clean access costs what ASan
// costs, and an access whose shadow says "poisoned" calls __asan_report_{load,store}N_noabort,
// which counters.cpp defines (a definition in the executable preempts libasan's). While a
// checker is on, every device allocation and the running block's shared memory carry a shadow
// value of their own, kRouted | k (k: the granule's first k bytes were addressable, 0 for all
// eight), which fails every inline check: each access to them then takes the report path, which
// decodes the shadow, hands a legitimate access to the checkers and returns. A genuine error (a
// redzone, freed memory, a tail that limit_access poisoned) decodes as poisoned: the routing is
// lifted everywhere, so that ASan's report reads the shadow it would have read, and libasan's own
// report function runs (and ends the program, as ASan's halt_on_error does by default).
//
// Host code that reads device memory with memcpy or memset goes through libasan's interceptors,
// which would report the routed shadow; the emulator's own copies use raw_copy and raw_set.
// In builds without AddressSanitizer everything here does nothing (and the checkers that need
// the accesses cannot be turned on).

#include <cstddef>
#include <cstdint>

namespace mtemu::detail {

/// Makes the routing follow memory_hooks (counters.h): on while any checker is on.
void update_routing();

/// A device allocation made (routed at once while the routing is on) or about to be freed (its
/// shadow made addressable again, for free() to poison as ASan does).
void routed_allocation_added(const void* p, std::size_t bytes);
void routed_allocation_removed(const void* p, std::size_t bytes);
/// limit_access: only the first `usable` bytes of the allocation are addressable (ASan poisons
/// the rest), then routed again while the routing is on.
void routed_allocation_limit(const void* p, std::size_t bytes, std::size_t usable);

/// A block's shared memory: routed if the routing is on when the block gets it, restored before
/// it is freed (whatever the routing is by then).
void route_block_memory(const void* p, std::size_t bytes);
void unroute_block_memory(const void* p, std::size_t bytes);

/// Whether [a, a + bytes) is addressable once the routing's marks are decoded (false: a genuine
/// error, or not a routed access at all).
bool routed_access_is_valid(uintptr_t a, std::size_t bytes);

/// Lifts every routing mark (before ASan reports a genuine error), then restores them after.
void lift_routing_for_report();
void restore_routing_after_report();

/// Copies and fills that do not pass libasan's interceptors (glibc's own functions).
void raw_copy(void* dst, const void* src, std::size_t bytes);  // overlapping is fine
void raw_set(void* dst, int value, std::size_t bytes);

}  // namespace mtemu::detail
