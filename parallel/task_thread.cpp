// TaskThread: the queue, the skip-after-failure rule and the join (task_thread.h says why).

#include "parallel/task_thread.h"

#include <utility>

namespace minitrain {

TaskThread::TaskThread(ThreadScope scope) : scope_(std::move(scope)) {
  thread_ = std::thread([this] {
    if (scope_)
      scope_([this] { serve(); });
    else
      serve();
  });
}

TaskThread::~TaskThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TaskThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    ++outstanding_;
  }
  cv_.notify_all();
}

std::exception_ptr TaskThread::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return outstanding_ == 0; });
  std::exception_ptr e = error_;
  error_ = nullptr;
  return e;
}

void TaskThread::finish() {
  if (std::exception_ptr e = wait_idle()) std::rethrow_exception(e);
}

void TaskThread::serve() {
  for (;;) {
    std::function<void()> task;
    bool skip = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stop_, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
      skip = error_ != nullptr;
    }
    std::exception_ptr error;
    if (!skip) {
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error && !error_) error_ = error;
      --outstanding_;
    }
    cv_.notify_all();
  }
}

}  // namespace minitrain
