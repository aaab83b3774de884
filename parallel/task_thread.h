// TaskThread: one persistent host thread that runs posted tasks in order, the worker of all three
// parallel wrappers (a DataParallel replica, the DDP communication thread, a ModelParallel stage).
// It lives in parallel/ because only these wrappers run worker threads; it knows nothing of
// devices or streams (the wrappers bind those through the task or the ThreadScope hook), so it
// can move down to core/ the day another layer needs one.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace minitrain {

/// Wraps the thread's whole life: sets up what every task shares (e.g. a DeviceGuard and a
/// StreamGuard) and then calls serve(), which runs tasks until the TaskThread is destroyed.
using ThreadScope = std::function<void(const std::function<void()>& serve)>;

/// Runs posted tasks one at a time, first in first out. A task that throws is caught; the tasks
/// posted after it are skipped (they may depend on it: a broken communicator, a half-done step)
/// until the caller has taken the error with wait_idle() or finish(). Destruction runs what is
/// still queued, then joins. Not copyable or movable (the thread holds `this`).
class TaskThread {
 public:
  explicit TaskThread(ThreadScope scope = nullptr);
  ~TaskThread();
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  void post(std::function<void()> task);

  /// Waits until every posted task has run (or been skipped); returns and clears the first error.
  std::exception_ptr wait_idle();

  /// The same, rethrowing the error in the caller.
  void finish();

 private:
  void serve();

  ThreadScope scope_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  int64_t outstanding_ = 0;  // posted and not yet run or skipped
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after every member above exists
};

}  // namespace minitrain
