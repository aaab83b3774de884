// The DataLoader: epoch orders from Philox counters, batches prepared by worker threads into a
// window of numbered slots, and on a GPU pinned staging buffers (data/pinned_staging.h) with
// asynchronous copies on the consumer's stream.
//
// Note [ordered workers]: batch s of the sequence since the last seek (s = 0, 1, ...) is claimed
// by one worker, prepared outside the lock and filed under s; next() returns s only when every
// batch before it has been returned, so the order never depends on which worker was faster, and
// a batch is a pure function of its (epoch, index), so its contents do not either. Workers claim
// s only while s < delivered + workers x prefetch: the window bounds the memory held ahead. A
// batch whose preparation threw is filed with its exception; next() re-throws it in its turn,
// keeps its position, and queues s to be prepared again (the retry), while the batches after it
// stay prepared. A seek starts a new generation: results of an older one are dropped.
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
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/philox.h"
#include "core/stream.h"
#include "data/pinned_staging.h"

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
  // A prepared batch, or the exception preparing it threw.
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };
  // An epoch's row order, shared by the workers preparing its batches.
  struct EpochOrder {
    int64_t epoch = -1;
    std::shared_ptr<const std::vector<int64_t>> rows;
    uint64_t last_use = 0;
  };

  Impl(std::shared_ptr<const Dataset> ds, const DataLoaderOptions& opt)
      : dataset(std::move(ds)), options(opt) {}

  // ---- fixed at construction ----
  std::shared_ptr<const Dataset> dataset;
  DataLoaderOptions options;
  int64_t n = 0, in_dim = 0, out_dim = 0, per_epoch = 0;
  int64_t epoch_rows = 0;                  // indices per epoch: n, or the sampler's size()
  int64_t window = 0;                      // batches ready or in preparation beyond the consumer
  std::unique_ptr<PinnedStaging> staging;  // GPU only (Note [data loader streams])

  // ---- epoch orders: two cached (a window may straddle an epoch's end), under order_mu ----
  std::mutex order_mu;
  EpochOrder orders[2];
  uint64_t order_uses = 0;

  // ---- shared, under `mu` (Note [ordered workers]) ----
  std::mutex mu;
  std::condition_variable wake_workers, wake_consumer;
  int64_t base_epoch = 0, base_index = 0;  // the position of sequence 0 (the last seek)
  int64_t delivered = 0;                   // the sequence next() returns next
  int64_t claimed = 0;                     // the next sequence a worker takes
  std::deque<int64_t> retry;               // sequences whose error next() threw: prepared again
  std::map<int64_t, Item> done;            // prepared, waiting for their turn
  uint64_t generation = 0;                 // bumped by seek
  bool stop = false;
  std::vector<std::thread> workers;

  // The (epoch, index) of sequence s: base + s batches, without a product that could overflow.
  void position(int64_t s, int64_t& e, int64_t& i) const {
    const int64_t from_epoch_start = base_index + s;
    e = base_epoch + from_epoch_start / per_epoch;
    i = from_epoch_start % per_epoch;
  }

  std::shared_ptr<const std::vector<int64_t>> order_for(int64_t e) {
    std::lock_guard<std::mutex> lock(order_mu);
    EpochOrder* oldest = &orders[0];
    for (EpochOrder& o : orders) {
      if (o.rows && o.epoch == e) {
        o.last_use = ++order_uses;
        return o.rows;
      }
      if (o.last_use < oldest->last_use) oldest = &o;
    }
    auto rows = std::make_shared<const std::vector<int64_t>>(
        options.sampler ? options.sampler->indices(e)
                        : epoch_order(n, options.shuffle, options.seed, e));
    MT_CHECK_AS(ValueError, static_cast<int64_t>(rows->size()) == epoch_rows,
                "DataLoader: the sampler gave ", rows->size(), " indices for epoch ", e,
                " but says an epoch has ", epoch_rows, "; its indices() and size() must agree");
    *oldest = EpochOrder{e, rows, ++order_uses};  // a worker still using the old one keeps it
    return rows;
  }

  Batch make_batch(int64_t e, int64_t i) {
    const std::shared_ptr<const std::vector<int64_t>> order = order_for(e);
    const int64_t begin = i * options.batch_size;
    const int64_t k = std::min(options.batch_size, epoch_rows - begin);
    const std::vector<int64_t> rows(order->begin() + begin, order->begin() + begin + k);
    Batch b;
    b.epoch = e;
    b.index = i;
    if (options.device.is_cpu()) {
      b.x = Tensor::empty({k, in_dim});
      b.y = Tensor::empty({k, out_dim});
      dataset->gather(rows, b.x, b.y);
      return b;
    }
    staging->stage(
        k, [&](Tensor& xh, Tensor& yh) { dataset->gather(rows, xh, yh); }, b.x, b.y);
    return b;
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake_workers.wait(lock,
                        [&] { return stop || !retry.empty() || claimed < delivered + window; });
      if (stop) return;
      int64_t s = 0;
      if (!retry.empty()) {
        s = retry.front();
        retry.pop_front();
      } else {
        s = claimed++;
      }
      const uint64_t gen = generation;
      int64_t e = 0, i = 0;
      position(s, e, i);
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
      done.emplace(s, std::move(item));
      if (s == delivered) wake_consumer.notify_one();
    }
  }

  void start_workers() {
    workers.reserve(static_cast<std::size_t>(options.workers));
    for (int w = 0; w < options.workers; ++w) workers.emplace_back([this] { worker_loop(); });
  }

  void shut_down() noexcept {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    wake_workers.notify_all();
    for (std::thread& t : workers)
      if (t.joinable()) t.join();
    done.clear();
    staging.reset();  // waits for the copies still in flight
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : options_(options) {
  MT_CHECK_AS(ValueError, dataset != nullptr, "DataLoader: the dataset is null");
  MT_CHECK_AS(ValueError, options.batch_size >= 1,
              "DataLoader: batch size must be at least 1, got ", options.batch_size);
  MT_CHECK_AS(ValueError, options.workers >= 0 && options.workers <= kMaxLoaderWorkers,
              "DataLoader: workers must be in [0, ", kMaxLoaderWorkers, "] (0: prepare batches on ",
              "the calling thread), got ", options.workers);
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
  // prefetch 0 was the way to say "no background thread" before there were workers: both mean it.
  if (options.prefetch == 0) options_.workers = options.workers = 0;
  impl_ = std::make_unique<Impl>(std::move(dataset), options);
  Impl& m = *impl_;
  m.n = n;
  m.epoch_rows = rows;
  m.in_dim = m.dataset->feature_dim();
  m.out_dim = m.dataset->target_dim();
  m.per_epoch = options.drop_last ? rows / options.batch_size
                                  : (rows + options.batch_size - 1) / options.batch_size;
  m.window = int64_t{options.workers} * options.prefetch;
  if (options.device.is_cuda()) {
    // A buffer for each batch the window holds and one per worker filling, and one more than the
    // workers so that each finds a free one (PinnedStaging's requirement).
    const int64_t buffers = std::max<int64_t>(2, m.window + options.workers + 1);
    m.staging = std::make_unique<PinnedStaging>(options.device, current_stream(options.device),
                                                options.batch_size, m.in_dim, m.out_dim,
                                                static_cast<std::size_t>(buffers));
  }
}

DataLoader::~DataLoader() {
  if (impl_) impl_->shut_down();
}

int64_t DataLoader::batches_per_epoch() const noexcept { return impl_->per_epoch; }

Batch DataLoader::next() {
  Impl& m = *impl_;
  if (options_.workers == 0) {
    int64_t e = 0, i = 0;
    m.position(m.delivered, e, i);
    Batch b = m.make_batch(e, i);  // an exception leaves the position where it was
    ++m.delivered;
    return b;
  }
  std::unique_lock<std::mutex> lock(m.mu);
  if (m.workers.empty()) m.start_workers();
  m.wake_consumer.wait(lock,
                       [&] { return !m.done.empty() && m.done.begin()->first == m.delivered; });
  Impl::Item item = std::move(m.done.begin()->second);
  m.done.erase(m.done.begin());
  if (item.error) {
    m.retry.push_back(m.delivered);  // the same batch again at the next call
  } else {
    ++m.delivered;  // the window moves on by one
  }
  lock.unlock();
  m.wake_workers.notify_one();
  if (item.error) std::rethrow_exception(item.error);
  return std::move(item.batch);
}

void DataLoader::seek(int64_t epoch, int64_t index) {
  Impl& m = *impl_;
  MT_CHECK_AS(ValueError, epoch >= 0, "DataLoader::seek: epoch must be >= 0, got ", epoch);
  MT_CHECK_AS(ValueError, index >= 0 && index < m.per_epoch, "DataLoader::seek: batch index ",
              index, " is out of range; an epoch has ", m.per_epoch, " batches (0 to ",
              m.per_epoch - 1, ")");
  std::map<int64_t, Impl::Item> dropped;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(m.mu);
    dropped.swap(m.done);
    m.retry.clear();
    m.base_epoch = epoch;
    m.base_index = index;
    m.delivered = m.claimed = 0;
    ++m.generation;
  }
  m.wake_workers.notify_all();
}

}  // namespace minitrain
