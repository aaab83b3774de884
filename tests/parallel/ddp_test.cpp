// DistributedDataParallel on the threads backend (one thread per rank, in one process): equal to
// one device on the global batch for 2 and 3 ranks, SGD with momentum and Adam, with and without
// overlap; gradient accumulation with no_sync; bucket sizes; ring vs native; the broadcast at
// construction; the hybrid with ModelParallel, its stages on the CPU or on two GPUs (one
// communicator per stage's device); the errors; and that the overlap really happens (a bucket's
// all-reduce starts while the module's backward is still running).

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

// Note [DDP gradients as bucket views]: a gradient the caller replaces by a tensor of its own
// (here after step 1's backward, so the optimizer and every later step see the new one) is no
// longer a view of its bucket, and must still be averaged, copied in and out of the bucket.
TEST(DdpThreads, AGradientReplacedByTheCallerIsStillAveraged) {
  for (bool overlap : {true, false}) {
    Case c;
    c.ddp.overlap = overlap;
    c.ddp.bucket_bytes = 200;
    SCOPED_TRACE(c.str());
    std::vector<Weights> got(2);
    run_cpu_ranks(2, {}, [&](Communicator& comm) {
      DistributedDataParallel ddp(mlp(rank_seed(comm.rank())), comm, c.ddp);
      got[comm.rank()] = train_rank(ddp, c, [&](int s, int) {
        if (s != 1) return;
        for (auto& [name, p] : ddp.named_parameters())
          if (name == "2.weight" || name == "0.bias") p->grad = p->grad.clone();
      });
    });
    expect_all_ranks_match(got, train_one_device(c, 2), "replaced gradients");
  }
}

// Note [released gradients] (nn/parameter.h) with Note [DDP gradients as bucket views]: zero_grad
// leaves the gradients undefined and the next backward writes into the released buffers, which are
// the bucket views, so after every backward each gradient is the same view (nothing copied in or
// out of the buckets) and the run still matches one device, micro-batches accumulating included.
TEST(DdpThreads, ZeroGradAndBackwardKeepEveryGradientItsBucketView) {
  for (int micro_batches : {1, 2}) {
    Case c;
    c.ddp.bucket_bytes = 200;
    c.micro_batches = micro_batches;
    SCOPED_TRACE(c.str());
    std::vector<Weights> got(2);
    std::vector<std::vector<const void*>> first(2);
    std::vector<int> moved(2, 0), seen(2, 0);
    run_cpu_ranks(2, {}, [&](Communicator& comm) {
      const int r = comm.rank();
      DistributedDataParallel ddp(mlp(rank_seed(r)), comm, c.ddp);
      got[r] = train_rank(ddp, c, [&](int, int) {
        std::vector<const void*> now;
        for (auto& [name, p] : ddp.named_parameters()) now.push_back(p->grad.raw_data());
        ++seen[r];
        if (first[r].empty())
          first[r] = now;
        else if (now != first[r])
          ++moved[r];
      });
    });
    expect_all_ranks_match(got, train_one_device(c, 2), "bucket views");
    EXPECT_EQ(seen, std::vector<int>(2, c.steps * micro_batches));
    EXPECT_EQ(moved, std::vector<int>(2, 0));
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

// ---- the hybrid with its stages on two GPUs (Note [DDP over several devices]) ----

const std::vector<Device> kTwoGpus = {Device::cuda(0), Device::cuda(1)};

// Each rank's communicator on cuda:0, its first stage's device; the second stage's gradients go
// through a communicator split onto cuda:1.
TEST(DdpThreadsCuda, HybridWithStagesOnTwoGpusMatchesOneCpuDevice) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  for (int world : {2, 3})
    for (const OptimizerConfig& oc : {sgd_momentum(), adam()}) {
      Case c;
      c.opt = oc;
      c.model = two_stage_mlp_over(kTwoGpus);
      c.ddp.bucket_bytes = 200;
      const std::string what = "world " + std::to_string(world) + " hybrid on GPUs " + c.str();
      SCOPED_TRACE(what);
      std::vector<Weights> got(world);
      auto comms = make_thread_communicators(std::vector<Device>(world, Device::cuda(0)));
      run_ranks(comms, [&](Communicator& comm) { got[comm.rank()] = train_ddp(comm, c); });
      expect_all_ranks_match(got, train_one_device(c, world), what);
    }
}

TEST(DdpThreadsCuda, BucketsNeverMixTheStagesDevices) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  auto comms = make_thread_communicators({Device::cuda(0)});
  run_ranks(comms, [&](Communicator& comm) {
    // Stage 0: layers 0-1 on cuda:0; stage 1: layers 2-4 on cuda:1 (balanced by parameters).
    DistributedDataParallel ddp(two_stage_mlp_over(kTwoGpus)(kSeed, comm.device()), comm);
    EXPECT_EQ(ddp.devices(), kTwoGpus);
    using Names = std::vector<std::vector<std::string>>;
    EXPECT_EQ(ddp.bucket_names(),
              (Names{{"4.bias", "4.weight", "2.bias", "2.weight"}, {"0.bias", "0.weight"}}));
    EXPECT_THAT(ddp.repr(), HasSubstr("devices=cuda:0, cuda:1"));
    EXPECT_THROW(ddp.to(Device::cuda(0)), DeviceError);
  });
}

TEST(DdpThreadsCuda, RanksWithStagesOnDifferentNumbersOfDevicesAreValueError) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  auto comms = make_thread_communicators({Device::cuda(0), Device::cuda(0)});
  std::vector<std::string> msgs(2);
  run_ranks(comms, [&](Communicator& comm) {
    const std::vector<Device> stages =
        comm.rank() == 0 ? kTwoGpus : std::vector<Device>{Device::cuda(0)};
    auto model = two_stage_mlp_over(stages)(kSeed, comm.device());
    msgs[comm.rank()] = error_message([&] { DistributedDataParallel(std::move(model), comm); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(msgs[r], HasSubstr("the ranks spread the model over different numbers of devices"))
        << r;
    EXPECT_THAT(msgs[r], HasSubstr("while the ranks range over 1..2")) << r;
  }
}

TEST(DdpThreadsCuda, NoParameterOnTheCommunicatorsDeviceIsDeviceError) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  run_cpu_ranks(1, {}, [&](Communicator& comm) {
    auto model = two_stage_mlp_over(kTwoGpus)(kSeed, comm.device());
    const std::string msg = error_message([&] { DistributedDataParallel(std::move(model), comm); });
    EXPECT_THAT(msg, HasSubstr("parameter '0.weight' is on cuda:0 but rank 0's communicator is on "
                               "cpu and no parameter is"));
    EXPECT_THAT(msg, HasSubstr("one of its devices (cuda:0, cuda:1)"));
  });
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

 protected:
  std::unique_ptr<Communicator> split_group(int color, int key, Device device) override {
    return inner_.split(color, key, device);
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

// ---- local SGD (periodic averaging) ----

OptimizerConfig plain_sgd() {
  OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.05;
  return oc;
}

// This rank's local SGD on its rows of case `c`: every backward inside no_sync, its own optimizer
// step, and the parameters averaged after every `sync_every`-th step and the last one (the
// optimizer's moments too with `moments`, as --sync-optimizer-state does).
Weights train_local_sgd(Communicator& comm, const Case& c, int sync_every, bool moments = false) {
  DistributedDataParallel ddp(c.model(rank_seed(comm.rank()), comm.device()), comm, c.ddp);
  auto opt = make_optimizer(c.opt, ddp.named_parameters());
  auto no_sync = ddp.no_sync();
  const int64_t rows = comm.size() * kLocalBatch, begin = comm.rank() * kLocalBatch;
  for (int s = 0; s < c.steps; ++s) {
    ddp.zero_grad();
    MSELoss loss;
    loss.forward(ddp.forward(batch_x(s, rows).narrow(begin, kLocalBatch)),
                 batch_y(s, rows).narrow(begin, kLocalBatch));
    ddp.backward(loss.backward());
    opt->step();
    if ((s + 1) % sync_every != 0 && s + 1 != c.steps) continue;
    ddp.average_parameters();
    if (!moments) continue;
    auto state = opt->state_tensors();
    std::vector<Tensor> values;
    for (auto& [name, t] : state) values.push_back(t);
    ddp.average_tensors(values);
    opt->load_state(state, opt->state_scalars());
  }
  return weights(ddp);
}

std::vector<Weights> local_sgd_threads(int world, const Case& c, int sync_every,
                                       bool moments = false) {
  std::vector<Weights> out(world);
  run_cpu_ranks(world, {}, [&](Communicator& comm) {
    out[comm.rank()] = train_local_sgd(comm, c, sync_every, moments);
  });
  return out;
}

// With plain SGD, p - lr * mean(g) = mean(p - lr * g): averaging the parameters after every step
// is DDP. Not bit for bit: DDP rounds once in the gradients' sum and once in the update, local SGD
// in each rank's update and then in the parameters' sum, so they agree within float32 rounding.
TEST(LocalSgdThreads, AveragingAfterEveryStepWithPlainSgdMatchesDdp) {
  for (int world : {2, 3}) {
    Case c;
    c.opt = plain_sgd();
    c.ddp.bucket_bytes = 200;
    c.steps = 6;
    SCOPED_TRACE("world " + std::to_string(world));
    const std::vector<Weights> ddp = train_threads(world, c);
    ASSERT_NE(ddp[0][0].second, weights(*mlp(kSeed))[0].second);
    expect_all_ranks_match(local_sgd_threads(world, c, 1), ddp[0], "local SGD, K = 1");
  }
}

// K = 4 over 6 steps: the ranks drift apart between averagings (rank r sees only its rows), then
// the last step's averaging leaves one model; that is not DDP's, whose replicas never drift.
TEST(LocalSgdThreads, RanksAgreeAfterTheLastAveragingAndDifferFromDdp) {
  for (const OptimizerConfig& oc : {plain_sgd(), sgd_momentum(), adam()})
    for (bool moments : {false, true}) {
      Case c;
      c.opt = oc;
      c.steps = 6;
      SCOPED_TRACE(c.str() + (moments ? " moments averaged" : ""));
      const std::vector<Weights> local = local_sgd_threads(2, c, 4, moments);
      EXPECT_EQ(local[1], local[0]);
      EXPECT_NE(local[0], train_threads(2, c)[0]);
    }
  // The moments change the trajectory: averaged or not, the weights differ (momentum, Adam).
  Case c;
  c.steps = 6;
  EXPECT_NE(local_sgd_threads(2, c, 4, true)[0], local_sgd_threads(2, c, 4, false)[0]);
}

// The communication saved, counted: DDP all-reduces every parameter's gradient each step; local
// SGD with K = 4 all-reduces the parameters after steps 4 and 8 only, a quarter of the bytes
// and of the calls (one per bucket either way).
TEST(LocalSgdThreads, AllReduceBytesAndCallsPerStepFallByK) {
  Case c;
  c.opt = plain_sgd();
  c.steps = 8;
  c.ddp.bucket_bytes = 200;
  int64_t param_bytes = 0;
  const auto reference = mlp(kSeed);
  for (auto& [name, p] : reference->named_parameters())
    param_bytes += static_cast<int64_t>(p->value.nbytes());
  const int64_t buckets = static_cast<int64_t>([&] {
    std::size_t n = 0;
    run_cpu_ranks(1, {}, [&](Communicator& comm) {
      n = DistributedDataParallel(mlp(kSeed), comm, c.ddp).bucket_names().size();
    });
    return n;
  }());
  ASSERT_GT(buckets, 1);
  for (int k : {0, 1, 4}) {  // 0: DDP
    SCOPED_TRACE("K = " + std::to_string(k));
    run_cpu_ranks(2, {}, [&](Communicator& comm) {
      const int64_t calls0 = comm.all_reduce_calls(), bytes0 = comm.all_reduce_bytes();
      DistributedDataParallel probe(mlp(kSeed), comm, c.ddp);  // construction: one check
      const int64_t construct_calls = comm.all_reduce_calls() - calls0;
      const int64_t construct_bytes = comm.all_reduce_bytes() - bytes0;
      const int64_t calls1 = comm.all_reduce_calls(), bytes1 = comm.all_reduce_bytes();
      if (k == 0)
        train_ddp(comm, c);
      else
        train_local_sgd(comm, c, k);
      const int64_t calls = comm.all_reduce_calls() - calls1 - construct_calls;
      const int64_t bytes = comm.all_reduce_bytes() - bytes1 - construct_bytes;
      const int64_t syncs = k == 0 ? c.steps : c.steps / k;
      EXPECT_EQ(calls, syncs * buckets);
      EXPECT_EQ(bytes, syncs * param_bytes);
    });
  }
}

// The parameters are averaged through buffers of their own: the gradients, views of the
// gradient buckets, keep what backward left in them.
TEST(LocalSgdThreads, AveragingParametersLeavesTheGradientsAlone) {
  run_cpu_ranks(2, {}, [&](Communicator& comm) {
    DdpOptions o;
    o.bucket_bytes = 200;
    DistributedDataParallel ddp(mlp(rank_seed(comm.rank())), comm, o);
    ddp.zero_grad();
    MSELoss loss;
    const int64_t rows = 2 * kLocalBatch, begin = comm.rank() * kLocalBatch;
    loss.forward(ddp.forward(batch_x(0, rows).narrow(begin, kLocalBatch)),
                 batch_y(0, rows).narrow(begin, kLocalBatch));
    ddp.backward(loss.backward());
    Weights grads_before, grads_after;
    for (auto& [name, p] : ddp.named_parameters())
      grads_before.emplace_back(name, testing::host_values(p->grad));
    ddp.average_parameters();
    for (auto& [name, p] : ddp.named_parameters())
      grads_after.emplace_back(name, testing::host_values(p->grad));
    EXPECT_EQ(grads_after, grads_before);
    bool nonzero = false;
    for (const auto& [name, g] : grads_before)
      for (double v : g) nonzero = nonzero || v != 0;
    EXPECT_TRUE(nonzero) << "the gradients were zero: the test shows nothing";
  });
}

TEST(LocalSgdThreads, AverageTensorsAveragesEachElementOverTheRanks) {
  for (int world : {2, 3})
    run_cpu_ranks(world, {}, [&](Communicator& comm) {
      DdpOptions o;
      o.bucket_bytes = 40;  // 10 floats: the 7- and 5-element float tensors go in two buffers
      DistributedDataParallel ddp(mlp(kSeed), comm, o);
      const int r = comm.rank();
      std::vector<Tensor> ts{testing::rank_tensor(r, 7, DType::Float32),
                             testing::rank_tensor(r, 5, DType::Float32),
                             testing::rank_tensor(r, 4, DType::Float64)};
      const int64_t calls = comm.all_reduce_calls();
      ddp.average_tensors(ts);
      EXPECT_EQ(comm.all_reduce_calls() - calls, 3);
      const int64_t sizes[] = {7, 5, 4};
      for (int t = 0; t < 3; ++t) {
        const std::vector<double> got = testing::host_values(ts[t]);
        for (int64_t i = 0; i < sizes[t]; ++i) {
          double sum = 0;
          for (int q = 0; q < world; ++q) sum += testing::rank_value(q, i);
          EXPECT_NEAR(got[i], sum / world, 1e-6) << "tensor " << t << " element " << i;
        }
      }
    });
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
