#include "core/caching_allocator.h"

#include <exception>

#include "core/bytes.h"
#include "core/error.h"

namespace minitrain {

namespace {
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kSmallLimit = 1 << 20;
constexpr std::size_t kLargeRound = 2 << 20;
}  // namespace

CachingAllocator::CachingAllocator(std::string device_name, std::unique_ptr<RawMemory> raw)
    : device_name_(std::move(device_name)), raw_(std::move(raw)) {}

CachingAllocator::~CachingAllocator() {
  // Process exit: the device may already be shutting down, so release without synchronising.
  for (auto& [ptr, block] : cached_) raw_->raw_free(ptr);
  for (auto& [id, pool] : pools_)
    for (auto& [size, ptr] : pool.free) raw_->raw_free(ptr);
}

std::size_t CachingAllocator::round_size(std::size_t bytes) noexcept {
  if (bytes == 0) return kSmallRound;
  if (bytes < kSmallLimit) return (bytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

// Best fit among this stream's cached blocks, but never more than twice the request: a huge
// cached block serving a tiny tensor would pin memory the next large request needs.
void* CachingAllocator::take_cached_locked(std::size_t size, const void* stream, Block* block) {
  auto it = free_.lower_bound({stream, size});
  if (it == free_.end() || it->first.first != stream || it->first.second > 2 * size) return nullptr;
  void* p = it->second;
  *block = cached_.at(p);
  free_.erase(it);
  cached_.erase(p);
  return p;
}

void* CachingAllocator::hand_out_locked(void* p, const Block& block, std::size_t bytes) {
  live_.emplace(p, block);
  stats_.cached -= block.size;
  stats_.in_use += block.size;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  ++stats_.live_blocks;
  ++stats_.allocations;
  raw_->on_handout(p, bytes, block.size, block.stream);
  return p;
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = round_size(bytes);
  const void* stream = raw_->current_stream();
  std::lock_guard<std::mutex> lock(mutex_);

  uint64_t pool_id = 0;  // the pool capturing on this stream, if any
  for (auto& [id, pool] : pools_) {
    if (!pool.capturing || pool.stream != stream || pool.thread != std::this_thread::get_id())
      continue;
    pool_id = id;
    // The best fit among the pool's free blocks and the cache's, as an eager step's request finds
    // it among all the blocks its step freed: taking a looser pool block while the cache holds a
    // closer one would leave a later, larger request of the capture with no block (a cudaMalloc).
    auto it = pool.free.lower_bound(size);
    const auto cached = free_.lower_bound({stream, size});
    const bool cache_fits =
        cached != free_.end() && cached->first.first == stream && cached->first.second <= 2 * size;
    if (it != pool.free.end() && it->first <= 2 * size &&
        (!cache_fits || it->first <= cached->first.second)) {
      void* p = it->second;
      const std::size_t block_size = it->first;
      pool.free.erase(it);
      return hand_out_locked(p, Block{block_size, stream, id}, bytes);
    }
    break;
  }
  Block block{};
  if (void* p = take_cached_locked(size, stream, &block)) {
    block.pool = pool_id;
    return hand_out_locked(p, block, bytes);
  }

  if (stats_.cap != 0 && stats_.in_use + stats_.cached + size > stats_.cap) {
    release_cache_locked();
    if (stats_.in_use + size > stats_.cap) throw_oom_locked(bytes, size, "the memory cap");
  }
  void* p = raw_->raw_alloc(size);
  if (p == nullptr) {
    release_cache_locked();
    p = raw_->raw_alloc(size);
    if (p == nullptr) throw_oom_locked(bytes, size, "the device's memory");
  }
  ++stats_.raw_allocs;
  stats_.cached += size;  // hand_out_locked moves it from cached to in use
  return hand_out_locked(p, Block{size, stream, pool_id}, bytes);
}

void CachingAllocator::deallocate(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not ours: ignoring beats corrupting the pool
  const Block block = it->second;
  live_.erase(it);
  auto pool = block.pool == 0 ? pools_.end() : pools_.find(block.pool);
  if (pool != pools_.end()) {
    pool->second.free.emplace(block.size, p);
  } else {
    cached_.emplace(p, Block{block.size, block.stream, 0});
    free_.emplace(std::make_pair(block.stream, block.size), p);
  }
  stats_.in_use -= block.size;
  stats_.cached += block.size;
  --stats_.live_blocks;
  raw_->on_handout(p, 0, block.size, block.stream);
}

uint64_t CachingAllocator::capture_pool_here() {
  // Note [capture_pool_here without the lock]: no capture anywhere, none here.
  if (capturing_pools_.load(std::memory_order_relaxed) == 0) return 0;
  const void* stream = raw_->current_stream();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, pool] : pools_)
    if (pool.capturing && pool.stream == stream && pool.thread == std::this_thread::get_id())
      return id;
  return 0;
}

bool CachingAllocator::pool_alive(uint64_t id) const {
  if (live_pools_.load(std::memory_order_relaxed) == 0) return false;  // as capture_pool_here
  std::lock_guard<std::mutex> lock(mutex_);
  return pools_.count(id) != 0;
}

uint64_t CachingAllocator::begin_pool(const void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_pool_++;
  pools_[id].stream = stream;
  pools_[id].thread = std::this_thread::get_id();
  capturing_pools_.fetch_add(1, std::memory_order_relaxed);
  live_pools_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void CachingAllocator::end_pool_capture(uint64_t pool) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end() || !it->second.capturing) return;
  it->second.capturing = false;
  capturing_pools_.fetch_sub(1, std::memory_order_relaxed);
}

void CachingAllocator::release_pool(uint64_t pool) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  for (auto& [ptr, block] : live_)
    if (block.pool == pool) block.pool = 0;
  if (it->second.capturing) capturing_pools_.fetch_sub(1, std::memory_order_relaxed);
  live_pools_.fetch_sub(1, std::memory_order_relaxed);
  const void* stream = it->second.stream;
  for (const auto& [size, ptr] : it->second.free) {
    cached_.emplace(ptr, Block{size, stream, 0});
    free_.emplace(std::make_pair(stream, size), ptr);
  }
  pools_.erase(it);
}

uint64_t CachingAllocator::pool_bytes(uint64_t pool) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return 0;
  uint64_t bytes = 0;
  for (const auto& [size, ptr] : it->second.free) bytes += size;
  for (const auto& [ptr, block] : live_)
    if (block.pool == pool) bytes += block.size;
  return bytes;
}

void CachingAllocator::release_cache_locked() {
  if (cached_.empty()) return;
  // Queued kernels may still read blocks that their tensors freed. If waiting fails (a device
  // fault), nothing has changed yet: the cache stays whole and consistent.
  raw_->synchronize();
  std::unordered_map<void*, Block> released;
  released.swap(cached_);
  free_.clear();
  for (const auto& [ptr, block] : released) stats_.cached -= block.size;  // pools keep theirs
  // Every block is given back even when one free fails; the first failure is reported after.
  std::exception_ptr first_failure;
  for (auto& [ptr, block] : released) {
    try {
      raw_->raw_free(ptr);
    } catch (...) {
      if (!first_failure) first_failure = std::current_exception();
    }
  }
  if (first_failure) std::rethrow_exception(first_failure);
}

void CachingAllocator::throw_oom_locked(std::size_t requested, std::size_t rounded,
                                        const char* why) {
  const uint64_t cap = stats_.cap;
  const uint64_t under_cap = cap == 0 ? 0 : (cap > stats_.in_use ? cap - stats_.in_use : 0);
  MT_THROW(OutOfMemory, device_name_, ": out of memory allocating ", format_bytes(requested),
           " (block ", format_bytes(rounded), ") beyond ", why, ": in use ",
           format_bytes(stats_.in_use), ", device free ", format_bytes(raw_->device_free_bytes()),
           cap == 0 ? std::string(", no cap")
                    : ", free under cap " + format_bytes(under_cap) + ", cap " + format_bytes(cap),
           "; reduce the batch size or the model",
           cap == 0 ? "" : ", or raise the cap (MINITRAIN_CUDA_MEMORY_CAP)");
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::set_cap(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.cap = bytes;
  if (bytes != 0 && stats_.in_use + stats_.cached > bytes) release_cache_locked();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cache_locked();
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.in_use;
}

}  // namespace minitrain
