#include "core/op_profiler.h"

#include <atomic>
#include <cstring>

#include "core/error.h"

namespace minitrain {
namespace {

std::atomic<OpProfiler*> g_active{nullptr};
// Timers alive on this thread: only the outermost records.
thread_local int t_depth = 0;

}  // namespace

OpProfiler::OpProfiler() : interval_start_(std::chrono::steady_clock::now()) {
  OpProfiler* none = nullptr;
  MT_CHECK_AS(DeviceError, g_active.compare_exchange_strong(none, this),
              "an op profiler is already active in this process (one run profiles at a time)");
}

OpProfiler::~OpProfiler() { g_active.store(nullptr); }

OpProfiler* OpProfiler::active() noexcept { return g_active.load(std::memory_order_acquire); }

void OpProfiler::add(const char* op, Event start, Event stop) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back({op, std::move(start), std::move(stop)});
}

OpProfiler::Interval OpProfiler::close_interval() {
  std::vector<Pending> pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending.swap(pending_);
  }
  Interval out;
  for (Pending& p : pending) {
    p.stop.synchronize();  // a GPU op's kernels may still run; the CPU's events are complete
    const double s = p.stop.elapsed_ms_since(p.start) * 1e-3;
    Row* row = nullptr;
    for (Row& r : out.rows)
      if (r.device == p.start.device() && std::strcmp(r.op.c_str(), p.op) == 0) row = &r;
    if (row == nullptr) {
      out.rows.push_back({p.op, p.start.device(), 0, 0.0});
      row = &out.rows.back();
    }
    ++row->calls;
    row->seconds += s;
  }
  const auto now = std::chrono::steady_clock::now();
  out.wall_seconds = std::chrono::duration<double>(now - interval_start_).count();
  interval_start_ = now;
  return out;
}

struct OpTimer::Started {
  OpProfiler* profiler;
  const char* op;
  const Stream* stream;
  Event start, stop;
};

OpTimer::OpTimer(const char* op, const Device& device) {
  OpProfiler* p = OpProfiler::active();
  if (t_depth++ > 0 || p == nullptr) return;
  const Stream& s = current_stream(device);
  started_.reset(new Started{p, op, &s, Event::create(device), Event::create(device)});
  started_->start.record(s);
}

OpTimer::~OpTimer() {
  --t_depth;
  if (!started_) return;
  try {
    started_->stop.record(*started_->stream);
    started_->profiler->add(started_->op, std::move(started_->start), std::move(started_->stop));
  } catch (...) {
    // A device fault inside the op is reported by the op itself; the timing is lost with it.
  }
}

}  // namespace minitrain
