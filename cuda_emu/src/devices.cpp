// Devices, the current device, errors and kernel launches of the emulated runtime.
//   MINITRAIN_EMU_DEVICES        number of emulated GPUs (default 2; 0 = none)
//   MINITRAIN_EMU_DEVICE_MEMORY  bytes of memory per device (default 2 GiB; K/M/G suffixes)

#include <pthread.h>
#include <sanitizer/common_interface_defs.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "cuda_emu/kernel_registers.h"
#include "block.h"
#include "cuda_emu/occupancy.h"
#include "cuda_emu/testing.h"
#include "grid.h"
#include "cuda_emu/api_counts.h"
#include "initcheck.h"
#include "race.h"
#include "runtime.h"
#include "sanitizer.h"

namespace mtemu::detail {

namespace {

constexpr int kDefaultDevices = 2;
constexpr std::size_t kDefaultMemory = std::size_t(2) << 30;

std::size_t parse_size(const char* v, std::size_t fallback) {
  if (v == nullptr || *v == 0) return fallback;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  switch (end && *end ? *end : 0) {
    case 'k':
    case 'K':
      x *= 1024;
      break;
    case 'm':
    case 'M':
      x *= 1024.0 * 1024;
      break;
    case 'g':
    case 'G':
      x *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return x > 0 ? std::size_t(x) : fallback;
}

void on_sanitizer_death();

// CUDA_VISIBLE_DEVICES as the driver reads it: a comma list of indices, read up to the first one
// that is not a device, the visible ones renumbered from 0 (so `minitrain pipelines` can pin a run
// to one emulated GPU). Each process has its own emulated devices, so only the count matters.
int visible_count(int machine_devices) {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  if (v == nullptr) return machine_devices;
  int count = 0;
  std::vector<bool> seen(std::size_t(std::max(machine_devices, 0)), false);
  for (const char* p = v; *p;) {
    char* end = nullptr;
    const long i = std::strtol(p, &end, 10);
    if (end == p || i < 0 || i >= machine_devices || seen[std::size_t(i)]) break;
    seen[std::size_t(i)] = true;
    ++count;
    p = end;
    if (*p == ',')
      ++p;
    else if (*p)
      break;
  }
  return count;
}

struct Devices {
  std::vector<std::unique_ptr<DeviceState>> list;
  Devices() {
    const char* n = std::getenv("MINITRAIN_EMU_DEVICES");
    const int count = visible_count(n && *n ? std::atoi(n) : kDefaultDevices);
    const std::size_t capacity =
        parse_size(std::getenv("MINITRAIN_EMU_DEVICE_MEMORY"), kDefaultMemory);
    for (int i = 0; i < count; ++i) {
      auto d = std::make_unique<DeviceState>();
      d->index = i;
      d->capacity = capacity;
      d->peer_enabled.assign(count, false);
      list.push_back(std::move(d));
    }
    __sanitizer_set_death_callback(&on_sanitizer_death);
  }
};
Devices& devices() {
  static Devices* d =
      new Devices();  // never destroyed: stream threads may outlive static destructors
  return *d;
}

thread_local int tl_device = 0;
thread_local cudaError_t tl_last = cudaSuccess;
// The emulator's explanation of this thread's latest failure, for cudaGetErrorString of that code.
// Kept when cudaGetLastError clears the error: check macros clear first, then ask for the words.
// Heap strings behind a plain pointer: thread_local objects with destructors die before other
// thread-exit code (core/stream.cpp's stream cleanup) has made its last runtime call. A pthread
// key's destructor frees them, which glibc runs after every thread_local destructor.
thread_local cudaError_t tl_detail_code = cudaSuccess;
struct ThreadText {
  std::string detail, message;
};
thread_local ThreadText* tl_text = nullptr;
pthread_key_t thread_text_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    pthread_key_create(&k, [](void* p) { delete static_cast<ThreadText*>(p); });
    return k;
  }();
  return key;
}
ThreadText& thread_text() {
  if (tl_text == nullptr) {
    tl_text = new ThreadText();
    pthread_setspecific(thread_text_key(), tl_text);
  }
  return *tl_text;
}
std::string& tl_detail_ref() { return thread_text().detail; }
std::string& tl_message_ref() { return thread_text().message; }
#define tl_detail tl_detail_ref()
#define tl_message tl_message_ref()

// Sanitizer reports name the code; this names the GPU thread that ran it.
void on_sanitizer_death() {
  if (ThreadCtx* t = tls_thread.load(std::memory_order_relaxed)) {
    const uint3 b = t->block_idx, th = t->thread_idx;
    std::fprintf(stderr,
                 "cuda-emu: the report above comes from %s block (%u,%u,%u) thread (%u,%u,%u)\n",
                 describe(t->block->grid->site).c_str(), b.x, b.y, b.z, th.x, th.y, th.z);
  }
}

std::mutex attributes_mutex;
std::unordered_map<const void*, std::size_t> max_dynamic_shared;  // by kernel address
std::unordered_map<const void*, std::size_t> static_shared;       // by kernel, once seen
// The launch site of each kernel launched so far (its name and file, for the register table).
std::unordered_map<const void*, LaunchSite> launched_sites;

cudaError_t check_device(int index) {
  if (index < 0 || index >= device_count())
    return fail(cudaErrorInvalidDevice, "device " + std::to_string(index) + " does not exist (" +
                                            std::to_string(device_count()) + " emulated devices; " +
                                            "MINITRAIN_EMU_DEVICES sets how many)");
  return cudaSuccess;
}

}  // namespace

int device_count() { return int(devices().list.size()); }
DeviceState& device(int index) { return *devices().list[index]; }
int current_device() { return tl_device; }

cudaError_t sticky_error(int index) {
  if (index < 0 || index >= device_count()) return cudaSuccess;
  const int e = device(index).sticky.load();
  if (e != cudaSuccess) {
    DeviceState& d = device(index);
    std::lock_guard<std::mutex> lock(d.m);
    tl_last = tl_detail_code = cudaError_t(e);
    tl_detail = "an earlier kernel fault on cuda:" + std::to_string(index) +
                " ended its context: " + d.fault_text;
  }
  return cudaError_t(e);
}

void device_fault(int index, cudaError_t code, const std::string& text) {
  DeviceState& d = device(index);
  {
    std::lock_guard<std::mutex> lock(d.m);
    if (d.sticky.load() != cudaSuccess) return;
    d.fault_text = text;
    d.sticky.store(code);
  }
  std::fprintf(stderr, "cuda-emu: device fault on cuda:%d (%s): %s\n", index,
               cudaGetErrorName(code), text.c_str());
}

cudaError_t fail(cudaError_t code, const std::string& detail) {
  tl_last = tl_detail_code = code;
  tl_detail = detail;
  return code;
}

cudaError_t enqueue_launch(const LaunchSite& site, const LaunchConfig& config, const void* kernel,
                           std::function<void()> body) {
  const int dev = current_device();
  if (cudaError_t e = check_device(dev); e != cudaSuccess) return e;
  if (cudaError_t e = sticky_error(dev); e != cudaSuccess) return e;
  const dim3 b = config.block, g = config.grid;
  const std::string what = "launch of " + describe(site) + " with grid (" + std::to_string(g.x) +
                           "," + std::to_string(g.y) + "," + std::to_string(g.z) + ") and block (" +
                           std::to_string(b.x) + "," + std::to_string(b.y) + "," +
                           std::to_string(b.z) + ")";
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  {
    std::lock_guard<std::mutex> lock(attributes_mutex);
    launched_sites.emplace(kernel, site);
  }
  if (b.x == 0 || b.y == 0 || b.z == 0 || g.x == 0 || g.y == 0 || g.z == 0)
    return fail(cudaErrorInvalidConfiguration, what + ": every dimension must be at least 1");
  if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024)
    return fail(cudaErrorInvalidConfiguration,
                what + ": " + std::to_string(threads) +
                    " threads per block; the limit is 1024 (x, y <= 1024, z <= 64)");
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    return fail(cudaErrorInvalidConfiguration,
                what + ": the grid limits are 2^31-1 x 65535 x 65535 blocks");
  if (site.max_threads > 0 && threads > uint64_t(site.max_threads))
    return fail(cudaErrorLaunchOutOfResources,
                what + ": " + std::to_string(threads) +
                    " threads per block, but the kernel's __launch_bounds__ allow " +
                    std::to_string(site.max_threads));
  // Static and dynamic shared memory count together (the static part as far as the emulator
  // has seen the kernel run; the first block checks the rest, see block_shared).
  std::size_t optin = 0, static_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(attributes_mutex);
    if (auto it = max_dynamic_shared.find(kernel); it != max_dynamic_shared.end())
      optin = it->second;
    if (auto it = static_shared.find(kernel); it != static_shared.end()) static_bytes = it->second;
  }
  const std::size_t smem_limit =
      optin > 0 ? optin
                : shared_per_block_default() - std::min(static_bytes, shared_per_block_default());
  if (config.dynamic_smem > smem_limit)
    return fail(
        cudaErrorInvalidValue,
        what + ": " + std::to_string(config.dynamic_smem) +
            " bytes of dynamic shared memory beside " + std::to_string(static_bytes) +
            " bytes of static; " +
            (optin > 0 ? "the kernel's MaxDynamicSharedMemorySize is " + std::to_string(optin)
                       : "without cudaFuncSetAttribute(kernel, "
                         "cudaFuncAttributeMaxDynamicSharedMemorySize, n) a block has " +
                             std::to_string(shared_per_block_default()) + " bytes in all"));
  std::shared_ptr<CUstream_st> stream = resolve_stream(config.stream, dev);
  if (!stream)
    return fail(cudaErrorInvalidResourceHandle,
                what + ": the stream was destroyed or is not a stream");
  if (stream->device != dev)
    return fail(cudaErrorInvalidResourceHandle,
                what + ": the stream belongs to cuda:" + std::to_string(stream->device) +
                    " but the current device is cuda:" + std::to_string(dev) +
                    " (a missing DeviceGuard)");
  // A fresh Grid each time the operation runs: a captured launch runs again at every replay, with
  // the arguments `body` copied at the launch (as CUDA copies them into the graph's kernel node).
  // racecheck: the copies on other streams this launch is not ordered after (enqueue fills it).
  std::shared_ptr<const RaceCopies> race_copies;
  if (racecheck_on) race_copies = racecheck_expect_launch();
  auto run = [site, kernel, config, body = std::move(body), dev,
              provenance = take_launch_provenance(), race_copies] {
    Grid grid;
    grid.site = site;
    grid.kernel = kernel;
    grid.config = config;
    grid.body = body;
    grid.device = dev;
    grid.provenance = provenance;
    grid.race_copies = race_copies;
    run_grid(grid);
    if (grid.faulted) device_fault(grid.device, grid.fault_code, grid.fault_text);
  };
  const cudaError_t e = enqueue(*stream, std::move(run), {"kernel", site.kernel});
  if (e == cudaSuccess) count_api(ApiEvent::Launch);
  return e;
}

std::size_t dynamic_shared_optin(const void* kernel) {
  std::lock_guard<std::mutex> lock(attributes_mutex);
  auto it = max_dynamic_shared.find(kernel);
  return it == max_dynamic_shared.end() ? 0 : it->second;
}

void note_static_shared(const void* kernel, std::size_t bytes) {
  std::lock_guard<std::mutex> lock(attributes_mutex);
  std::size_t& known = static_shared[kernel];
  known = std::max(known, bytes);
}

}  // namespace mtemu::detail

void mtemu::inject_device_fault(int index, const char* what) {
  if (index < 0 || index >= detail::device_count()) return;
  detail::device_fault(index, cudaErrorLaunchFailure, std::string("injected by a test: ") + what);
}

bool mtemu::peer_access_enabled(int index, int peer) {
  if (index < 0 || index >= detail::device_count() || peer < 0 || peer >= detail::device_count())
    return false;
  detail::DeviceState& d = detail::device(index);
  std::lock_guard<std::mutex> lock(d.m);
  return d.peer_enabled[peer];
}

void mtemu::clear_device_fault(int index) {
  if (index < 0 || index >= detail::device_count()) return;
  detail::DeviceState& d = detail::device(index);
  std::lock_guard<std::mutex> lock(d.m);
  d.fault_text.clear();
  d.sticky.store(cudaSuccess);
}

using namespace mtemu::detail;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = device_count();
  if (*count == 0)
    return fail(cudaErrorNoDevice,
                "no emulated device is visible (MINITRAIN_EMU_DEVICES, CUDA_VISIBLE_DEVICES)");
  return ok();
}

cudaError_t cudaGetDevice(int* index) {
  *index = tl_device;
  return ok();
}

cudaError_t cudaSetDevice(int index) {
  if (cudaError_t e = check_device(index); e != cudaSuccess) return e;
  tl_device = index;
  // As the runtime documents: an error of an earlier asynchronous launch may come back here (the
  // device switches all the same).
  if (cudaError_t e = sticky_error(index); e != cudaSuccess) return e;
  return ok();
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int index) {
  if (cudaError_t e = check_device(index); e != cudaSuccess) return e;
  // The limits and sizes of the device profile MINITRAIN_EMU_DEVICE selects (default H100 SXM,
  // cuda_emu/occupancy.h); the memory is the emulator's own. The emulator's launch checks keep
  // H100's shared-memory limits (grid.h) whatever the profile.
  const mtemu::DeviceProfile* prof = nullptr;
  try {
    prof = &mtemu::current_device_profile();
  } catch (const std::invalid_argument& err) {
    return fail(cudaErrorInvalidValue, std::string("MINITRAIN_EMU_DEVICE: ") + err.what());
  }
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "minitrain emulated GPU: %s", prof->name);
  p->totalGlobalMem = device(index).capacity;
  p->sharedMemPerBlock = prof->smem_per_block;
  p->sharedMemPerBlockOptin = prof->smem_per_block_optin;
  p->regsPerBlock = prof->regs_per_block;
  p->warpSize = 32;
  p->maxThreadsPerBlock = prof->max_threads_per_block;
  p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
  p->clockRate = prof->sm_clock_khz;
  p->l2CacheSize = int(prof->l2_bytes);
  p->major = prof->major, p->minor = prof->minor;
  p->multiProcessorCount = prof->sms;
  p->maxThreadsPerMultiProcessor = prof->max_threads_per_sm;
  p->unifiedAddressing = 1;
  return ok();
}

cudaError_t cudaDeviceSynchronize(void) {
  BlockingCall blocking;
  const int dev = tl_device;
  if (cudaError_t e = check_device(dev); e != cudaSuccess) return e;
  if (cudaError_t e = check_unsafe_call("cudaDeviceSynchronize"); e != cudaSuccess) return e;
  synchronize_device(dev);
  if (cudaError_t e = sticky_error(dev); e != cudaSuccess) return e;
  return ok();
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int index, int peer) {
  if (cudaError_t e = check_device(index); e != cudaSuccess) return e;
  if (cudaError_t e = check_device(peer); e != cudaSuccess) return e;
  *can = index != peer ? 1 : 0;
  return ok();
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  const int dev = tl_device;
  if (cudaError_t e = check_device(peer); e != cudaSuccess) return e;
  if (flags != 0) return fail(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess: flags must be 0");
  if (peer == dev)
    return fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess: a device is not its own peer");
  DeviceState& d = device(dev);
  std::lock_guard<std::mutex> lock(d.m);
  if (d.peer_enabled[peer])
    return fail(cudaErrorPeerAccessAlreadyEnabled, "peer access from cuda:" + std::to_string(dev) +
                                                       " to cuda:" + std::to_string(peer) +
                                                       " is already enabled");
  d.peer_enabled[peer] = true;
  return ok();
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = 0;  // no NVIDIA runtime: `minitrain info` says "emulated"
  return ok();
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = 0;
  return ok();
}

cudaError_t cudaGetLastError(void) {
  if (cudaError_t e = sticky_error(tl_device); e != cudaSuccess) return e;
  const cudaError_t e = tl_last;
  tl_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) {
  if (cudaError_t e = sticky_error(tl_device); e != cudaSuccess) return e;
  return tl_last;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
#define MTEMU_NAME(x) \
  case x:             \
    return #x;
    MTEMU_NAME(cudaSuccess)
    MTEMU_NAME(cudaErrorInvalidValue)
    MTEMU_NAME(cudaErrorMemoryAllocation)
    MTEMU_NAME(cudaErrorInitializationError)
    MTEMU_NAME(cudaErrorInvalidConfiguration)
    MTEMU_NAME(cudaErrorInvalidMemcpyDirection)
    MTEMU_NAME(cudaErrorInsufficientDriver)
    MTEMU_NAME(cudaErrorInvalidDeviceFunction)
    MTEMU_NAME(cudaErrorNoDevice)
    MTEMU_NAME(cudaErrorInvalidDevice)
    MTEMU_NAME(cudaErrorInvalidResourceHandle)
    MTEMU_NAME(cudaErrorIllegalState)
    MTEMU_NAME(cudaErrorNotReady)
    MTEMU_NAME(cudaErrorIllegalAddress)
    MTEMU_NAME(cudaErrorLaunchOutOfResources)
    MTEMU_NAME(cudaErrorPeerAccessAlreadyEnabled)
    MTEMU_NAME(cudaErrorPeerAccessNotEnabled)
    MTEMU_NAME(cudaErrorIllegalInstruction)
    MTEMU_NAME(cudaErrorMisalignedAddress)
    MTEMU_NAME(cudaErrorLaunchFailure)
    MTEMU_NAME(cudaErrorNotSupported)
    MTEMU_NAME(cudaErrorStreamCaptureUnsupported)
    MTEMU_NAME(cudaErrorStreamCaptureInvalidated)
    MTEMU_NAME(cudaErrorStreamCaptureMerge)
    MTEMU_NAME(cudaErrorStreamCaptureUnmatched)
    MTEMU_NAME(cudaErrorStreamCaptureUnjoined)
    MTEMU_NAME(cudaErrorStreamCaptureIsolation)
    MTEMU_NAME(cudaErrorStreamCaptureImplicit)
    MTEMU_NAME(cudaErrorStreamCaptureWrongThread)
    MTEMU_NAME(cudaErrorUnknown)
#undef MTEMU_NAME
  }
  return "cudaErrorUnknown";
}

// The runtime's sentence, plus the emulator's detail when this thread's last failure had one.
const char* cudaGetErrorString(cudaError_t e) {
  const char* base = "unknown error";
  switch (e) {
    case cudaSuccess:
      base = "no error";
      break;
    case cudaErrorInvalidValue:
      base = "invalid argument";
      break;
    case cudaErrorMemoryAllocation:
      base = "out of memory";
      break;
    case cudaErrorInitializationError:
      base = "initialization error";
      break;
    case cudaErrorInvalidConfiguration:
      base = "invalid configuration argument";
      break;
    case cudaErrorInvalidMemcpyDirection:
      base = "invalid copy direction for memcpy";
      break;
    case cudaErrorInsufficientDriver:
      base = "CUDA driver version is insufficient for CUDA runtime version";
      break;
    case cudaErrorInvalidDeviceFunction:
      base = "invalid device function";
      break;
    case cudaErrorNoDevice:
      base = "no CUDA-capable device is detected";
      break;
    case cudaErrorInvalidDevice:
      base = "invalid device ordinal";
      break;
    case cudaErrorInvalidResourceHandle:
      base = "invalid resource handle";
      break;
    case cudaErrorNotReady:
      base = "device not ready";
      break;
    case cudaErrorIllegalAddress:
      base = "an illegal memory access was encountered";
      break;
    case cudaErrorLaunchOutOfResources:
      base = "too many resources requested for launch";
      break;
    case cudaErrorPeerAccessAlreadyEnabled:
      base = "peer access is already enabled";
      break;
    case cudaErrorPeerAccessNotEnabled:
      base = "peer access has not been enabled";
      break;
    case cudaErrorIllegalInstruction:
      base = "an illegal instruction was encountered";
      break;
    case cudaErrorMisalignedAddress:
      base = "misaligned address";
      break;
    case cudaErrorLaunchFailure:
      base = "unspecified launch failure";
      break;
    case cudaErrorNotSupported:
      base = "operation not supported";
      break;
    case cudaErrorIllegalState:
      base = "the operation cannot be performed in the present state";
      break;
    case cudaErrorStreamCaptureUnsupported:
      base = "operation not permitted when stream is capturing";
      break;
    case cudaErrorStreamCaptureInvalidated:
      base = "operation failed due to a previous error during capture";
      break;
    case cudaErrorStreamCaptureMerge:
      base = "operation would result in a merge of separate capture sequences";
      break;
    case cudaErrorStreamCaptureUnmatched:
      base = "capture was not ended in the same stream as it began";
      break;
    case cudaErrorStreamCaptureUnjoined:
      base = "capturing stream has unjoined work";
      break;
    case cudaErrorStreamCaptureIsolation:
      base = "dependency created on uncaptured work in another stream";
      break;
    case cudaErrorStreamCaptureImplicit:
      base = "operation would make the legacy stream depend on a capturing blocking stream";
      break;
    case cudaErrorStreamCaptureWrongThread:
      base = "attempt to terminate a thread-local capture sequence from another thread";
      break;
    case cudaErrorUnknown:
      break;
  }
  if (e == tl_detail_code && !tl_detail.empty()) {
    tl_message = std::string(base) + " [emulated: " + tl_detail + "]";
    return tl_message.c_str();
  }
  return base;
}

cudaError_t mtemu_func_set_attribute(const void* func, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
    return fail(cudaErrorInvalidValue,
                "cudaFuncSetAttribute: the emulator knows MaxDynamicSharedMemorySize only");
  if (value < 0 || std::size_t(value) > shared_per_block_optin())
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                           " bytes of dynamic shared memory; at most " +
                                           std::to_string(shared_per_block_optin()));
  std::lock_guard<std::mutex> lock(attributes_mutex);
  if (auto it = static_shared.find(func);
      it != static_shared.end() && it->second + std::size_t(value) > shared_per_block_optin())
    return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                           " bytes of dynamic shared memory beside the kernel's " +
                                           std::to_string(it->second) +
                                           " bytes of static; a block has at most " +
                                           std::to_string(shared_per_block_optin()) + " in all");
  max_dynamic_shared[func] = std::size_t(value);
  return ok();
}

cudaError_t mtemu_occupancy_max_active_blocks(int* num_blocks, const void* func, int block_size,
                                              std::size_t dynamic_smem, unsigned int flags) {
  if (num_blocks == nullptr || func == nullptr)
    return fail(cudaErrorInvalidValue,
                "cudaOccupancyMaxActiveBlocksPerMultiprocessor: null numBlocks or func");
  const mtemu::DeviceProfile& p = mtemu::current_device_profile();
  if (block_size <= 0 || block_size > p.max_threads_per_block)
    return fail(cudaErrorInvalidValue,
                "cudaOccupancyMaxActiveBlocksPerMultiprocessor: block size " +
                    std::to_string(block_size) + " is not 1 to " +
                    std::to_string(p.max_threads_per_block));
  (void)flags;  // cudaOccupancyDisableCachingOverride: no caching model, the same figure
  std::size_t static_bytes = 0;
  const mtemu::KernelRegisters* regs = nullptr;
  {
    std::lock_guard<std::mutex> lock(attributes_mutex);
    if (auto it = static_shared.find(func); it != static_shared.end()) static_bytes = it->second;
    if (auto it = launched_sites.find(func); it != launched_sites.end())
      regs = mtemu::kernel_registers(it->second.file, it->second.kernel);
  }
  if (regs != nullptr) static_bytes = std::max(static_bytes, regs->static_smem_max);
  if (regs == nullptr) {
    static std::once_flag said;
    std::call_once(said, [] {
      std::fprintf(stderr,
                   "cuda-emu: cudaOccupancyMaxActiveBlocksPerMultiprocessor: the kernel's "
                   "registers are unknown (not in cuda_emu/kernel_registers.tsv, or not launched "
                   "yet in this process): the register limit is left out, the figure is an upper "
                   "bound\n");
    });
  }
  const mtemu::Occupancy o = mtemu::theoretical_occupancy(
      p, block_size, regs != nullptr ? regs->registers_max : -1, static_bytes + dynamic_smem);
  *num_blocks = o.blocks_per_sm;
  return ok();
}

}  // extern "C"

#if MTEMU_ASAN
// gcc links UBSan's runtime apart from ASan's, so on_sanitizer_death (registered with ASan's)
// does not run for a UBSan report: its stack is what names the kernel, so print it by default
// (UBSAN_OPTIONS still overrides this).
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1"; }
#endif
