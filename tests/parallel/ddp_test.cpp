// DistributedDataParallel on the threads backend (one thread per rank, in one process): equal to
// one device on the global batch for 2 and 3 ranks, SGD with momentum and Adam, with and without
// overlap; gradient accumulation with no_sync; bucket sizes; ring vs native; the broadcast at
// construction; the hybrid with ModelParallel; the errors; and that the overlap really happens
// (a bucket's all-reduce starts while the module's backward is still running).

#include "parallel/distributed_data_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/activation_layer.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/run_ranks.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::run_cpu_ranks;
using testing::run_ranks;
using testing::run_ranks_collect;
using namespace testing::ddp;

// Trains `world` thread ranks on case `c`; returns every rank's weights.
std::vector<Weights> train_threads(int world, const Case& c, CommOptions options = {}) {
  std::vector<Weights> out(world);
  run_cpu_ranks(world, options, [&](Communicator& comm) { out[comm.rank()] = train_ddp(comm, c); });
  return out;
}

void expect_all_ranks_match(const std::vector<Weights>& ranks, const Weights& want,
                            const std::string& what) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    expect_weights_close(ranks[r], want, what + " rank " + std::to_string(r));
    // Every rank applies the same averaged gradient, so the replicas stay bit-identical.
    EXPECT_EQ(ranks[r], ranks[0]) << what << ": rank " << r << " drifted from rank 0";
  }
}

TEST(DdpThreads, MatchesOneDeviceSgdMomentumAndAdam) {
  for (int world : {2, 3})
    for (const OptimizerConfig& oc : {sgd_momentum(), adam()})
      for (bool overlap : {true, false}) {
        Case c;
        c.opt = oc;
        c.ddp.overlap = overlap;
        c.ddp.bucket_bytes = 200;  // several buckets, one of them a lone parameter larger than it
        const std::string what = "world " + std::to_string(world) + " " + c.str();
        SCOPED_TRACE(what);
        const Weights want = train_one_device(c, world);
        // Not trivially equal: training moved the weights away from the initial ones.
        ASSERT_NE(want[0].second, weights(*mlp(kSeed))[0].second);
        expect_all_ranks_match(train_threads(world, c), want, what);
      }
}

TEST(DdpThreads, NoSyncAccumulationMatchesTheCombinedBatch) {
  for (int world : {2, 3})
    for (const OptimizerConfig& oc : {sgd_momentum(), adam()}) {
      Case c;
      c.opt = oc;
      c.micro_batches = 2;
      const std::string what = "world " + std::to_string(world) + " " + c.str();
      SCOPED_TRACE(what);
      expect_all_ranks_match(train_threads(world, c), train_one_device(c, world), what);
    }
}

TEST(DdpThreads, BucketSizesGiveTheSameWeights) {
  Case tiny, huge;
  tiny.ddp.bucket_bytes = 1;  // one bucket per parameter
  huge.ddp.bucket_bytes = int64_t(1) << 30;
  // Each element is averaged by the same reduction in rank order whatever the bucket: bit-equal.
  EXPECT_EQ(train_threads(2, tiny)[1], train_threads(2, huge)[1]);
  expect_weights_close(train_threads(2, tiny)[0], train_one_device(tiny, 2), "tiny buckets");
}

TEST(DdpThreads, BucketsFollowReverseLayerOrderAndSize) {
  auto names = [](int64_t bucket_bytes) {
    std::vector<std::vector<std::string>> out;
    run_cpu_ranks(1, {}, [&](Communicator& comm) {
      DdpOptions o;
      o.bucket_bytes = bucket_bytes;
      out = DistributedDataParallel(mlp(kSeed), comm, o).bucket_names();
    });
    return out;
  };
  using Names = std::vector<std::vector<std::string>>;
  EXPECT_EQ(names(1),
            (Names{{"4.bias"}, {"4.weight"}, {"2.bias"}, {"2.weight"}, {"0.bias"}, {"0.weight"}}));
  EXPECT_EQ(names(DdpOptions{}.bucket_bytes),
            (Names{{"4.bias", "4.weight", "2.bias", "2.weight", "0.bias", "0.weight"}}));
  // Bytes: 4.bias 12, 4.weight 144, 2.bias 48, 2.weight 768, 0.bias 64, 0.weight 320. With 200:
  // 2.weight (768) is larger than a bucket and gets its own; no parameter is ever split.
  EXPECT_EQ(names(200),
            (Names{{"4.bias", "4.weight"}, {"2.bias"}, {"2.weight"}, {"0.bias"}, {"0.weight"}}));
}

TEST(DdpThreads, RingAndNativeAllReduceAgree) {
  CommOptions ring;
  ring.all_reduce = AllReduceAlgorithm::Ring;
  for (int world : {2, 3}) {
    Case c;
    c.opt = adam();
    c.ddp.bucket_bytes = 200;
    const std::vector<Weights> got = train_threads(world, c, ring);
    const Weights native = train_threads(world, c)[0];
    expect_all_ranks_match(got, train_one_device(c, world), "ring world " + std::to_string(world));
    expect_weights_close(got[0], native, "ring vs native");
  }
}

TEST(DdpThreads, ConstructionBroadcastsRankZerosParameters) {
  const Weights rank0 = weights(*mlp(rank_seed(0)));
  ASSERT_NE(weights(*mlp(rank_seed(1))), rank0);  // the seeds differ, so the broadcast must act
  std::vector<Weights> got(3);
  run_cpu_ranks(3, {}, [&](Communicator& comm) {
    DistributedDataParallel ddp(mlp(rank_seed(comm.rank())), comm);
    got[comm.rank()] = weights(ddp);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r], rank0) << "rank " << r;
}

TEST(DdpThreads, HybridTwoReplicasOfTwoStagesMatchesOneDevice) {
  for (const OptimizerConfig& oc : {sgd_momentum(), adam()}) {
    Case c;
    c.opt = oc;
    c.model = two_stage_mlp();
    c.ddp.bucket_bytes = 200;
    expect_all_ranks_match(train_threads(2, c), train_one_device(c, 2), "hybrid " + c.str());
  }
}

// ---- a Communicator that records the all-reduces it forwards (and may claim another device) ----
class RecordingCommunicator final : public Communicator {
 public:
  RecordingCommunicator(Communicator& inner, Device device)
      : Communicator(inner.options()), inner_(inner), device_(device) {}
  int rank() const noexcept override { return inner_.rank(); }
  int size() const noexcept override { return inner_.size(); }
  Device device() const noexcept override { return device_; }
  std::string backend() const override { return inner_.backend(); }
  void native_all_reduce(Tensor& t, ReduceOp op) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      numels_.push_back(t.numel());
    }
    cv_.notify_all();
    inner_.native_all_reduce(t, op);
  }
  void broadcast(Tensor& t, int root) override { inner_.broadcast(t, root); }
  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override {
    inner_.reduce_scatter(out, in, op);
  }
  void all_gather(Tensor& out, const Tensor& in) override { inner_.all_gather(out, in); }
  void send(const Tensor& t, int peer) override { inner_.send(t, peer); }
  void recv(Tensor& t, int peer) override { inner_.recv(t, peer); }
  void send_recv(const Tensor& s, int sp, Tensor& r, int rp) override {
    inner_.send_recv(s, sp, r, rp);
  }
  void barrier() override { inner_.barrier(); }

  /// Waits (up to `limit`) until at least `n` all-reduces have started; whether they have.
  bool wait_started(std::size_t n, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return numels_.size() >= n; });
  }
  std::vector<int64_t> numels() {
    std::lock_guard<std::mutex> lock(mu_);
    return numels_;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    numels_.clear();
  }

 private:
  Communicator& inner_;
  Device device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> numels_;
};

// First layer of a model: its backward (the last of the Sequential's backward) looks at whether
// an all-reduce has started by then; with `wait` it waits (bounded) for the first one.
class Probe final : public Module {
 public:
  explicit Probe(RecordingCommunicator& comm) : comm_(comm) {}
  Tensor forward(const Tensor& x) override { return x; }
  Tensor backward(const Tensor& g) override {
    started_before_end =
        wait ? comm_.wait_started(1, std::chrono::seconds(20)) : !comm_.numels().empty();
    return g;
  }
  std::string repr() const override { return "Probe()"; }
  bool wait = false;
  bool started_before_end = false;

 private:
  RecordingCommunicator& comm_;
};

TEST(DdpThreads, OverlapStartsTheFirstBucketBeforeBackwardReturns) {
  for (bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    std::vector<std::vector<int64_t>> sent(2), during_no_sync(2);
    std::vector<int> started(2, -1);
    run_cpu_ranks(2, {}, [&](Communicator& inner) {
      const int r = inner.rank();
      RecordingCommunicator comm(inner, Device::cpu());
      Generator gen(rank_seed(r));
      auto model = std::make_unique<Sequential>();
      model->add(std::make_unique<Probe>(comm));
      model->add(std::make_unique<Linear>(5, 8, gen));
      model->add(std::make_unique<ActivationLayer>(Activation::Tanh));
      model->add(std::make_unique<Linear>(8, 3, gen));
      Probe& probe = static_cast<Probe&>((*model)[0]);
      DdpOptions o;
      o.bucket_bytes = 1;
      o.overlap = overlap;
      DistributedDataParallel ddp(std::move(model), comm, o);
      const Tensor x = testing::random_tensor({4, 5}, 3 + r);
      {  // no_sync: no communication at all
        comm.clear();
        auto guard = ddp.no_sync();
        ddp.forward(x);
        ddp.backward(testing::random_tensor({4, 3}, 5));
        during_no_sync[r] = comm.numels();
      }
      comm.clear();
      probe.wait = overlap;  // without overlap nothing may start before backward returns: look only
      ddp.forward(x);
      ddp.backward(testing::random_tensor({4, 3}, 5));
      started[r] = probe.started_before_end;
      sent[r] = comm.numels();
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(started[r], overlap ? 1 : 0) << "rank " << r;
      EXPECT_TRUE(during_no_sync[r].empty()) << "rank " << r;
      // One bucket per parameter, in reverse layer order: 3.bias, 3.weight, 1.bias, 1.weight.
      EXPECT_EQ(sent[r], (std::vector<int64_t>{3, 24, 8, 40})) << "rank " << r;
    }
  }
}

TEST(DdpThreads, ParameterOnAnotherDeviceIsDeviceError) {
  run_cpu_ranks(1, {}, [&](Communicator& inner) {
    RecordingCommunicator comm(inner, Device::cuda(0));  // claims a GPU; the model is on the CPU
    const std::string msg = error_message([&] { DistributedDataParallel(mlp(kSeed), comm); });
    EXPECT_THAT(msg, HasSubstr("parameter '0.weight' is on cpu"));
    EXPECT_THAT(msg, HasSubstr("communicator is on cuda:0"));
    EXPECT_THROW(DistributedDataParallel(mlp(kSeed), comm), DeviceError);
  });
}

TEST(DdpThreads, BadOptionsAndModule) {
  run_cpu_ranks(1, {}, [&](Communicator& comm) {
    DdpOptions o;
    o.bucket_bytes = 0;
    EXPECT_THROW(DistributedDataParallel(mlp(kSeed), comm, o), ValueError);
    EXPECT_THAT(error_message([&] { DistributedDataParallel(mlp(kSeed), comm, o); }),
                HasSubstr("bucket_bytes must be at least 1, got 0"));
    EXPECT_THAT(error_message([&] { DistributedDataParallel(nullptr, comm); }),
                HasSubstr("module is null"));
    DistributedDataParallel ddp(mlp(kSeed), comm);
    EXPECT_NO_THROW(ddp.to(Device::cpu()));
    EXPECT_THROW(ddp.to(Device::cuda(0)), DeviceError);
  });
}

TEST(DdpThreads, DifferentModelsOnTheRanksAreValueError) {
  std::vector<std::string> msgs(2);
  run_cpu_ranks(2, {}, [&](Communicator& comm) {
    Generator gen(1);
    auto m =
        make_mlp(comm.rank() == 0 ? kSizes : std::vector<int64_t>{5, 16, 3}, Activation::Tanh, gen);
    msgs[comm.rank()] = error_message([&] { DistributedDataParallel(std::move(m), comm); });
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_THAT(msgs[r], HasSubstr("the ranks hold different models")) << r;
}

TEST(DdpThreads, PeerThatNeverCallsBackwardIsCommError) {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(300);
  auto comms = make_thread_communicators({Device::cpu(), Device::cpu()}, o);
  std::string msg;
  bool comm_error = false;
  auto errors = run_ranks_collect(comms, [&](Communicator& comm) {
    DistributedDataParallel ddp(mlp(rank_seed(comm.rank())), comm);
    if (comm.rank() == 1) return;  // constructs (a collective), then never calls backward
    MSELoss loss;
    loss.forward(ddp.forward(batch_x(0, kLocalBatch)), batch_y(0, kLocalBatch));
    try {
      ddp.backward(loss.backward());
    } catch (const CommError& e) {
      comm_error = true;
      msg = e.what();
    }
  });
  EXPECT_FALSE(errors[0]);
  EXPECT_FALSE(errors[1]);
  EXPECT_TRUE(comm_error) << "backward returned although rank 1 never took part";
  EXPECT_THAT(msg, HasSubstr("rank 0 waited 0.3 s for rank 1"));
}

TEST(SequentialBackwardHook, CalledAfterEachChildInReverseOrder) {
  auto m = mlp(kSeed);
  m->zero_grad();
  std::vector<std::size_t> order;
  std::vector<bool> grad_ready;
  m->set_backward_hook([&](std::size_t i) {
    order.push_back(i);
    // The child's gradients are final when the hook runs: not all zero for a Linear.
    for (auto& [name, p] : (*m)[i].named_parameters())
      grad_ready.push_back(testing::host_max_abs(p->grad) > 0);
  });
  MSELoss loss;
  loss.forward(m->forward(batch_x(0, 4)), batch_y(0, 4));
  const Tensor g = loss.backward();
  m->backward(g);
  EXPECT_EQ(order, (std::vector<std::size_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(grad_ready, std::vector<bool>(6, true));
  m->set_backward_hook(nullptr);  // removed: backward still works, nothing is called
  m->forward(batch_x(0, 4));
  m->backward(g);
  EXPECT_EQ(order.size(), 5u);
}

}  // namespace
}  // namespace minitrain
