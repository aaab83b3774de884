// The threads backend. One ThreadGroup is shared by the n ranks of one process:
//  - point to point: one FIFO mailbox per (src, dst); send deposits a copy of the tensor and
//    returns, recv waits for the head of its mailbox (so send_recv is send then recv, and a ring
//    of send_recv calls cannot deadlock);
//  - collectives: each rank deposits a pointer to its tensor, all meet at a barrier, each rank
//    reads what it needs from the others' tensors, and a second barrier keeps the tensors alive
//    until every rank has finished reading (and writing: all_reduce's rank r reduces chunk r of
//    every tensor, in rank order, and writes it into all of them, Note [threads all-reduce by
//    chunks], so every rank ends with bit-identical results);
//  - split: each rank deposits its color and key, all meet, and the first member of a color to
//    ask creates that color's new ThreadGroup, which the other members then share.
// Every wait has the group's deadline (Note [collective timeouts]); the first failure (timeout,
// or ranks that disagree about the call) breaks the group, wakes every waiter, and makes every
// later call fail at once instead of waiting for partners that will never come.

#include "parallel/comm/thread_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/stream.h"
#include "kernels/elementwise.h"

namespace minitrain {

namespace {
std::string seconds_str(std::chrono::milliseconds d) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(d.count() < 100 ? 3 : 1) << d.count() / 1000.0 << " s";
  return os.str();
}

std::string describe(const Tensor& t) { return detail::concat(t.dtype(), " ", t.shape()); }

/// GPU work on `t`'s device has finished, so another thread may read or overwrite its memory.
void settle(const Tensor& t) {
  if (t.defined() && t.device().is_cuda()) synchronize(t.device());
}
}  // namespace

class ThreadGroup {
 public:
  ThreadGroup(int size, std::chrono::milliseconds timeout)
      : size_(size),
        timeout_(timeout),
        slots_(size),
        mailboxes_(size * size),
        split_requests_(size) {}

  int size() const { return size_; }

  /// Waits until all ranks have arrived. `signature` describes the call ("all_reduce(sum)
  /// float32 [7]"); ranks that arrive with different signatures break the group.
  void barrier(const char* op, int rank, const std::string& signature) {
    std::unique_lock<std::mutex> lock(mutex_);
    throw_if_broken(op, rank);
    if (arrived_ == 0) {
      signature_ = signature;
      signature_rank_ = rank;
      arrived_mask_.assign(size_, false);
    } else if (signature != signature_) {
      break_group(detail::concat(op, ": rank ", rank, " called ", signature, " but rank ",
                                 signature_rank_, " called ", signature_,
                                 "; every rank must make the same collective calls in the same "
                                 "order with tensors of the same shape and dtype"));
      throw CommError(broken_);
    }
    arrived_mask_[rank] = true;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    const uint64_t my_generation = generation_;
    const bool done = cv_.wait_for(
        lock, timeout_, [&] { return generation_ != my_generation || !broken_.empty(); });
    if (generation_ != my_generation) return;
    if (done) throw_if_broken(op, rank);
    int missing = 0;
    while (missing < size_ && arrived_mask_[missing]) ++missing;
    break_group(detail::concat(op, ": rank ", rank, " waited ", seconds_str(timeout_), " for rank ",
                               missing, " (barrier; ", arrived_, " of ", size_,
                               " ranks arrived); raise CommOptions::timeout if rank ", missing,
                               " is only slow"));
    throw CommError(broken_);
  }

  void set_slot(int rank, const Tensor* t) {
    std::lock_guard<std::mutex> lock(mutex_);
    slots_[rank] = t;
  }
  const Tensor& slot(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    return *slots_[rank];
  }

  /// Collective: the group of the ranks that passed `color` (MPI_Comm_split's order: key, then
  /// rank) and this rank's place in it; {null, -1} for Communicator::kNoColor.
  std::pair<std::shared_ptr<ThreadGroup>, int> split(int rank, int color, int key) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      split_requests_[rank] = {color, key};
    }
    barrier("split", rank, "split");
    std::shared_ptr<ThreadGroup> group;
    int new_rank = -1;
    if (color != Communicator::kNoColor) {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<std::pair<int, int>> members;  // (key, rank) of this color
      for (int r = 0; r < size_; ++r)
        if (split_requests_[r].first == color) members.emplace_back(split_requests_[r].second, r);
      std::sort(members.begin(), members.end());
      for (std::size_t i = 0; i < members.size(); ++i)
        if (members[i].second == rank) new_rank = static_cast<int>(i);
      std::shared_ptr<ThreadGroup>& made = split_groups_[color];
      if (!made) made = std::make_shared<ThreadGroup>(static_cast<int>(members.size()), timeout_);
      group = made;
    }
    // Every member holds its group now. Rank 0 forgets them before it can reach the next split's
    // first barrier, which no rank passes without it, so no split finds another's groups.
    barrier("split", rank, "split");
    if (rank == 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      split_groups_.clear();
    }
    return {group, new_rank};
  }

  void post(int src, int dst, Tensor message) {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_broken("send", src);
    mailboxes_[src * size_ + dst].push_back(std::move(message));
    cv_.notify_all();
  }

  Tensor take(int src, int dst, const Tensor& like) {
    std::unique_lock<std::mutex> lock(mutex_);
    throw_if_broken("recv", dst);
    auto& box = mailboxes_[src * size_ + dst];
    const bool ready =
        cv_.wait_for(lock, timeout_, [&] { return !box.empty() || !broken_.empty(); });
    if (!box.empty()) {
      Tensor message = std::move(box.front());
      box.pop_front();
      if (message.shape() != like.shape() || message.dtype() != like.dtype()) {
        break_group(detail::concat("recv: rank ", dst, " expected ", describe(like), " from rank ",
                                   src, " but it sent ", describe(message),
                                   "; a send must be matched by a recv of the same shape"));
        throw CommError(broken_);
      }
      return message;
    }
    if (ready)
      MT_THROW(CommError, "recv: rank ", dst, " stopped waiting for rank ", src,
               ": the group is broken: ", broken_);
    break_group(detail::concat("recv: rank ", dst, " waited ", seconds_str(timeout_), " for rank ",
                               src, "; raise CommOptions::timeout if rank ", src, " is only slow"));
    throw CommError(broken_);
  }

 private:
  void break_group(std::string why) {  // with mutex_ held
    if (broken_.empty()) broken_ = std::move(why);
    cv_.notify_all();
  }
  void throw_if_broken(const char* op, int rank) const {  // with mutex_ held
    if (!broken_.empty())
      MT_THROW(CommError, op, ": rank ", rank, " cannot go on, the group is broken: ", broken_);
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string broken_;  // the first failure; non-empty = broken
  // barrier
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<bool> arrived_mask_;
  std::string signature_;
  int signature_rank_ = 0;
  // collectives: each rank's tensor, valid between the two barriers of one call
  std::vector<const Tensor*> slots_;
  // point to point: FIFO per (src, dst) at src * size + dst
  std::vector<std::deque<Tensor>> mailboxes_;
  // split: each rank's (color, key), and the groups made so far by the split in progress
  std::vector<std::pair<int, int>> split_requests_;
  std::map<int, std::shared_ptr<ThreadGroup>> split_groups_;
};

namespace {

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int rank, Device device,
                     CommOptions options)
      : Communicator(options), group_(std::move(group)), rank_(rank), device_(device) {}

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return group_->size(); }
  Device device() const noexcept override { return device_; }
  std::string backend() const override { return "threads"; }

  // Note [threads all-reduce by chunks]: rank r alone reduces chunk r of the n tensors (in rank
  // order, so the result is deterministic) and writes it into chunk r of every rank's tensor; no
  // other rank reads or writes chunk r, so one pair of barriers suffices. Each rank reads the
  // tensor's length once and writes it once (with 1/n of it as scratch), instead of every rank
  // reducing the whole tensor for itself: on 2 CPU ranks that is the difference between the
  // all-reduce costing a DDP step about 2 and about 9 passes over the gradients.
  void native_all_reduce(Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t, "t");
    const std::string signature =
        detail::concat("all_reduce(", reduce_op_name(op), ") ", describe(t));
    const int n = size();
    const int64_t length = t.numel();
    const int64_t begin = length * rank_ / n, chunk = length * (rank_ + 1) / n - begin;
    collective("all_reduce", signature, t, [&] {
      if (chunk == 0 || n == 1) return;  // one rank: its tensor is the sum and the average
      auto part = [&](int r) { return group_->slot(r).flatten().narrow(begin, chunk).to(device_); };
      auto fold = [&](Tensor& out, const Tensor& a, const Tensor& b) {
        if (op == ReduceOp::Max)
          maximum(out, a, b);
        else
          add(out, a, b);
      };
      // Ranks 0 and 1 fold straight into their own chunk (the first fold reads it as the first
      // or second operand before writing it); a later rank's own chunk is still to be read after
      // the first fold, so it folds into scratch.
      const bool in_place = rank_ <= 1;
      Tensor mine = t.flatten().narrow(begin, chunk);
      if (!in_place &&
          (!scratch_.defined() || scratch_.numel() < chunk || scratch_.dtype() != t.dtype()))
        scratch_ = Tensor::empty({chunk}, t.dtype(), device_);
      Tensor acc = in_place ? mine : scratch_.narrow(0, chunk);
      fold(acc, part(0), part(1));
      for (int r = 2; r < n; ++r) fold(acc, acc, part(r));
      if (op == ReduceOp::Avg) scale(acc, acc, 1.0 / n);
      // Every rank handed its own tensor over for this call (a view of it shares its storage):
      // chunk `rank_` of each gets the result, and no other rank touches that chunk.
      for (int r = 0; r < n; ++r)
        if (!(in_place && r == rank_)) group_->slot(r).flatten().narrow(begin, chunk).copy_(acc);
      settle(acc);
      for (int r = 0; r < n; ++r) settle(group_->slot(r));
    });
  }

  void broadcast(Tensor& t, int root) override {
    check_tensor("broadcast", t, "t");
    check_peer("broadcast", root, "root");
    collective("broadcast", detail::concat("broadcast(root ", root, ") ", describe(t)), t, [&] {
      if (rank_ != root) t.copy_(group_->slot(root));
      settle(t);
    });
  }

  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override {
    check_tensor("reduce_scatter", out, "out");
    check_tensor("reduce_scatter", in, "in");
    const int64_t m = out.numel();
    check_chunks("reduce_scatter", in, "in", out, "out");
    const std::string signature = detail::concat("reduce_scatter(", reduce_op_name(op), ") ",
                                                 describe(in), " -> ", describe(out));
    Tensor flat_out = out.flatten();
    collective("reduce_scatter", signature, in, [&] {
      // `out` is read by nobody else, so the reduction goes straight into it.
      for (int r = 0; r < size(); ++r) {
        const Tensor x = group_->slot(r).flatten().narrow(rank_ * m, m).to(device_);
        if (r == 0)
          flat_out.copy_(x);
        else if (op == ReduceOp::Max)
          maximum(flat_out, flat_out, x);
        else
          add(flat_out, flat_out, x);
      }
      if (op == ReduceOp::Avg) scale(flat_out, flat_out, 1.0 / size());
      settle(out);
    });
  }

  void all_gather(Tensor& out, const Tensor& in) override {
    check_tensor("all_gather", out, "out");
    check_tensor("all_gather", in, "in");
    const int64_t m = in.numel();
    check_chunks("all_gather", out, "out", in, "in");
    Tensor flat_out = out.flatten();
    collective("all_gather", detail::concat("all_gather ", describe(in)), in, [&] {
      for (int r = 0; r < size(); ++r) flat_out.narrow(r * m, m).copy_(group_->slot(r).flatten());
      settle(out);
    });
  }

  void send(const Tensor& t, int peer) override {
    check_tensor("send", t, "t");
    check_peer("send", peer, "peer");
    Tensor copy = t.clone();
    settle(copy);
    group_->post(rank_, peer, std::move(copy));
  }

  void recv(Tensor& t, int peer) override {
    check_tensor("recv", t, "t");
    check_peer("recv", peer, "peer");
    t.copy_(group_->take(peer, rank_, t));
    settle(t);
  }

  void send_recv(const Tensor& send_t, int send_peer, Tensor& recv_t, int recv_peer) override {
    send(send_t, send_peer);  // buffered: returns at once, so every rank reaches its recv
    recv(recv_t, recv_peer);
  }

  void barrier() override { group_->barrier("barrier", rank_, "barrier"); }

 protected:
  std::unique_ptr<Communicator> split_group(int color, int key, Device device) override {
    auto [group, rank] = group_->split(rank_, color, key);
    if (!group) return nullptr;
    return std::make_unique<ThreadCommunicator>(std::move(group), rank, device, options_);
  }

 private:
  /// Deposit `mine`, meet, run `work` (reading the others' slots), meet again.
  template <typename F>
  void collective(const char* op, const std::string& signature, const Tensor& mine, F&& work) {
    settle(mine);
    group_->set_slot(rank_, &mine);
    group_->barrier(op, rank_, signature);
    work();
    group_->barrier(op, rank_, signature);
  }

  void check_tensor(const char* op, const Tensor& t, const char* name) const {
    MT_CHECK(t.defined(), op, ": `", name, "` is an undefined tensor (rank ", rank_, ")");
    MT_CHECK_AS(DeviceError, t.device() == device_, op, ": `", name, "` is on ", t.device(),
                " but rank ", rank_, "'s communicator works on ", device_);
    MT_CHECK_AS(DTypeError, t.dtype() == DType::Float32 || t.dtype() == DType::Float64, op, ": `",
                name, "` is ", t.dtype(), "; collectives take float32 or float64");
  }

  std::shared_ptr<ThreadGroup> group_;
  const int rank_;
  const Device device_;
  Tensor scratch_;  // this rank's chunk of an all-reduce, reused across calls
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(
    const std::vector<Device>& devices, CommOptions options) {
  MT_CHECK_AS(ValueError, !devices.empty(), "make_thread_communicators: no devices given");
  MT_CHECK_AS(ValueError, options.timeout.count() > 0,
              "make_thread_communicators: the timeout must be positive, got ",
              options.timeout.count(), " ms");
  auto group = std::make_shared<ThreadGroup>(static_cast<int>(devices.size()), options.timeout);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (size_t r = 0; r < devices.size(); ++r)
    comms.push_back(
        std::make_unique<ThreadCommunicator>(group, static_cast<int>(r), devices[r], options));
  return comms;
}

}  // namespace minitrain
