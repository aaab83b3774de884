// The MPI backend. Each operation is the non-blocking MPI call completed by polling MPI_Test
// against the deadline (Note [MPI timeouts] in the header); errors come back as return codes
// (MPI_ERRORS_RETURN on our own duplicate communicator) and become CommError. A GPU
// communicator's tensors go through the pinned staging buffer (Note [staging CUDA tensors through
// MPI] in the header): host_side before the MPI call, copy_back after it.

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

namespace minitrain {
namespace {

constexpr int kPointToPointTag = 17;  // send/recv/send_recv; MPI keeps (source, tag) in order

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
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);  // pending operations still complete
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

std::vector<MPI_Status> MpiCommunicator::wait_all(std::vector<MPI_Request>& requests,
                                                  const char* op, const std::string& waiting_for,
                                                  std::vector<Tensor> buffers,
                                                  const std::vector<int>& cancellable) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + options_.timeout;
  std::vector<MPI_Status> statuses(requests.size());
  for (long polls = 0;; ++polls) {
    int done = 0;
    int rc =
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
    if (rc == MPI_ERR_IN_STATUS) {
      for (const MPI_Status& s : statuses)
        if (s.MPI_ERROR != MPI_SUCCESS) rc = s.MPI_ERROR;
    }
    if (rc != MPI_SUCCESS) record_lost_peer();  // a transport error: most likely a peer that died
    check_mpi(rc, op, "MPI_Testall");
    if (done) return statuses;
    const auto now = clock::now();
    if (now >= deadline) break;
    // Spin briefly (latency), then give the core to the other ranks (oversubscribed jobs).
    if (now - start > std::chrono::milliseconds(1))
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else if (polls > 64)
      std::this_thread::yield();
  }
  const double waited = std::chrono::duration<double>(clock::now() - start).count();
  for (int i : cancellable) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&requests[i]);
    MPI_Wait(&requests[i], MPI_STATUS_IGNORE);  // a cancelled recv completes locally
  }
  bool abandoned = false;
  for (MPI_Request& r : requests) {
    if (r == MPI_REQUEST_NULL) continue;
    abandoned_.push_back(Pending{r, buffers});
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

void MpiCommunicator::native_all_reduce(Tensor& t, ReduceOp op) {
  const char* name = "all_reduce";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  reserve_staging(t.nbytes());
  void* buf = host_side(t, 0, /*fill=*/true);
  std::vector<MPI_Request> req(1);
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf, mpi_count(t, name), mpi_type(t.dtype()),
                           mpi_op(op, t.dtype()), comm_, &req[0]),
            name, "MPI_Iallreduce");
  wait_all(req, name,
           detail::concat("the other ", size_ - 1, " ranks (MPI_Iallreduce of ", describe(t), ")"),
           {t, staging_});
  copy_back(t, buf);
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
