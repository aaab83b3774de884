// The worker pool: host threads that run blocks of whatever grids the streams have launched.
// Several grids (from several streams or devices) run at once, as on a GPU; a worker runs one
// block at a time, start to finish.

#include "grid.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <numeric>
#include <thread>

#include "block.h"
#include "sanitizer.h"

namespace mtemu::detail {

uint3 Grid::block_index(uint64_t i) const {
  const uint64_t b = (i * order_step + order_offset) % blocks;
  const uint64_t gx = config.grid.x, gy = config.grid.y;
  return uint3{unsigned(b % gx), unsigned(b / gx % gy), unsigned(b / (gx * gy))};
}

std::string describe(const LaunchSite& site) {
  std::string file = site.file;
  if (const auto slash = file.find_last_of('/'); slash != std::string::npos)
    file = file.substr(slash + 1);
  return "kernel '" + std::string(site.kernel) + "' (launched at " + file + ":" +
         std::to_string(site.line) + ")";
}

namespace {

class Pool {
 public:
  Pool() {
    int n = 0;
    if (const char* v = std::getenv("MINITRAIN_EMU_WORKERS"); v && *v) n = std::atoi(v);
    if (n <= 0) n = std::max(2u, std::thread::hardware_concurrency());
    for (int i = 0; i < n; ++i) std::thread([this] { work(); }).detach();
  }

  void run(Grid& g) {
    san::release(&g.start_token);
    {
      san::IgnoreAll ignore;  // the queue must not order grids of different streams
      std::unique_lock<std::mutex> lock(m_);
      grids_.push_back(&g);
      more_.notify_all();
      done_.wait(lock, [&] { return g.finished == g.blocks; });
    }
    san::acquire(&g.done_token);
  }

 private:
  void work() {
    WorkerSlots slots;
    for (;;) {
      Grid* g = nullptr;
      uint64_t block = 0;
      {
        san::IgnoreAll ignore;
        std::unique_lock<std::mutex> lock(m_);
        more_.wait(lock, [&] { return !grids_.empty(); });
        g = grids_.front();
        block = g->claimed++;
        // Round robin over grids in flight, so one big grid does not starve the others.
        grids_.pop_front();
        if (g->claimed < g->blocks) grids_.push_back(g);
      }
      cudaError_t code = cudaSuccess;
      std::string text;
      bool skip;
      {
        san::IgnoreAll ignore;
        skip = g->faulted.load();
      }
      if (!skip) run_block(*g, block, slots, &code, &text);
      san::IgnoreAll ignore;
      std::lock_guard<std::mutex> lock(m_);
      if (code != cudaSuccess && !g->faulted.exchange(true)) {
        g->fault_code = code;
        g->fault_text = text;
      }
      if (++g->finished == g->blocks) done_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable more_, done_;
  std::deque<Grid*> grids_;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: detached workers may outlive static destructors
  return *p;
}

uint64_t scramble_seed() {
  static const uint64_t seed = [] {
    const char* v = std::getenv("MINITRAIN_EMU_SEED");
    return v && *v ? std::strtoull(v, nullptr, 10) : 0x9e3779b97f4a7c15ull;
  }();
  return seed;
}

}  // namespace

void run_grid(Grid& g) {
  const dim3 gd = g.config.grid;
  g.blocks = uint64_t(gd.x) * gd.y * gd.z;
  // An odd-looking but fixed order: a step coprime with the block count visits every block once.
  static std::atomic<uint64_t> launches{0};
  uint64_t h = (launches++ + 1) * scramble_seed();
  h ^= h >> 31;
  g.order_offset = h % g.blocks;
  g.order_step = 1 + (h >> 17) % g.blocks;
  while (std::gcd(g.order_step, g.blocks) != 1) ++g.order_step;
  pool().run(g);
}

}  // namespace mtemu::detail
