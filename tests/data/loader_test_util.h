#pragma once
// What the DataLoader tests share: a dataset whose rows say which they are, reading a batch's rows
// back, and a dataset that fails on one row and can be slowed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/data_loader.h"
#include "tests/support/test_util.h"

namespace minitrain::testing {

// n rows: X row r = [r, 100 + r], Y row r = [-r]; a batch's rows are readable from its y.
inline std::shared_ptr<TensorDataset> numbered(int64_t n) {
  std::vector<float> x, y;
  for (int64_t r = 0; r < n; ++r) {
    x.push_back(float(r));
    x.push_back(float(100 + r));
    y.push_back(float(-r));
  }
  return std::make_shared<TensorDataset>(Tensor::from_vector(x, {n, 2}),
                                         Tensor::from_vector(y, {n}));
}

inline std::vector<int64_t> rows_of(const Batch& b) {
  std::vector<int64_t> rows;
  for (double v : host_values(b.y)) rows.push_back(int64_t(-v));
  return rows;
}

// The features numbered(n) holds for `rows`: [r, 100 + r] each, flattened.
inline std::vector<double> features_of(const std::vector<int64_t>& rows) {
  std::vector<double> x;
  for (int64_t r : rows) {
    x.push_back(double(r));
    x.push_back(double(100 + r));
  }
  return x;
}

inline DataLoaderOptions loader_opts(int64_t batch_size, bool shuffle, int prefetch,
                                     uint64_t seed = 1, int workers = 1) {
  DataLoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.prefetch = prefetch;
  o.seed = seed;
  o.workers = workers;
  return o;
}

// Delegates to numbered(n); gather throws for a batch holding `bad_row` (its first `failures`
// times; -1: always) and can be slowed. Counts the gathers begun and ended.
class TestDataset final : public Dataset {
 public:
  explicit TestDataset(int64_t n, int64_t bad_row = -1, int delay_ms = 0, int failures = -1)
      : inner_(numbered(n)), bad_row_(bad_row), delay_ms_(delay_ms), failures_left_(failures) {}
  int64_t size() const override { return inner_->size(); }
  int64_t feature_dim() const override { return inner_->feature_dim(); }
  int64_t target_dim() const override { return inner_->target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override {
    started_++;
    struct Ended {
      std::atomic<int>& n;
      ~Ended() { n++; }
    } ended{ended_};
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    if (std::find(indices.begin(), indices.end(), bad_row_) != indices.end() && fails_now())
      throw IoError("row " + std::to_string(bad_row_) + " is unreadable");
    inner_->gather(indices, x, y);
  }
  mutable std::atomic<int> started_{0}, ended_{0};

 private:
  bool fails_now() const {
    int left = failures_left_.load();
    while (left > 0 && !failures_left_.compare_exchange_weak(left, left - 1)) {
    }
    return left != 0;  // < 0: always; > 0: this was one of the failures
  }

  std::shared_ptr<TensorDataset> inner_;
  int64_t bad_row_;
  int delay_ms_;
  mutable std::atomic<int> failures_left_;
};

}  // namespace minitrain::testing
