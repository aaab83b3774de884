// NVML functions minitrain calls (core/gpu_monitor.cpp), forwarded to the driver's libnvidia-ml
// opened on first use (Note [vendor stubs] in core/vendor/vendor_library.h). Versioned names
// (nvmlInit_v2): nvml.h maps the plain ones onto them, and these are what the library exports.

#include <nvml.h>

#include "core/vendor/forward.h"

MT_VENDOR_FORWARD(nvml, nvmlReturn_t, nvmlInit_v2, (), ())
MT_VENDOR_FORWARD(nvml, const char*, nvmlErrorString, (nvmlReturn_t result), (result))
MT_VENDOR_FORWARD(nvml, nvmlReturn_t, nvmlDeviceGetHandleByPciBusId_v2,
                  (const char* pciBusId, nvmlDevice_t* device), (pciBusId, device))
MT_VENDOR_FORWARD(nvml, nvmlReturn_t, nvmlDeviceGetUtilizationRates,
                  (nvmlDevice_t device, nvmlUtilization_t* utilization), (device, utilization))
MT_VENDOR_FORWARD(nvml, nvmlReturn_t, nvmlDeviceGetMemoryInfo,
                  (nvmlDevice_t device, nvmlMemory_t* memory), (device, memory))
