// The worker pool: host threads that run blocks of whatever grids the streams have launched.
// Several grids (from several streams or devices) run at once, as on a GPU; a worker runs one
// block at a time, start to finish.

#include "grid.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <numeric>
#include <thread>

#include "block.h"
#include "counters.h"
#include "race.h"
#include "sanitizer.h"
#include "unchecked_stores.h"

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

// MINITRAIN_EMU_WATCHDOG_S: how long a grid may run before it counts as hung (0: forever).
double watchdog_seconds() {
  static const double s = [] {
    const char* v = std::getenv("MINITRAIN_EMU_WATCHDOG_S");
    return v && *v ? std::atof(v) : 300.0;
  }();
  return s;
}

// A grid past the watchdog: its threads spin (a barrier or collective that cannot complete is a
// fault of its own, found at once), which a GPU would do forever too: blocks waiting for each
// other, or for a flag nobody sets. Spinning threads cannot be stopped, so this ends the process
// with a report, as a sanitizer does.
[[noreturn]] void hung(const Grid& g, double limit) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%g", limit);
  std::fprintf(stderr,
               "cuda-emu: watchdog: %s has not finished after %s s (%llu of %llu blocks done, "
               "%llu started): a deadlock, such as blocks that spin waiting for each other or "
               "for a flag that nobody sets (threads of one block that spin on each other's "
               "writes also hang here: the emulator runs a block's threads in turns). "
               "MINITRAIN_EMU_WATCHDOG_S sets the limit (0: none)\n",
               describe(g.site).c_str(), secs, static_cast<unsigned long long>(g.finished),
               static_cast<unsigned long long>(g.blocks),
               static_cast<unsigned long long>(g.claimed));
  std::abort();
}

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
      const auto finished = [&] { return g.finished == g.blocks; };
      if (const double limit = watchdog_seconds(); limit > 0) {
        if (!done_.wait_for(lock, std::chrono::duration<double>(limit), finished)) hung(g, limit);
      } else {
        done_.wait(lock, finished);
      }
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
  routed_grid_begin();
  counters_launch_begin(g);
  if (racecheck_on) racecheck_launch_begin(g);
  pool().run(g);
  if (racecheck_on) racecheck_launch_end(g);
  counters_launch_end(g);
  routed_grid_end();
}

}  // namespace mtemu::detail
