// The NCCL backend (compiled in CUDA builds only). Each operation is enqueued on the caller's
// current stream and then waited for with a deadline (Note [NCCL timeouts] in the header).

#include "parallel/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <set>
#include <thread>

#include "core/cuda_check.h"
#include "core/error.h"
#include "core/stream.h"

namespace minitrain {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId),
              "NcclUniqueId must hold an ncclUniqueId");

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::BFloat16:
      return ncclBfloat16;
    case DType::Float16:
      return ncclFloat16;
  }
  MT_THROW(DTypeError, "nccl: no NCCL type for ", dtype_name(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  MT_THROW(ValueError, "nccl: unknown reduce op");
}

std::string describe(const Tensor& t) {
  return detail::concat(t.numel(), " ", dtype_name(t.dtype()));
}

cudaStream_t caller_stream(Device d) { return current_stream(d).native_handle(); }

// FNV-1a, truncated to 32 bits so that it travels exactly in a float64 collective; the same in
// every process (unlike std::hash, which a library may seed).
double hash32(const std::string& text) {
  uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return static_cast<double>(h);
}

std::string host_name() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::string pci_bus_id(Device d) {
  char bus[64] = {};
  CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, d.index()));
  return bus;
}

// What one rank asks of a split, as all-gathered (Note [NCCL split onto another GPU]).
struct SplitRequest {
  int color = 0, key = 0;
  bool keeps_gpu = true;     // the new member on this communicator's own GPU
  double host = 0, gpu = 0;  // hashes of the host name and of the target GPU's PCI bus id
};
constexpr int64_t kSplitRequestFields = 5;

// Members of `color` in the new group's order: by key, then by rank in the parent.
std::vector<int> members_of(const std::vector<SplitRequest>& requests, int color) {
  std::vector<int> members;
  for (int r = 0; r < static_cast<int>(requests.size()); ++r)
    if (requests[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return requests[a].key < requests[b].key; });
  return members;
}

}  // namespace

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  NcclUniqueId bytes;
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::from_unique_id(const NcclUniqueId& id, int rank,
                                                                   int size, Device device,
                                                                   CommOptions options) {
  MT_CHECK_AS(DeviceError, device.is_cuda(), "nccl: rank ", rank, " was given ", device,
              "; NCCL ranks live on GPUs (use the MPI or threads backend for CPU tensors)");
  MT_CHECK_AS(ValueError, size >= 1 && rank >= 0 && rank < size, "nccl: rank ", rank,
              " is not a rank of a ", size, "-rank communicator");
  check_available(device);
  DeviceGuard guard(device);
  ncclUniqueId uid;
  std::memcpy(&uid, id.data(), sizeof(uid));
  ncclComm_t comm = nullptr;
  CHECK_NCCL(ncclCommInitRank(&comm, size, uid, rank));
  return std::make_unique<NcclCommunicator>(comm, rank, size, device, options);
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(
    const std::vector<Device>& devices, CommOptions options) {
  MT_CHECK_AS(ValueError, !devices.empty(), "make_nccl_communicators: no devices given");
  std::set<int> seen;
  std::vector<int> ordinals;
  for (const Device& d : devices) {
    MT_CHECK_AS(
        DeviceError, d.is_cuda(), "make_nccl_communicators: ", d,
        " is not a GPU; NCCL ranks live on GPUs (use make_thread_communicators for CPU ranks)");
    MT_CHECK_AS(ValueError, seen.insert(d.index()).second, "make_nccl_communicators: ", d,
                " appears twice; NCCL needs one rank per GPU");
    check_available(d);
    ordinals.push_back(d.index());
  }
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size(), nullptr);
  CHECK_NCCL(ncclCommInitAll(comms.data(), n, ordinals.data()));
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < n; ++r)
    out.push_back(std::make_unique<NcclCommunicator>(comms[r], r, n, devices[r], options));
  return out;
}

NcclCommunicator::NcclCommunicator(ncclComm* comm, int rank, int size, Device device,
                                   CommOptions options)
    : Communicator(options),
      comm_(comm),
      rank_(rank),
      size_(size),
      device_(device),
      uncaught_at_creation_(std::uncaught_exceptions()) {}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  DeviceGuard guard(device_, std::nothrow);  // a destructor: after a device fault, still no throw
  // Unwinding: this rank is giving up while its peers may still be in a collective (or stopped),
  // and ncclCommDestroy would wait for them (Note [NCCL timeouts]); abort is local.
  if (std::uncaught_exceptions() > uncaught_at_creation_)
    ncclCommAbort(comm_);
  else
    ncclCommDestroy(comm_);  // errors at teardown have nobody to go to
}

void NcclCommunicator::check_usable(const char* op) const {
  MT_CHECK_AS(CommError, comm_ != nullptr, op, ": this NCCL communicator (rank ", rank_, " on ",
              device_, ") was aborted after an earlier failure (", broken_,
              "); create a new communicator");
}

void NcclCommunicator::check_tensor(const Tensor& t, const char* op, const char* what) const {
  MT_CHECK_AS(ValueError, t.defined(), op, ": ", what, " is an undefined tensor");
  MT_CHECK_AS(DeviceError, t.device() == device_, op, ": ", what, " is on ", t.device(),
              " but NCCL rank ", rank_, " lives on ", device_, "; move it with .to(", device_, ")");
}

void NcclCommunicator::abort_and_throw(const std::string& message) {
  record_lost_peer();
  ncclCommAbort(comm_);  // also ends this rank's kernels still waiting for peers
  comm_ = nullptr;
  broken_ = message;
  throw CommError(message);
}

void NcclCommunicator::wait(const char* op, const std::string& waiting_for) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + options_.timeout;
  cudaStream_t stream = caller_stream(device_);
  for (long polls = 0;; ++polls) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      abort_and_throw(detail::concat(op, ": rank ", rank_, " on ", device_,
                                     ": CUDA error while waiting for ", waiting_for, ": ",
                                     cudaGetErrorString(e)));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      const char* last = ncclGetLastError(comm_);
      abort_and_throw(detail::concat(
          op, ": rank ", rank_, " on ", device_, ": NCCL asynchronous error while waiting for ",
          waiting_for, ": ", ncclGetErrorString(async), (last && *last) ? ": " : "",
          last ? last : "", "; a peer may have died: check the other ranks' logs"));
    }
    const auto now = clock::now();
    if (now >= deadline) {
      const double waited = std::chrono::duration<double>(now - start).count();
      abort_and_throw(detail::concat(op, ": rank ", rank_, " waited ", waited, " s for ",
                                     waiting_for, " (timeout ", options_.timeout.count(),
                                     " ms); communicator aborted. Is that rank alive and calling "
                                     "the same operations in the same order? Check its log"));
    }
    if (now - start > std::chrono::milliseconds(1))
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    else if (polls > 64)
      std::this_thread::yield();
  }
}

void NcclCommunicator::native_all_reduce(Tensor& t, ReduceOp op) {
  const char* name = "all_reduce";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  if (t.numel() == 0) return;  // every rank has the same shape: nothing to exchange
  DeviceGuard guard(device_);
  CHECK_NCCL(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                           nccl_type(t.dtype()), nccl_op(op), comm_, caller_stream(device_)));
  wait(name,
       detail::concat("the other ", size_ - 1, " ranks (ncclAllReduce of ", describe(t), ")"));
}

void NcclCommunicator::broadcast(Tensor& t, int root) {
  const char* name = "broadcast";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  check_peer(name, root, "root");
  if (t.numel() == 0) return;
  DeviceGuard guard(device_);
  CHECK_NCCL(ncclBroadcast(t.raw_data(), t.raw_data(), static_cast<size_t>(t.numel()),
                           nccl_type(t.dtype()), root, comm_, caller_stream(device_)));
  wait(name, rank_ == root
                 ? detail::concat("the other ranks (ncclBroadcast of ", describe(t), ")")
                 : detail::concat("root rank ", root, " (ncclBroadcast of ", describe(t), ")"));
}

void NcclCommunicator::reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op) {
  const char* name = "reduce_scatter";
  check_usable(name);
  check_tensor(out, name, "out");
  check_tensor(in, name, "in");
  check_chunks(name, in, "in", out, "out");
  if (out.numel() == 0) return;
  DeviceGuard guard(device_);
  CHECK_NCCL(ncclReduceScatter(in.raw_data(), out.raw_data(), static_cast<size_t>(out.numel()),
                               nccl_type(out.dtype()), nccl_op(op), comm_, caller_stream(device_)));
  wait(name,
       detail::concat("the other ", size_ - 1, " ranks (ncclReduceScatter of ", describe(in), ")"));
}

void NcclCommunicator::all_gather(Tensor& out, const Tensor& in) {
  const char* name = "all_gather";
  check_usable(name);
  check_tensor(out, name, "out");
  check_tensor(in, name, "in");
  check_chunks(name, out, "out", in, "in");
  if (in.numel() == 0) return;
  DeviceGuard guard(device_);
  CHECK_NCCL(ncclAllGather(in.raw_data(), out.raw_data(), static_cast<size_t>(in.numel()),
                           nccl_type(in.dtype()), comm_, caller_stream(device_)));
  wait(name,
       detail::concat("the other ", size_ - 1, " ranks (ncclAllGather of ", describe(in), ")"));
}

void NcclCommunicator::send(const Tensor& t, int peer) {
  const char* name = "send";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  check_peer(name, peer);
  if (t.numel() == 0) return;
  DeviceGuard guard(device_);
  CHECK_NCCL(ncclSend(t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), peer,
                      comm_, caller_stream(device_)));
  wait(name, detail::concat("rank ", peer, " to receive (ncclSend of ", describe(t), ")"));
}

void NcclCommunicator::recv(Tensor& t, int peer) {
  const char* name = "recv";
  check_usable(name);
  check_tensor(t, name, "the tensor");
  check_peer(name, peer);
  if (t.numel() == 0) return;
  DeviceGuard guard(device_);
  CHECK_NCCL(ncclRecv(t.raw_data(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), peer,
                      comm_, caller_stream(device_)));
  wait(name, detail::concat("rank ", peer, " to send (ncclRecv of ", describe(t), ")"));
}

void NcclCommunicator::send_recv(const Tensor& send_t, int send_peer, Tensor& recv_t,
                                 int recv_peer) {
  const char* name = "send_recv";
  check_usable(name);
  check_tensor(send_t, name, "send_t");
  check_tensor(recv_t, name, "recv_t");
  check_peer(name, send_peer);
  check_peer(name, recv_peer);
  DeviceGuard guard(device_);
  cudaStream_t stream = caller_stream(device_);
  // One group: NCCL starts both together, so a ring of ranks all sending at once cannot deadlock.
  CHECK_NCCL(ncclGroupStart());
  ncclResult_t r = ncclSuccess;
  if (send_t.numel() > 0)
    r = ncclSend(send_t.raw_data(), static_cast<size_t>(send_t.numel()), nccl_type(send_t.dtype()),
                 send_peer, comm_, stream);
  if (r == ncclSuccess && recv_t.numel() > 0)
    r = ncclRecv(recv_t.raw_data(), static_cast<size_t>(recv_t.numel()), nccl_type(recv_t.dtype()),
                 recv_peer, comm_, stream);
  const ncclResult_t end = ncclGroupEnd();  // always close the group, even after an error
  CHECK_NCCL(r);
  CHECK_NCCL(end);
  wait(name, detail::concat("rank ", recv_peer, " to send ", describe(recv_t), " and rank ",
                            send_peer, " to receive ", describe(send_t)));
}

std::unique_ptr<Communicator> NcclCommunicator::split_group(int color, int key, Device device) {
  const char* name = "split";
  check_usable(name);
  MT_CHECK_AS(DeviceError, color == kNoColor || device.is_cuda(), name, ": rank ", rank_,
              " asks for a member on ", device,
              "; NCCL ranks live on GPUs (the MPI backend exchanges CPU tensors)");
  DeviceGuard guard(device_);
  // Every rank's request, so that all take the same path and refuse the same groups.
  const bool joins = color != kNoColor;
  std::vector<double> mine = {static_cast<double>(color), static_cast<double>(key),
                              device == device_ ? 1.0 : 0.0, hash32(host_name()),
                              joins ? hash32(pci_bus_id(device)) : 0.0};
  Tensor all = Tensor::empty(Shape({kSplitRequestFields * size_}), DType::Float64, device_);
  all_gather(all, Tensor::from_vector(mine, {kSplitRequestFields}, device_));
  const std::vector<double> v = all.to_vector<double>();
  std::vector<SplitRequest> requests(size_);
  bool every_rank_keeps_its_gpu = true;
  for (int r = 0; r < size_; ++r) {
    const double* f = v.data() + r * kSplitRequestFields;
    requests[r] = {static_cast<int>(f[0]), static_cast<int>(f[1]), f[2] != 0.0, f[3], f[4]};
    every_rank_keeps_its_gpu =
        every_rank_keeps_its_gpu && (requests[r].keeps_gpu || requests[r].color == kNoColor);
  }
  const std::vector<int> members = joins ? members_of(requests, color) : std::vector<int>{};
  const int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());

  if (every_rank_keeps_its_gpu) {  // the parent's GPUs are distinct already
    ncclComm_t part = nullptr;
    CHECK_NCCL(ncclCommSplit(comm_, joins ? color : NCCL_SPLIT_NOCOLOR, key, &part, nullptr));
    if (part == nullptr) return nullptr;
    return std::make_unique<NcclCommunicator>(part, new_rank, static_cast<int>(members.size()),
                                              device_, options_);
  }
  // Refused on every rank alike, before any rank joins an NCCL communicator that cannot form.
  for (int r = 0; r < size_; ++r)
    for (int q = 0; q < r; ++q)
      if (requests[r].color != kNoColor && requests[q].color == requests[r].color &&
          requests[q].host == requests[r].host && requests[q].gpu == requests[r].gpu)
        MT_THROW(DeviceError, name, ": ranks ", q, " and ", r,
                 " would share one GPU of their host in the NCCL communicator of color ",
                 requests[r].color, " (rank ", rank_, " asked for ", device,
                 "); NCCL needs a GPU per rank: give each rank its own GPUs (for the hybrid, "
                 "--devices naming other GPUs per rank, or CUDA_VISIBLE_DEVICES per rank), or use "
                 "--backend mpi");
  // Each group's first member makes its id; every rank gathers them all and joins its leader's.
  NcclUniqueId id{};
  if (joins && members.front() == rank_) id = nccl_unique_id();
  constexpr int64_t kIdWords = sizeof(NcclUniqueId) / sizeof(double);
  Tensor my_id = Tensor::empty(Shape({kIdWords}), DType::Float64);
  std::memcpy(my_id.raw_data(), id.data(), id.size());  // bytes, not numbers: copied, never added
  Tensor ids = Tensor::empty(Shape({kIdWords * size_}), DType::Float64, device_);
  all_gather(ids, my_id.to(device_));
  if (!joins) return nullptr;
  const Tensor host_ids = ids.to(Device::cpu());
  std::memcpy(id.data(),
              static_cast<const char*>(host_ids.raw_data()) + members.front() * id.size(),
              id.size());
  return from_unique_id(id, new_rank, static_cast<int>(members.size()), device, options_);
}

void NcclCommunicator::barrier() {
  const char* name = "barrier";
  check_usable(name);
  DeviceGuard guard(device_);
  if (!barrier_scratch_.defined()) barrier_scratch_ = Tensor::zeros({1}, DType::Float32, device_);
  CHECK_NCCL(ncclAllReduce(barrier_scratch_.raw_data(), barrier_scratch_.raw_data(), 1, ncclFloat32,
                           ncclSum, comm_, caller_stream(device_)));
  wait(name,
       detail::concat("the other ", size_ - 1, " ranks (barrier: a 1-element ncclAllReduce)"));
}

}  // namespace minitrain
