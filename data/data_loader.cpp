// The DataLoader: epoch orders from Philox counters, batches gathered on a background thread into
// a bounded queue, and on a GPU pinned staging buffers with asynchronous copies on the consumer's
// stream. The producer never runs more than `prefetch` batches ahead.
//
// Note [data loader streams]: a device batch is allocated under a StreamGuard of the consumer's
// stream (the current stream of options.device on the thread that built the loader), so that the
// caching allocator ties its block to the stream that will use and free it (Note [streams and the
// caching allocator] in core/caching_allocator.h); the copy is queued on that same stream, so the
// consumer's kernels are ordered after it with no extra wait. A pinned buffer is refilled only
// after the Event recorded behind its copy has completed.

#include "data/data_loader.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/philox.h"
#include "core/stream.h"

namespace minitrain {

namespace {

// The high 64 bits of a * b, in plain C++ (no __int128 under -Wpedantic).
uint64_t mulhi64(uint64_t a, uint64_t b) {
  const uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32;
  const uint64_t b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
  const uint64_t p0 = a_lo * b_lo, p1 = a_lo * b_hi, p2 = a_hi * b_lo, p3 = a_hi * b_hi;
  const uint64_t mid = (p0 >> 32) + (p1 & 0xFFFFFFFFu) + (p2 & 0xFFFFFFFFu);
  return p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32);
}

// Tags the shuffle's counters so that they never meet those of a Generator with the same seed
// (whose counters have zero upper words: Note [Philox stream layout]); "SHUF" in ASCII.
constexpr uint32_t kShuffleTag = 0x53485546u;

}  // namespace

// Note [epoch order]: Fisher-Yates from the back, step k (swapping position i = n-1-k with a
// j in [0, i]) draws 64 random bits from Philox block k / 2 (words 0-1 for even k, 2-3 for odd
// k) with counter {k/2 low, k/2 high, epoch low, epoch high ^ "SHUF"} and key = seed, and maps
// them to j = floor(bits * (i + 1) / 2^64) (Lemire's multiply; the bias, (i + 1) / 2^64, is far
// below anything measurable). The order is a pure function of (n, seed, epoch).
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
  MT_CHECK_AS(ValueError, n >= 0, "epoch_order: n must be >= 0, got ", n);
  MT_CHECK_AS(ValueError, epoch >= 0, "epoch_order: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t(0));
  if (!shuffle || n < 2) return order;
  const auto e = static_cast<uint64_t>(epoch);
  const philox::Key key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  philox::Block bits{};
  for (int64_t i = n - 1, k = 0; i > 0; --i, ++k) {
    const int lane = static_cast<int>(k & 1);
    if (lane == 0) {
      const auto c = static_cast<uint64_t>(k >> 1);
      const philox::Block ctr{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32),
                               static_cast<uint32_t>(e),
                               static_cast<uint32_t>(e >> 32) ^ kShuffleTag}};
      bits = philox::philox4x32(ctr, key);
    }
    const uint64_t r = (static_cast<uint64_t>(bits.w[2 * lane]) << 32) | bits.w[2 * lane + 1];
    const auto j = static_cast<int64_t>(mulhi64(r, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

struct DataLoader::Impl {
  // A pinned host buffer pair for GPU batches, refilled once the copies out of it are done.
  struct Staging {
    Tensor x, y;  // [batch_size, in], [batch_size, out]
    Event copied;
    bool pending = false;  // `copied` was recorded and may not have completed
  };
  // A prepared batch, or the exception preparing it threw.
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };

  Impl(std::shared_ptr<const Dataset> ds, const DataLoaderOptions& opt)
      : dataset(std::move(ds)), options(opt) {}

  // ---- fixed at construction ----
  std::shared_ptr<const Dataset> dataset;
  DataLoaderOptions options;
  int64_t n = 0, in_dim = 0, out_dim = 0, per_epoch = 0;
  int64_t epoch_rows = 0;                   // indices per epoch: n, or the sampler's size()
  const Stream* consumer_stream = nullptr;  // GPU only (Note [data loader streams])

  // ---- touched only by the thread that prepares batches (the worker, or next() without one) ----
  int64_t order_epoch = -1;
  std::vector<int64_t> order;
  std::vector<Staging> staging;
  std::size_t next_staging = 0;

  // ---- shared, under `mu` ----
  std::mutex mu;
  std::condition_variable wake_worker, wake_consumer;
  std::deque<Item> ready;
  int64_t epoch = 0, index = 0;  // the next batch to prepare
  uint64_t generation = 0;       // bumped by seek: batches of an older generation are dropped
  bool stop = false;
  bool error_waiting = false;  // an error is in `ready`: the worker retries once it is taken
  std::thread worker;

  void advance(int64_t& e, int64_t& i) const {
    if (++i == per_epoch) {
      i = 0;
      ++e;
    }
  }

  Staging& acquire_staging() {
    if (staging.empty()) {
      const std::size_t count = static_cast<std::size_t>(std::max(2, options.prefetch + 2));
      staging.reserve(count);
      for (std::size_t s = 0; s < count; ++s)
        staging.push_back(Staging{Tensor(), Tensor(), Event::create(options.device), false});
    }
    Staging& s = staging[next_staging];
    next_staging = (next_staging + 1) % staging.size();
    if (s.pending) {
      s.copied.synchronize();  // the consumer's stream has not reached this buffer's copy yet
      s.pending = false;
    }
    if (!s.x.defined()) {
      s.x = Tensor::empty_pinned({options.batch_size, in_dim});
      s.y = Tensor::empty_pinned({options.batch_size, out_dim});
    }
    return s;
  }

  Batch make_batch(int64_t e, int64_t i) {
    if (order_epoch != e) {
      order = options.sampler ? options.sampler->indices(e)
                              : epoch_order(n, options.shuffle, options.seed, e);
      MT_CHECK_AS(ValueError, static_cast<int64_t>(order.size()) == epoch_rows,
                  "DataLoader: the sampler gave ", order.size(), " indices for epoch ", e,
                  " but says an epoch has ", epoch_rows, "; its indices() and size() must agree");
      order_epoch = e;
    }
    const int64_t begin = i * options.batch_size;
    const int64_t k = std::min(options.batch_size, epoch_rows - begin);
    const std::vector<int64_t> rows(order.begin() + begin, order.begin() + begin + k);
    Batch b;
    b.epoch = e;
    b.index = i;
    if (options.device.is_cpu()) {
      b.x = Tensor::empty({k, in_dim});
      b.y = Tensor::empty({k, out_dim});
      dataset->gather(rows, b.x, b.y);
      return b;
    }
    Staging& s = acquire_staging();
    Tensor xh = s.x.narrow(0, k), yh = s.y.narrow(0, k);
    dataset->gather(rows, xh, yh);
    const Stream& stream = *consumer_stream;
    DeviceGuard device_guard(options.device);
    StreamGuard stream_guard(stream);
    b.x = Tensor::empty({k, in_dim}, DType::Float32, options.device);
    b.y = Tensor::empty({k, out_dim}, DType::Float32, options.device);
    copy_bytes_async(b.x.raw_data(), options.device, xh.raw_data(), Device::cpu(), xh.nbytes(),
                     stream);
    copy_bytes_async(b.y.raw_data(), options.device, yh.raw_data(), Device::cpu(), yh.nbytes(),
                     stream);
    s.copied.record(stream);
    s.pending = true;
    return b;
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake_worker.wait(lock, [&] {
        return stop ||
               (!error_waiting && ready.size() < static_cast<std::size_t>(options.prefetch));
      });
      if (stop) return;
      const int64_t e = epoch, i = index;
      const uint64_t gen = generation;
      lock.unlock();
      Item item;
      try {
        item.batch = make_batch(e, i);
      } catch (...) {
        item.error = std::current_exception();
      }
      lock.lock();
      if (stop) return;
      if (gen != generation) continue;  // a seek came in meanwhile: this batch is not wanted
      if (item.error) {
        error_waiting = true;  // the same batch is tried again once next() has thrown this
      } else {
        advance(epoch, index);
      }
      ready.push_back(std::move(item));
      wake_consumer.notify_one();
    }
  }

  void shut_down() noexcept {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    wake_worker.notify_all();
    if (worker.joinable()) worker.join();
    ready.clear();
    // Pinned blocks go back to a cache that hands them out again: let their copies finish first.
    for (Staging& s : staging) {
      try {
        if (s.pending) s.copied.synchronize();
      } catch (...) {
      }
    }
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : options_(options) {
  MT_CHECK_AS(ValueError, dataset != nullptr, "DataLoader: the dataset is null");
  MT_CHECK_AS(ValueError, options.batch_size >= 1,
              "DataLoader: batch size must be at least 1, got ", options.batch_size);
  MT_CHECK_AS(ValueError, options.prefetch >= 0, "DataLoader: prefetch must be >= 0, got ",
              options.prefetch);
  const int64_t n = dataset->size();
  MT_CHECK_AS(ValueError, n >= 1, "DataLoader: the dataset is empty");
  if (options.sampler)
    MT_CHECK_AS(ValueError, options.sampler->source_size() == n,
                "DataLoader: the sampler draws from ", options.sampler->source_size(),
                " rows but the dataset has ", n,
                "; build the sampler for this dataset (one weight per row)");
  const int64_t rows = options.sampler ? options.sampler->size() : n;
  MT_CHECK_AS(ValueError, !options.drop_last || rows >= options.batch_size,
              "DataLoader: drop_last with ", rows, " samples and batch size ", options.batch_size,
              " leaves no batch; use a batch size of at most ", rows, " or keep the partial batch");
  check_available(options.device);
  impl_ = std::make_unique<Impl>(std::move(dataset), options);
  impl_->n = n;
  impl_->epoch_rows = rows;
  impl_->in_dim = impl_->dataset->feature_dim();
  impl_->out_dim = impl_->dataset->target_dim();
  impl_->per_epoch = options.drop_last ? rows / options.batch_size
                                       : (rows + options.batch_size - 1) / options.batch_size;
  if (options.device.is_cuda()) impl_->consumer_stream = &current_stream(options.device);
}

DataLoader::~DataLoader() {
  if (impl_) impl_->shut_down();
}

int64_t DataLoader::batches_per_epoch() const noexcept { return impl_->per_epoch; }

Batch DataLoader::next() {
  Impl& m = *impl_;
  if (options_.prefetch == 0) {
    Batch b = m.make_batch(m.epoch, m.index);
    m.advance(m.epoch, m.index);
    return b;
  }
  std::unique_lock<std::mutex> lock(m.mu);
  if (!m.worker.joinable()) m.worker = std::thread([&m] { m.worker_loop(); });
  m.wake_consumer.wait(lock, [&] { return !m.ready.empty(); });
  Impl::Item item = std::move(m.ready.front());
  m.ready.pop_front();
  if (item.error) m.error_waiting = false;
  lock.unlock();
  m.wake_worker.notify_one();
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.batch);
}

void DataLoader::seek(int64_t epoch, int64_t index) {
  Impl& m = *impl_;
  MT_CHECK_AS(ValueError, epoch >= 0, "DataLoader::seek: epoch must be >= 0, got ", epoch);
  MT_CHECK_AS(ValueError, index >= 0 && index < m.per_epoch, "DataLoader::seek: batch index ",
              index, " is out of range; an epoch has ", m.per_epoch, " batches (0 to ",
              m.per_epoch - 1, ")");
  std::deque<Impl::Item> dropped;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    dropped.swap(m.ready);
    m.epoch = epoch;
    m.index = index;
    ++m.generation;
    m.error_waiting = false;
  }
  m.wake_worker.notify_one();
}

}  // namespace minitrain
