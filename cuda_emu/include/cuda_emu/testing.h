#pragma once
// Hooks for the emulator's own tests, which provoke faults on purpose. Not CUDA API: a real GPU
// has no way back from a device fault but a new process.

#include "cuda_runtime_api.h"

namespace mtemu {
/// Forgets the fault that ended device `index`'s context, so the next test can use the device.
void clear_device_fault(int index);
/// Ends device `index`'s context as a faulting kernel would (cudaErrorLaunchFailure, sticky).
void inject_device_fault(int index, const char* what);
/// Whether cudaDeviceEnablePeerAccess(peer) was called with `index` current.
bool peer_access_enabled(int index, int peer);
/// Sleeps `microseconds` before each operation of `stream` (0 stops): makes work queued on
/// another stream overtake this one's, as it may on a GPU.
void set_stream_delay(cudaStream_t stream, long microseconds);
}  // namespace mtemu
