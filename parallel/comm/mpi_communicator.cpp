// The MPI backend. Each operation is the non-blocking MPI call completed by polling MPI_Testall
// against the deadline (Note [MPI timeouts] in the header; Note [polling MPI requests] below);
// the all-reduce is MPI's point-to-point messages on recursive doubling or the ring (Note [the
// MPI all-reduce] in the header). Errors come back as return codes (MPI_ERRORS_RETURN on our own
// duplicate communicator) and become CommError. A GPU communicator's tensors go through the
// pinned staging buffer (Note [staging CUDA tensors through MPI] in the header): host_side
// before the MPI call, copy_back after it.

#include "parallel/comm/mpi_communicator.h"

#include "kernels/cast.h"
#include "kernels/elementwise.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "core/error.h"
#include "core/stream.h"
#include "parallel/comm/ring_chunks.h"

namespace minitrain {
namespace {

constexpr int kPointToPointTag = 17;  // send/recv/send_recv; MPI keeps (source, tag) in order
constexpr int kAllReduceTag = 18;     // the all-reduce's own messages, apart from the user's

// Note [polling MPI requests]: Open MPI moves a message only inside an MPI call (its progress
// engine runs in MPI_Testall), so a wait must poll often while data flows, yet not burn a core
// that other ranks or this rank's compute threads need while a peer is late or stuck:
//  - for the first kSpinFor of a wait, MPI_Testall back to back: a small message's round trip
//    is 1-2 us, and any pause would be most of it (the first kClocklessPolls polls do not even
//    read the clock, which costs about 50 ns here, as much as a poll);
//  - then, until kYieldFor, a sched_yield between polls: the core goes to any other runnable
//    thread (oversubscribed ranks, compute threads), and polling resumes at once if none is;
//  - after that, a sleep between polls of 1/kSleepFraction of the time waited so far (at most
//    kMaxSleep): a peer that arrives late is seen within about 1.6% of the wait, and a stuck one
//    costs a few polls a second until the deadline.
// Over shared memory a large message is copied inside a single poll (Open MPI's single-copy
// CMA), so the pauses cost a transfer nothing; transports that move a message in fragments over
// many polls (TCP, shared memory without CMA) are still polled at least every kMaxSleep.
constexpr int kClocklessPolls = 64;
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kYieldFor = std::chrono::milliseconds(2);
constexpr int kSleepFraction = 64;
constexpr auto kMaxSleep = std::chrono::milliseconds(1);

// Below this many bytes recursive doubling (latency-bound: log2 n messages of the whole tensor);
// from it the ring (bandwidth-bound: 2(n-1) messages of 1/n of it, and half the reduction work of
// recursive doubling on 2 ranks). Measured on 2 ranks over shared memory, against MPI_Allreduce
// in the same run (bench/mpi_allreduce_bench.cpp): recursive doubling 1.1-1.3x of it at 16-64
// KiB but 0.75-0.9x at 1-16 MiB, the ring 1.0x from 16 KiB and 0.6-0.9x below.
constexpr std::size_t kRingMinBytes = std::size_t(64) << 10;
// Note [small messages in pieces]: Open MPI's shared-memory transport (vader) sends a message of
// up to 4 KiB, header included, at once (eager); a larger one goes by rendezvous, a handshake and
// a single copy that cost about 5 us more per exchange here (a 4 KiB recursive doubling ran at
// 0.4x of MPI_Allreduce, which does not pay it). So a message of 2-16 KiB goes as pieces of
// kPieceBytes, all posted at once (4 KiB: 1.0-1.1x). Larger messages go whole: there the
// handshake is small next to the transfer.
constexpr std::size_t kPieceBytes = 2048;
constexpr int kMaxPieces = 8;
// The ring's reduce-scatter receives into scratch a slice at a time: large enough that a
// message's handshake (a few microseconds) is lost in its transfer, small enough that the scratch
// stays a few MiB whatever the tensor.
constexpr std::size_t kRingSliceBytes = std::size_t(4) << 20;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return detail::concat("MPI error ", code);
  return std::string(text, static_cast<std::size_t>(len));
}

void check_mpi(int rc, const char* op, const char* call) {
  if (rc == MPI_SUCCESS) return;
  MT_THROW(CommError, op, ": ", call, " failed: ", mpi_error_string(rc));
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::BFloat16:
    case DType::Float16:
      return MPI_UINT16_T;  // MPI has no 16-bit float: the bits, reduced by the ops below
  }
  MT_THROW(DTypeError, "mpi: no MPI type for ", dtype_name(t));
}

// Reductions of 16-bit floats (MPI_Op_create user functions over MPI_UINT16_T): each pair is
// widened to float32, combined, and rounded back, as NCCL reduces bfloat16 and float16.
template <typename T, bool kMax>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = to_float(a[i]), y = to_float(b[i]);
    b[i] = narrow<T>(kMax ? (x > y ? x : y) : x + y);
  }
}

MPI_Op create_op(MPI_User_function* f) {
  MPI_Op op;
  MPI_Op_create(f, /*commute=*/1, &op);
  return op;  // kept for the process's life: MPI_Finalize releases it
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  const bool max = op == ReduceOp::Max;
  if (t == DType::BFloat16) {
    static const MPI_Op sum = create_op(&reduce_16bit<BFloat16, false>);
    static const MPI_Op mx = create_op(&reduce_16bit<BFloat16, true>);
    return max ? mx : sum;
  }
  if (t == DType::Float16) {
    static const MPI_Op sum = create_op(&reduce_16bit<Half, false>);
    static const MPI_Op mx = create_op(&reduce_16bit<Half, true>);
    return max ? mx : sum;
  }
  return max ? MPI_MAX : MPI_SUM;
}  // Avg: Sum, then scale

// t *= factor for Avg; a 16-bit tensor through float32 (the element-wise kernels compute in
// float32 or float64 only).
void scale_in_place(Tensor& t, double factor) {
  if (!is_half(t.dtype())) return scale(t, t, factor);
  Tensor wide = cast(t, DType::Float32);
  scale(wide, wide, factor);
  cast(t, wide);
}

int mpi_count(const Tensor& t, const char* op) {
  MT_CHECK_AS(ValueError, t.numel() <= INT_MAX, op, ": ", t.numel(),
              " elements exceed MPI's int count (", INT_MAX, "); split the tensor");
  return static_cast<int>(t.numel());
}

// Two tensors share the staging buffer (send and recv, in and out): the second starts on a
// cache line.
std::size_t aligned(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

std::string describe(const Tensor& t) {
  return detail::concat(t.numel(), " ", dtype_name(t.dtype()));
}

// A message shorter than the posted recv arrives without error in MPI; minitrain's contract is
// "the recv of the same shape", so a short one is a mismatch between the ranks' programs.
void check_received(const MPI_Status& status, const Tensor& t, int peer, const char* op) {
  int count = 0;
  MPI_Get_count(&status, mpi_type(t.dtype()), &count);
  MT_CHECK_AS(ShapeError, count == t.numel(), op, ": rank ", peer, " sent ", count,
              " elements but this rank posted a recv of ", describe(t),
              "; send and recv must have the same shape and dtype");
}

}  // namespace

// ---- MpiRuntime ----

MpiRuntime::MpiRuntime() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&thread_level_);
    return;
  }
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "mpi",
            "MPI_Init_thread");
  MT_CHECK_AS(CommError, provided >= MPI_THREAD_SERIALIZED,
              "mpi: the MPI library provides only thread level ", provided,
              " (need MPI_THREAD_SERIALIZED or better); rebuild Open MPI with thread support");
  thread_level_ = provided;
  owns_ = true;
}

MpiRuntime::~MpiRuntime() {
  if (!owns_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MpiRuntime& MpiRuntime::instance() {
  static MpiRuntime runtime;
  return runtime;
}

void MpiRuntime::note_timeout(std::chrono::milliseconds timeout) {
  long long ms = leave_timeout_ms_.load();
  while (timeout.count() > ms && !leave_timeout_ms_.compare_exchange_weak(ms, timeout.count())) {
  }
}

void MpiRuntime::leave_job_after_failure(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  if (MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS || size <= 1) return;
  const int code = exit_code == 0 ? 1 : exit_code;
  // The error line the caller just printed must reach the terminal before the job is torn down.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  if (!lost_a_peer()) {
    // Every rank may be leaving together (the same error everywhere, or an orderly stop on a
    // signal, where rank 0 may still be writing the checkpoint): a barrier with the job's
    // deadline tells that apart from a peer that is still training, stuck or stopped.
    long long timeout_ms = leave_timeout_ms_.load();
    if (timeout_ms <= 0)
      timeout_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(CommOptions{}.timeout).count();
    MPI_Request request;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &request) == MPI_SUCCESS) {
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
      for (int done = 0;;) {
        if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (done) return;  // all here: MPI_Finalize at exit has nobody to wait for
        if (std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort returned (it should not): still end now
}

// ---- MpiCommunicator ----

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(CommOptions options, Device device) {
  MpiRuntime::instance();
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, options, device);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, CommOptions options, Device device)
    : Communicator(options), device_(device) {
  check_available(device_);
  MpiRuntime::instance();
  MpiRuntime::note_timeout(options.timeout);
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &dup), "mpi", "MPI_Comm_dup");
  adopt(dup);
}

MpiCommunicator::MpiCommunicator(Adopt, MPI_Comm comm, CommOptions options, Device device)
    : Communicator(options), device_(device) {
  adopt(comm);
}

void MpiCommunicator::adopt(MPI_Comm comm) {
  comm_ = comm;
  int rc = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(comm_, &rank_);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(comm_, &size_);
  if (rc != MPI_SUCCESS) MPI_Comm_free(&comm_);  // a throwing constructor runs no destructor
  check_mpi(rc, "mpi", "MPI_Comm_set_errhandler/rank/size");
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // A request given up on may have completed since (a late peer); one that has not is leaked:
  // MPI forbids freeing a pending collective request.
  for (Pending& p : abandoned_) {
    int done = 0;
    MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
    if (!done) {  // the buffers stay alive on purpose: MPI may still write into them
      static auto* leaked = new std::vector<Tensor>();
      leaked->insert(leaked->end(), p.buffers.begin(), p.buffers.end());
    }
  }
  // A communicator that gave up on an operation is leaked too: messages of it may still be on
  // their way to a peer or waiting there unmatched (a small send completes here as soon as it is
  // queued), and once freed everywhere its context id could go to the next communicator the ranks
  // create, where the peer would match them against that one's receives (MPI_ERR_TRUNCATE, or
  // wrong sums).
  if (comm_ != MPI_COMM_NULL && broken_.empty()) MPI_Comm_free(&comm_);
}

void MpiCommunicator::check_usable(const char* op) const {
  MT_CHECK_AS(CommError, broken_.empty(), op, ": this MPI communicator (rank ", rank_,
              ") is unusable after an earlier failure (", broken_,
              "); create a new communicator or end the job");
}

void MpiCommunicator::check_tensor(const Tensor& t, const char* op, const char* what) const {
  MT_CHECK_AS(ValueError, t.defined(), op, ": ", what, " is an undefined tensor");
  MT_CHECK_AS(DeviceError, t.device() == device_, op, ": ", what, " is on ", t.device(),
              " but this MPI communicator (rank ", rank_, ") exchanges tensors on ", device_,
              "; move it there with .to(", device_, ") or make the communicator on ", t.device());
}

void MpiCommunicator::reserve_staging(std::size_t bytes) {
  if (device_.is_cpu()) return;
  if (staging_.defined() && staging_.nbytes() >= bytes) return;
  // Grown by half again, so a run whose sizes creep up reallocates a few times only; a Pending
  // request of a timed-out operation keeps the old buffer alive.
  std::size_t want = bytes;
  if (staging_.defined()) want = std::max(want, staging_.nbytes() + staging_.nbytes() / 2);
  staging_ = Tensor::empty_pinned(Shape({static_cast<int64_t>((want + 7) / 8)}), DType::Float64);
}

void* MpiCommunicator::host_side(const Tensor& t, std::size_t offset, bool fill) {
  if (device_.is_cpu()) return t.raw_data();
  MT_CHECK_AS(Error, staging_.defined() && offset + t.nbytes() <= staging_.nbytes(),
              "mpi: staging buffer of ", staging_.defined() ? staging_.nbytes() : 0,
              " bytes is too small for ", t.nbytes(), " bytes at offset ", offset,
              " (reserve_staging was not called)");
  void* host = static_cast<char*>(staging_.raw_data()) + offset;
  // On the caller's current stream, after the work that produced `t`; returns when the bytes are
  // on the host (copy_bytes synchronises the stream).
  if (fill) copy_bytes(host, Device::cpu(), t.raw_data(), device_, t.nbytes());
  return host;
}

void MpiCommunicator::copy_back(Tensor& t, const void* host) {
  if (device_.is_cpu()) return;
  // Queued on the current stream; copy_bytes waits for it, so the staging buffer is free again
  // for the next operation as soon as this returns.
  copy_bytes(t.raw_data(), device_, host, Device::cpu(), t.nbytes());
}

bool MpiCommunicator::poll_until(int n, MPI_Request* requests, MPI_Status* statuses, const char* op,
                                 Clock::time_point deadline) {
  Clock::time_point start;
  for (int polls = 0;; ++polls) {
    int done = 0;
    int rc = MPI_Testall(n, requests, &done, statuses);
    if (rc == MPI_ERR_IN_STATUS) {
      for (int i = 0; i < n; ++i)
        if (statuses[i].MPI_ERROR != MPI_SUCCESS) rc = statuses[i].MPI_ERROR;
    }
    if (rc != MPI_SUCCESS) record_lost_peer();  // a transport error: most likely a peer that died
    check_mpi(rc, op, "MPI_Testall");
    if (done) return true;
    // Note [polling MPI requests]
    if (polls < kClocklessPolls) continue;
    const auto now = Clock::now();
    if (polls == kClocklessPolls) start = now;
    if (now >= deadline) return false;
    const auto waited = now - start;
    if (waited < kSpinFor) continue;
    if (waited < kYieldFor) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(
        std::min<Clock::duration>({waited / kSleepFraction, kMaxSleep, deadline - now}));
  }
}

void MpiCommunicator::give_up(int n, MPI_Request* requests, const char* op,
                              const std::string& waiting_for, Clock::time_point start,
                              std::vector<Tensor> buffers, const std::vector<int>& cancellable) {
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  for (int i : cancellable) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests[i]);
    MPI_Wait(&requests[i], MPI_STATUS_IGNORE);  // a cancelled recv completes locally
  }
  bool abandoned = false;
  for (int i = 0; i < n; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    abandoned_.push_back(Pending{requests[i], buffers});
    abandoned = true;
  }
  std::string message = detail::concat(op, ": rank ", rank_, " waited ", waited, " s for ",
                                       waiting_for, " (timeout ", options_.timeout.count(),
                                       " ms); is that rank alive and calling the same operations "
                                       "in the same order? Check its log");
  if (abandoned) broken_ = message;
  record_lost_peer();
  throw CommError(message);
}

std::vector<MPI_Status> MpiCommunicator::wait_all(std::vector<MPI_Request>& requests,
                                                  const char* op, const std::string& waiting_for,
                                                  std::vector<Tensor> buffers,
                                                  const std::vector<int>& cancellable) {
  const auto start = Clock::now();
  const int n = static_cast<int>(requests.size());
  std::vector<MPI_Status> statuses(requests.size());
  if (poll_until(n, requests.data(), statuses.data(), op, start + options_.timeout))
    return statuses;
  give_up(n, requests.data(), op, waiting_for, start, std::move(buffers), cancellable);
}

char* MpiCommunicator::reserve_scratch(std::size_t bytes) {
  if (!scratch_.defined() || scratch_.nbytes() < bytes) {
    std::size_t want = bytes;
    if (scratch_.defined()) want = std::max(want, scratch_.nbytes() + scratch_.nbytes() / 2);
    scratch_ = Tensor::empty(Shape({static_cast<int64_t>((want + 7) / 8)}), DType::Float64);
  }
  return static_cast<char*>(scratch_.raw_data());
}

namespace {
// How many messages carry `count` elements of `elem_bytes` in an exchange (Note [small messages
// in pieces]); both ends of a link derive it from the same count.
int pieces_for(int count, std::size_t elem_bytes) {
  const std::size_t bytes = static_cast<std::size_t>(count) * elem_bytes;
  if (bytes <= kPieceBytes || bytes > kPieceBytes * kMaxPieces) return 1;
  const int per_piece = static_cast<int>(std::max<std::size_t>(1, kPieceBytes / elem_bytes));
  return (count + per_piece - 1) / per_piece;
}
}  // namespace

void MpiCommunicator::exchange(const Reduction& r, const char* send, int send_count, int send_peer,
                               char* recv, int recv_count, int recv_peer, const char* phase,
                               int step) {
  const char* name = "all_reduce";
  const int recv_pieces = recv_peer == MPI_PROC_NULL ? 1 : pieces_for(recv_count, r.elem_bytes);
  const int send_pieces = send_peer == MPI_PROC_NULL ? 1 : pieces_for(send_count, r.elem_bytes);
  // Piece k of m holds elements [count * k / m, count * (k + 1) / m).
  auto piece = [](int count, int k, int m) {
    const int64_t begin = int64_t(count) * k / m, end = int64_t(count) * (k + 1) / m;
    return std::pair<int64_t, int>(begin, static_cast<int>(end - begin));
  };
  MPI_Request req[2 * kMaxPieces];
  MPI_Status st[2 * kMaxPieces];
  const int n = recv_pieces + send_pieces;
  std::fill(req, req + n, MPI_REQUEST_NULL);
  // The recvs first, so that no rank's send waits on a recv nobody has posted.
  for (int k = 0; k < recv_pieces; ++k) {
    const auto [begin, len] = piece(recv_count, k, recv_pieces);
    const int rc = MPI_Irecv(recv + begin * int64_t(r.elem_bytes), len, r.type, recv_peer,
                             kAllReduceTag, comm_, &req[k]);
    if (rc != MPI_SUCCESS) {
      for (int j = 0; j < k; ++j) {
        MPI_Cancel(&req[j]);
        MPI_Wait(&req[j], MPI_STATUS_IGNORE);
      }
      check_mpi(rc, name, "MPI_Irecv");
    }
  }
  for (int k = 0; k < send_pieces; ++k) {
    const auto [begin, len] = piece(send_count, k, send_pieces);
    const int rc = MPI_Isend(const_cast<char*>(send) + begin * int64_t(r.elem_bytes), len, r.type,
                             send_peer, kAllReduceTag, comm_, &req[recv_pieces + k]);
    if (rc != MPI_SUCCESS) {
      // A transport error: the recvs are cancelled, the sends already posted cannot be taken
      // back (kept as Pending), and the communicator is unusable from here.
      for (int j = 0; j < recv_pieces; ++j) {
        MPI_Cancel(&req[j]);
        MPI_Wait(&req[j], MPI_STATUS_IGNORE);
      }
      for (int j = recv_pieces; j < recv_pieces + k; ++j)
        abandoned_.push_back(Pending{req[j], {r.t, staging_, scratch_}});
      broken_ = detail::concat(name, ": MPI_Isend to rank ", send_peer,
                               " failed: ", mpi_error_string(rc));
      record_lost_peer();
      check_mpi(rc, name, "MPI_Isend");
    }
  }
  if (!poll_until(n, req, st, name, r.deadline)) {
    std::string peers;
    if (recv_peer != MPI_PROC_NULL) peers = detail::concat("rank ", recv_peer, " to send");
    if (send_peer != MPI_PROC_NULL)
      peers += detail::concat(peers.empty() ? "" : " and ", "rank ", send_peer, " to receive");
    std::vector<int> recvs(recv_pieces);
    for (int j = 0; j < recv_pieces; ++j) recvs[j] = j;
    give_up(n, req, name,
            detail::concat(peers, " (", phase, " step ", step, " of the all-reduce of ", r.count,
                           " ", dtype_name(r.t.dtype()), ")"),
            r.start, {r.t, staging_, scratch_}, recvs);
  }
  if (recv_peer == MPI_PROC_NULL) return;
  int got = 0;
  for (int k = 0; k < recv_pieces; ++k) {
    int piece_got = 0;
    MPI_Get_count(&st[k], r.type, &piece_got);
    got += piece_got;
  }
  MT_CHECK_AS(ShapeError, got == recv_count, name, ": rank ", recv_peer, " sent ", got,
              " elements where rank ", rank_, " expected ", recv_count, " (", phase, " step ", step,
              " of the all-reduce of ", r.count, " ", dtype_name(r.t.dtype()),
              "); every rank must all-reduce a tensor of the same shape and dtype");
}

// Recursive doubling (Thakur, Rabenseifner & Gropp), MPICH's handling of a rank count that is not
// a power of two: with n = 2^k + rem, the first 2 rem ranks pair up, each even one hands its
// tensor to the odd one above it and sits out; the 2^k ranks left exchange whole tensors with the
// rank `mask` away for mask = 1, 2, 4, ..., each folding in the other's partial result, so after
// k steps each holds the full reduction; the odd ranks then hand it back to their even partners.
void MpiCommunicator::all_reduce_recursive_doubling(const Reduction& r) {
  const std::size_t bytes = static_cast<std::size_t>(r.count) * r.elem_bytes;
  char* tmp = reserve_scratch(bytes);
  int pof2 = 1;
  while (pof2 * 2 <= size_) pof2 *= 2;
  const int rem = size_ - pof2;
  int vrank = rank_ - rem;  // this rank's place among the 2^k, or -1 while it sits out
  if (rank_ < 2 * rem) {
    if (rank_ % 2 == 0) {
      exchange(r, r.buf, r.count, rank_ + 1, nullptr, 0, MPI_PROC_NULL, "fold", 0);
      vrank = -1;
    } else {
      exchange(r, nullptr, 0, MPI_PROC_NULL, tmp, r.count, rank_ - 1, "fold", 0);
      check_mpi(MPI_Reduce_local(tmp, r.buf, r.count, r.type, r.op), "all_reduce",
                "MPI_Reduce_local");
      vrank = rank_ / 2;
    }
  }
  if (vrank >= 0) {
    int step = 0;
    for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
      const int vpeer = vrank ^ mask;
      const int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;
      exchange(r, r.buf, r.count, peer, tmp, r.count, peer, "recursive-doubling", step);
      // Both ends combine the same two partial results: bit-identical, the ops being commutative.
      check_mpi(MPI_Reduce_local(tmp, r.buf, r.count, r.type, r.op), "all_reduce",
                "MPI_Reduce_local");
    }
  }
  if (rank_ < 2 * rem) {
    if (rank_ % 2 == 1)
      exchange(r, r.buf, r.count, rank_ - 1, nullptr, 0, MPI_PROC_NULL, "unfold", 0);
    else
      exchange(r, nullptr, 0, MPI_PROC_NULL, r.buf, r.count, rank_ + 1, "unfold", 0);
  }
}

using ring_chunks::chunk_range;
using ring_chunks::mod;
using ring_chunks::Range;
using ring_chunks::slice_range;

// The ring (parallel/comm/ring.cpp explains the chunk arithmetic): reduce-scatter in n-1 steps,
// then all-gather in n-1 steps, each rank sending to rank+1 and receiving from rank-1.
void MpiCommunicator::all_reduce_ring(const Reduction& r) {
  const int n = size_, next = mod(rank_ + 1, n), prev = mod(rank_ - 1, n);
  const int64_t largest = (r.count + n - 1) / n;
  const int64_t slice = std::max<int64_t>(1, static_cast<int64_t>(kRingSliceBytes / r.elem_bytes));
  // Every rank loops over the slices of the largest chunk, so that the k-th message on each link
  // is the k-th slice of the same chunk at both of its ends.
  const int64_t slices = std::max<int64_t>(1, (largest + slice - 1) / slice);
  char* tmp = reserve_scratch(static_cast<std::size_t>(std::min(largest, slice)) * r.elem_bytes);
  auto at = [&](int64_t element) { return r.buf + element * static_cast<int64_t>(r.elem_bytes); };
  // Reduce-scatter: step k sends chunk r-k and folds chunk r-k-1 into ours, so that after n-1
  // steps chunk r+1 holds every rank's contribution.
  for (int k = 0; k < n - 1; ++k) {
    const Range send_c = chunk_range(r.count, n, mod(rank_ - k, n));
    const Range recv_c = chunk_range(r.count, n, mod(rank_ - k - 1, n));
    for (int64_t s = 0; s < slices; ++s) {
      const Range out = slice_range(send_c, slice, s), in = slice_range(recv_c, slice, s);
      exchange(r, at(out.begin), static_cast<int>(out.length), next, tmp,
               static_cast<int>(in.length), prev, "ring reduce-scatter", k);
      check_mpi(MPI_Reduce_local(tmp, at(in.begin), static_cast<int>(in.length), r.type, r.op),
                "all_reduce", "MPI_Reduce_local");
    }
  }
  // All-gather: step k passes on chunk r+1-k, complete, and receives chunk r-k in place.
  for (int k = 0; k < n - 1; ++k) {
    const Range out = chunk_range(r.count, n, mod(rank_ + 1 - k, n));
    const Range in = chunk_range(r.count, n, mod(rank_ - k, n));
    exchange(r, at(out.begin), static_cast<int>(out.length), next, at(in.begin),
             static_cast<int>(in.length), prev, "ring all-gather", k);
  }
}

void MpiCommunicator::native_all_reduce(Tensor& t, ReduceOp op) {
  const char* name = "all_reduce";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  const int count = mpi_count(t, name);
  if (size_ == 1 || count == 0) return;  // nothing to exchange; Avg over one rank is the identity
  reserve_staging(t.nbytes());
  const auto start = Clock::now();
  Reduction r{t,
              static_cast<char*>(host_side(t, 0, /*fill=*/true)),
              count,
              dtype_size(t.dtype()),
              mpi_type(t.dtype()),
              mpi_op(op, t.dtype()),
              start,
              start + options_.timeout};
  // Note [the MPI all-reduce]
  if (t.nbytes() < kRingMinBytes || count < size_)
    all_reduce_recursive_doubling(r);
  else
    all_reduce_ring(r);
  copy_back(t, r.buf);
  if (op == ReduceOp::Avg) scale_in_place(t, 1.0 / size_);
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  const char* name = "broadcast";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  check_peer(name, root, "root");
  reserve_staging(t.nbytes());
  void* buf = host_side(t, 0, /*fill=*/rank_ == root);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Ibcast(buf, mpi_count(t, name), mpi_type(t.dtype()), root, comm_, &req[0]), name,
            "MPI_Ibcast");
  wait_all(req, name,
           detail::concat(rank_ == root ? "the other ranks" : "root rank ",
                          rank_ == root ? "" : std::to_string(root), " (MPI_Ibcast of ",
                          describe(t), ")"),
           {t, staging_});
  if (rank_ != root) copy_back(t, buf);
}

void MpiCommunicator::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  const char* name = "reduce_scatter";
  check_usable(name);
  check_tensor(out, name, "out");
  check_tensor(in, name, "in");
  check_chunks(name, in, "in", out, "out");
  reserve_staging(aligned(in.nbytes()) + out.nbytes());
  void* in_buf = host_side(in, 0, /*fill=*/true);
  void* out_buf = host_side(out, aligned(in.nbytes()), /*fill=*/false);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Ireduce_scatter_block(in_buf, out_buf, mpi_count(out, name), mpi_type(out.dtype()),
                                      mpi_op(op, out.dtype()), comm_, &req[0]),
            name, "MPI_Ireduce_scatter_block");
  wait_all(req, name,
           detail::concat("the other ", size_ - 1, " ranks (MPI_Ireduce_scatter_block of ",
                          describe(in), ")"),
           {out, in, staging_});
  copy_back(out, out_buf);
  if (op == ReduceOp::Avg) scale_in_place(out, 1.0 / size_);
}

void MpiCommunicator::all_gather(Tensor& out, const Tensor& in) {
  const char* name = "all_gather";
  check_usable(name);
  check_tensor(out, name, "out");
  check_tensor(in, name, "in");
  check_chunks(name, out, "out", in, "in");
  reserve_staging(aligned(in.nbytes()) + out.nbytes());
  void* in_buf = host_side(in, 0, /*fill=*/true);
  void* out_buf = host_side(out, aligned(in.nbytes()), /*fill=*/false);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Iallgather(in_buf, mpi_count(in, name), mpi_type(in.dtype()), out_buf,
                           mpi_count(in, name), mpi_type(out.dtype()), comm_, &req[0]),
            name, "MPI_Iallgather");
  wait_all(req, name,
           detail::concat("the other ", size_ - 1, " ranks (MPI_Iallgather of ", describe(in), ")"),
           {out, in, staging_});
  copy_back(out, out_buf);
}

void MpiCommunicator::send(const Tensor& t, int peer) {
  const char* name = "send";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  check_peer(name, peer);
  reserve_staging(t.nbytes());
  void* buf = host_side(t, 0, /*fill=*/true);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Isend(buf, mpi_count(t, name), mpi_type(t.dtype()), peer, kPointToPointTag, comm_,
                      &req[0]),
            name, "MPI_Isend");
  wait_all(req, name, detail::concat("rank ", peer, " to receive (MPI_Isend of ", describe(t), ")"),
           {t, staging_});
}

void MpiCommunicator::recv(Tensor& t, int peer) {
  const char* name = "recv";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  check_peer(name, peer);
  reserve_staging(t.nbytes());
  void* buf = host_side(t, 0, /*fill=*/false);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Irecv(buf, mpi_count(t, name), mpi_type(t.dtype()), peer, kPointToPointTag, comm_,
                      &req[0]),
            name, "MPI_Irecv");
  std::vector<MPI_Status> st = wait_all(
      req, name, detail::concat("rank ", peer, " to send (MPI_Irecv of ", describe(t), ")"),
      {t, staging_}, {0});
  check_received(st[0], t, peer, name);
  copy_back(t, buf);
}

void MpiCommunicator::send_recv(const Tensor& send_t, int send_peer, Tensor& recv_t,
                                int recv_peer) {
  const char* name = "send_recv";
  check_usable(name);
  check_tensor(send_t, name, "send_t");
  check_tensor(recv_t, name, "recv_t");
  check_peer(name, send_peer);
  check_peer(name, recv_peer);
  reserve_staging(aligned(send_t.nbytes()) + recv_t.nbytes());
  void* send_buf = host_side(send_t, 0, /*fill=*/true);
  void* recv_buf = host_side(recv_t, aligned(send_t.nbytes()), /*fill=*/false);
  // MPI_Sendrecv as its two non-blocking halves: the recv is posted first, so no rank of a ring
  // waits on a send that nobody has yet posted a recv for.
  std::vector<MPI_Request> req(2);
  check_mpi(MPI_Irecv(recv_buf, mpi_count(recv_t, name), mpi_type(recv_t.dtype()), recv_peer,
                      kPointToPointTag, comm_, &req[0]),
            name, "MPI_Irecv");
  int rc = MPI_Isend(send_buf, mpi_count(send_t, name), mpi_type(send_t.dtype()), send_peer,
                     kPointToPointTag, comm_, &req[1]);
  if (rc != MPI_SUCCESS) {
    MPI_Cancel(&req[0]);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    check_mpi(rc, name, "MPI_Isend");
  }
  std::vector<MPI_Status> st =
      wait_all(req, name,
               detail::concat("rank ", recv_peer, " to send ", describe(recv_t), " and rank ",
                              send_peer, " to receive ", describe(send_t)),
               {send_t, recv_t, staging_}, {0});
  check_received(st[0], recv_t, recv_peer, name);
  copy_back(recv_t, recv_buf);
}

void MpiCommunicator::barrier() { meet("barrier"); }

void MpiCommunicator::meet(const char* op) {
  check_usable(op);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Ibarrier(comm_, &req[0]), op, "MPI_Ibarrier");
  wait_all(req, op, detail::concat("the other ", size_ - 1, " ranks (MPI_Ibarrier)"), {});
}

std::unique_ptr<Communicator> MpiCommunicator::split_group(int color, int key, Device device) {
  const char* name = "split";
  meet(name);  // the deadline MPI_Comm_split lacks (Note [MPI timeouts])
  MPI_Comm part = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color == kNoColor ? MPI_UNDEFINED : color, key, &part), name,
            "MPI_Comm_split");
  if (part == MPI_COMM_NULL) return nullptr;
  // A GPU member gets its own staging buffer, on first use (Note [staging CUDA tensors through
  // MPI]).
  return std::unique_ptr<Communicator>(new MpiCommunicator(Adopt{}, part, options_, device));
}

}  // namespace minitrain
