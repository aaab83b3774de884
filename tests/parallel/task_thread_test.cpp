// TaskThread, the worker of DataParallel, DDP and ModelParallel: tasks run in the order posted on
// one other thread, an error reaches the caller once, the tasks behind a failure are skipped until
// it is taken, the scope hook wraps the thread's life, and destruction runs what is queued.

#include "parallel/task_thread.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace minitrain {
namespace {

TEST(TaskThread, RunsTasksInTheOrderPostedOnAnotherThread) {
  std::vector<int> seen;
  std::thread::id worker_id;
  TaskThread t;
  for (int i = 0; i < 100; ++i)
    t.post([&seen, &worker_id, i] {
      seen.push_back(i);
      worker_id = std::this_thread::get_id();
    });
  t.finish();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
  EXPECT_NE(worker_id, std::this_thread::get_id());
}

TEST(TaskThread, AFailureSkipsTheTasksBehindItUntilTheCallerTakesIt) {
  std::vector<std::string> ran;
  TaskThread t;
  t.post([&ran] { ran.push_back("a"); });
  t.post([] { throw std::runtime_error("boom"); });
  t.post([&ran] { ran.push_back("skipped"); });
  try {
    t.finish();
    FAIL() << "finish() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "boom");
  }
  EXPECT_EQ(ran, std::vector<std::string>{"a"});
  // Taken: the error is gone and new tasks run again.
  EXPECT_EQ(t.wait_idle(), nullptr);
  t.post([&ran] { ran.push_back("b"); });
  EXPECT_EQ(t.wait_idle(), nullptr);
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "b"}));
}

TEST(TaskThread, TheScopeWrapsEveryTask) {
  thread_local int depth = 0;  // set by the scope on the worker thread only
  std::vector<int> seen;
  TaskThread t([](const std::function<void()>& serve) {
    depth = 1;
    serve();
    depth = 0;
  });
  t.post([&seen] { seen.push_back(depth); });
  t.post([&seen] { seen.push_back(depth); });
  t.finish();
  EXPECT_EQ(seen, (std::vector<int>{1, 1}));
  EXPECT_EQ(depth, 0);  // the caller's thread was never in the scope
}

TEST(TaskThread, DestructionRunsWhatIsStillQueued) {
  int ran = 0;
  {
    TaskThread t;
    for (int i = 0; i < 10; ++i) t.post([&ran] { ++ran; });
  }
  EXPECT_EQ(ran, 10);
}

}  // namespace
}  // namespace minitrain
