#pragma once
// The MPI backend: one rank per process (mpirun -n N), Open MPI's own collectives. Across
// processes and machines without GPUs, GPU ranks without NCCL, and the bootstrap transport for
// NCCL (issue 6).
//
// Note [staging CUDA tensors through MPI]: a communicator made for a GPU (device cuda:N) takes
// tensors on that GPU and never hands their device pointers to MPI (Open MPI need not be
// CUDA-aware). Each operation copies the tensor into a pinned host buffer on the caller's current
// stream (synchronised), runs the MPI call on the host copy, and copies the result back on the
// same stream, as gloo does for torch. The buffer belongs to the communicator and grows to the
// largest operation seen, so a training step allocates nothing. This is for correctness without
// NCCL, not speed: every byte crosses PCIe twice and the GPU waits for the network.
//
// Note [MPI timeouts]: MPI's blocking calls have no deadline. Every operation here is issued as its
// non-blocking form (MPI_Isend, MPI_Ibcast, ...) and completed by polling MPI_Testall against
// CommOptions::timeout (Note [polling MPI requests] in the .cpp), so a rank that never comes gives
// CommError ("all_reduce: rank 0 waited 0.3 s ...") instead of a hang. A communicator never aborts
// the job on its own: a program may
// catch CommError and carry on (the job goes on when the late rank was only late). A program that
// gives up calls MpiRuntime::leave_job_after_failure, and must not simply return from main: Open
// MPI's MPI_Finalize is collective, so a rank whose peer is stopped, dead, or still waiting in a
// collective would hang in it for ever after printing its error. That call aborts the job
// (MPI_Abort) when a peer was lost, and otherwise first gives the other ranks the deadline to
// leave too (an orderly stop must not be cut short). The minitrain binary calls it whenever a
// command fails in a job of more than one rank (tools/minitrain.cpp); mpirun then ends every
// rank, the stopped one included.
// After a timed-out collective the ranks disagree about the sequence of operations, so the
// communicator refuses further work (CommError "... unusable ..."); the request that never
// completed is kept, with its buffer, until the communicator is destroyed. A timed-out recv is
// cancelled and leaves the communicator usable.
//
// Note [the MPI all-reduce]: native_all_reduce is not MPI_Iallreduce. Open MPI runs non-blocking
// collectives in libnbc, which for 2 or 3 ranks (and for any in-place call) reduces to rank 0 and
// broadcasts back, mallocs a buffer of the tensor's size per call, and costs a few microseconds
// of schedule per call: measured on 2 ranks, 0.13-0.45 GB/s from 16 MiB (when blocking
// MPI_Allreduce moves several GB/s) and 0.25-0.4x of MPI_Allreduce at 1 KiB even when polled
// without pause. A blocking MPI_Allreduce on a second thread, with the caller waiting against
// the deadline, costs 15-20 us of thread hand-over per call (0.1x at 1 KiB) and leaves a thread
// stuck in MPI when a peer never comes. So the all-reduce is MPI's point-to-point messages on the
// schedules MPI_Allreduce itself uses, on the caller's thread, each message polled against the
// one deadline of the call: recursive doubling for small tensors (log2 n exchanges, latency-bound,
// ranks beyond a power of two folded in first), and for large ones a reduce-scatter then
// all-gather around the ring (2(n-1)/n of the tensor sent per rank, bandwidth-bound), the
// reduce-scatter in slices so that its scratch buffer stays small. Every reduction is
// MPI_Reduce_local with the same MPI_Op as before (the 16-bit ones included), and every rank ends
// with bit-identical values (recursive doubling combines the same two partial results on both
// ends of each exchange; the ring reduces each chunk on one rank and copies it to the others).
// bench/mpi_allreduce_bench.cpp measures it against a blocking MPI_Allreduce in the same run.
// split (Note [splitting a communicator]) is MPI_Comm_split, which has no non-blocking form: it
// first meets the other ranks in an MPI_Ibarrier with the deadline, so a rank that never comes is
// a CommError, and only then splits (every rank is then on its way into the same call).

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "parallel/comm/communicator.h"

namespace minitrain {

/// MPI_Init_thread on first use (MPI_THREAD_MULTIPLE where the library provides it, else
/// MPI_THREAD_SERIALIZED) and MPI_Finalize at process exit, unless someone else initialised MPI
/// first (then they finalise). With SERIALIZED, no two threads may call into MPI at once.
class MpiRuntime {
 public:
  static MpiRuntime& instance();  ///< initialises MPI on the first call
  /// For a process of a job of two or more ranks that ends with a failure (`exit_code`, not 0),
  /// instead of returning straight into MPI_Finalize (Note [MPI timeouts]). Flushes stdout and
  /// stderr, then: when a communicator of this process lost a peer (lost_a_peer()), ends the
  /// whole job at once (MPI_Abort on MPI_COMM_WORLD; does not return). Otherwise every rank may be
  /// leaving together, so it waits in a barrier over MPI_COMM_WORLD for at most the longest
  /// CommOptions::timeout of this process's communicators: returns when all ranks come
  /// (MPI_Finalize at exit then has nobody to wait for), else MPI_Abort. Returns at once outside
  /// such a job.
  static void leave_job_after_failure(int exit_code);
  /// Remembers the longest communicator timeout, the deadline of leave_job_after_failure.
  static void note_timeout(std::chrono::milliseconds timeout);
  int thread_level() const noexcept { return thread_level_; }  ///< MPI_THREAD_*
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

 private:
  MpiRuntime();
  int thread_level_ = MPI_THREAD_SINGLE;
  bool owns_ = false;  // we called MPI_Init_thread, so we call MPI_Finalize
  static inline std::atomic<long long> leave_timeout_ms_{0};
};

class MpiCommunicator final : public Communicator {
 public:
  /// All processes of the job (a duplicate of MPI_COMM_WORLD, so minitrain's traffic and error
  /// handler stay apart from the application's). Collective over MPI_COMM_WORLD. Tensors live on
  /// `device`: the CPU, or this rank's GPU (Note [staging CUDA tensors through MPI]).
  static std::unique_ptr<MpiCommunicator> world(CommOptions options = {},
                                                Device device = Device::cpu());
  /// A duplicate of `comm` (collective over `comm`, which the caller keeps owning). DeviceError
  /// for a `device` that is not available.
  MpiCommunicator(MPI_Comm comm, CommOptions options, Device device = Device::cpu());
  ~MpiCommunicator() override;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  Device device() const noexcept override { return device_; }
  std::string backend() const override { return "mpi"; }
  MPI_Comm native_handle() const noexcept { return comm_; }

  void native_all_reduce(Tensor& t, ReduceOp op) override;
  void broadcast(Tensor& t, int root) override;
  void reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) override;
  void all_gather(Tensor& out, const Tensor& in) override;
  void send(const Tensor& t, int peer) override;
  void recv(Tensor& t, int peer) override;
  void send_recv(const Tensor& send_t, int send_peer, Tensor& recv_t, int recv_peer) override;
  void barrier() override;

 protected:
  std::unique_ptr<Communicator> split_group(int color, int key, Device device) override;

 private:
  struct Adopt {};
  /// Takes ownership of `comm` (a split's result) as it is, without duplicating it.
  MpiCommunicator(Adopt, MPI_Comm comm, CommOptions options, Device device);
  /// The communicator's handle set to return errors, and this rank's place in it.
  void adopt(MPI_Comm comm);
  /// An MPI_Ibarrier waited for with the deadline; `op` names the caller in errors.
  void meet(const char* op);
  struct Pending {  // a request given up on at a timeout, and the buffers it may still touch
    MPI_Request request;
    std::vector<Tensor> buffers;
  };
  void check_usable(const char* op) const;
  void check_tensor(const Tensor& t, const char* op, const char* what) const;
  /// The pinned staging buffer, grown to at least `bytes` (a GPU communicator only).
  void reserve_staging(std::size_t bytes);
  /// The memory MPI works on for `t`: its own on the CPU; on a GPU the staging buffer at byte
  /// `offset` (reserve_staging first), holding a copy of `t` when `fill`.
  void* host_side(const Tensor& t, std::size_t offset, bool fill);
  /// On a GPU, `t` gets the bytes MPI left at `host` (from host_side); nothing on the CPU.
  void copy_back(Tensor& t, const void* host);
  using Clock = std::chrono::steady_clock;
  /// Polls the requests (Note [polling MPI requests]) until all complete (true: `statuses` hold
  /// theirs) or `deadline` passes (false: the requests are left as they are). CommError on an
  /// error from MPI (a transport error: a lost peer).
  bool poll_until(int n, MPI_Request* requests, MPI_Status* statuses, const char* op,
                  Clock::time_point deadline);
  /// After poll_until gave up at the deadline of an operation started at `start`: cancels the
  /// recvs in `cancellable` (indices into requests), keeps the rest as Pending with `buffers`,
  /// and throws CommError naming `waiting_for` (what this rank waited for).
  [[noreturn]] void give_up(int n, MPI_Request* requests, const char* op,
                            const std::string& waiting_for, Clock::time_point start,
                            std::vector<Tensor> buffers, const std::vector<int>& cancellable);
  /// poll_until with this communicator's timeout from now, then give_up.
  std::vector<MPI_Status> wait_all(std::vector<MPI_Request>& requests, const char* op,
                                   const std::string& waiting_for, std::vector<Tensor> buffers,
                                   const std::vector<int>& cancellable = {});

  // ---- the all-reduce (Note [the MPI all-reduce]), on host memory: `buf` is the tensor or its
  // staging copy, `t` the tensor (kept alive with the buffers if an exchange is abandoned) ----
  struct Reduction {
    Tensor& t;
    char* buf;
    int count;
    std::size_t elem_bytes;
    MPI_Datatype type;
    MPI_Op op;
    Clock::time_point start, deadline;
  };
  void all_reduce_recursive_doubling(const Reduction& r);
  void all_reduce_ring(const Reduction& r);
  /// One step of a schedule: sends `send_count` elements at `send` to `send_peer` and receives
  /// `recv_count` into `recv` from `recv_peer` (either peer may be MPI_PROC_NULL: no message), and
  /// waits for both against the all-reduce's deadline. `phase` and `step` name it in errors.
  void exchange(const Reduction& r, const char* send, int send_count, int send_peer, char* recv,
                int recv_count, int recv_peer, const char* phase, int step);
  /// Host scratch for received data: at least `bytes`, grown by half again (a Pending exchange
  /// keeps an old buffer alive).
  char* reserve_scratch(std::size_t bytes);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  Device device_ = Device::cpu();
  Tensor staging_;      // pinned host bytes for a GPU communicator's tensors; undefined until used
  Tensor scratch_;      // host bytes the all-reduce receives into; undefined until used
  std::string broken_;  // why the communicator is unusable; empty while it is fine
  std::vector<Pending> abandoned_;
};

}  // namespace minitrain
