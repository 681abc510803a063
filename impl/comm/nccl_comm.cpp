// NCCL backend: see nccl_comm.h (grouped point-to-point, host staging, deadline + abort).
#include "comm/nccl_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <thread>

#include "core/cuda_check.h"
#include "core/nvtx.h"

namespace dcp::comm {

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  DCP_FAIL("unknown dtype ", static_cast<int>(t));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  DCP_FAIL("unknown reduce op ", static_cast<int>(op));
}

bool is_device_ptr(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // unregistered host memory on older runtimes
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

// A device view of a user buffer: the buffer itself if it is device memory, else a temporary
// device copy. The copy-in is enqueued on the communicator's stream (so the NCCL kernel that
// follows on that stream sees it); copy_out() runs after the operation has completed.
class Staged {
 public:
  Staged(const void* user, size_t bytes, bool copy_in, cudaStream_t stream)
      : user_(const_cast<void*>(user)), bytes_(bytes) {
    if (bytes == 0 || is_device_ptr(user)) {
      dev_ = user_;
      return;
    }
    DCP_CUDA_CHECK(cudaMalloc(&dev_, bytes));
    owned_ = true;
    if (copy_in)
      DCP_CUDA_CHECK(cudaMemcpyAsync(dev_, user, bytes, cudaMemcpyHostToDevice, stream));
  }
  ~Staged() {
    if (owned_) cudaFree(dev_);
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  void* dev() const { return dev_; }
  void copy_out() {
    if (owned_) DCP_CUDA_CHECK(cudaMemcpy(user_, dev_, bytes_, cudaMemcpyDeviceToHost));
  }

 private:
  void* user_;
  size_t bytes_;
  void* dev_ = nullptr;
  bool owned_ = false;
};

struct P2pOp {
  bool is_send;
  void* user;
  size_t count;
  DType type;
  int peer;
  std::unique_ptr<Staged> staged;
  std::string what;
};

// The point-to-point operations queued since the last launch; launched together.
struct P2pBatch {
  std::vector<P2pOp> ops;
  cudaEvent_t done_event = nullptr;
  bool launched = false;
  bool finished = false;
  bool abandoned = false;  // a request of it was destroyed unfinished: the communicator is aborted
};

class NcclComm;

class NcclRequest final : public Request {
 public:
  NcclRequest(NcclComm* comm, std::shared_ptr<P2pBatch> batch)
      : comm_(comm), batch_(std::move(batch)) {}
  ~NcclRequest() override;
  void wait() override;
  bool test() override;

 private:
  NcclComm* comm_;
  std::shared_ptr<P2pBatch> batch_;
};

class NcclComm final : public Communicator {
 public:
  NcclComm(ncclComm_t comm, int device, CommOptions options)
      : comm_(comm), device_(device), options_(options) {
    DCP_CUDA_CHECK(cudaSetDevice(device_));
    DCP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    DCP_CUDA_CHECK(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
    DCP_NCCL_CHECK(ncclCommUserRank(comm_, &rank_), comm_);
    DCP_NCCL_CHECK(ncclCommCount(comm_, &size_), comm_);
  }
  ~NcclComm() override {
    if (!aborted_) ncclCommDestroy(comm_);
    if (pending_ && pending_->done_event) cudaEventDestroy(pending_->done_event);
    cudaEventDestroy(order_event_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  const CommOptions& options() const override { return options_; }

  RequestPtr isend_raw(const void* buf, size_t count, DType type, int peer, int tag) override {
    DCP_NVTX_RANGE();
    return queue(true, const_cast<void*>(buf), count, type, peer, tag, "isend", "to");
  }
  RequestPtr irecv_raw(void* buf, size_t count, DType type, int peer, int tag) override {
    DCP_NVTX_RANGE();
    return queue(false, buf, count, type, peer, tag, "irecv", "from");
  }

  void all_reduce_raw(const void* send, void* recv, size_t count, DType type,
                      ReduceOp op) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    Staged out(recv, bytes, send == recv, stream_);
    std::unique_ptr<Staged> in;
    if (send != recv) in = std::make_unique<Staged>(send, bytes, true, stream_);
    ready_to_launch("all_reduce");
    DCP_NCCL_CHECK(ncclAllReduce(in ? in->dev() : out.dev(), out.dev(), count, nccl_type(type),
                                 nccl_op(op), comm_, stream_),
                   comm_);
    wait_stream(coll_what("all_reduce"));
    out.copy_out();
  }
  void all_gather_raw(const void* send, void* recv, size_t count, DType type) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    Staged in(send, bytes, true, stream_), out(recv, bytes * size_, false, stream_);
    ready_to_launch("all_gather");
    DCP_NCCL_CHECK(ncclAllGather(in.dev(), out.dev(), count, nccl_type(type), comm_, stream_),
                   comm_);
    wait_stream(coll_what("all_gather"));
    out.copy_out();
  }
  void reduce_scatter_raw(const void* send, void* recv, size_t count, DType type,
                          ReduceOp op) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    Staged in(send, bytes * size_, true, stream_), out(recv, bytes, false, stream_);
    ready_to_launch("reduce_scatter");
    DCP_NCCL_CHECK(ncclReduceScatter(in.dev(), out.dev(), count, nccl_type(type), nccl_op(op),
                                     comm_, stream_),
                   comm_);
    wait_stream(coll_what("reduce_scatter"));
    out.copy_out();
  }
  void all_to_all_v_raw(const void* send, const size_t* send_counts, const size_t* send_displs,
                        void* recv, const size_t* recv_counts, const size_t* recv_displs,
                        DType type) override {
    DCP_NVTX_RANGE();
    const size_t eb = dtype_bytes(type);
    size_t send_total = 0, recv_total = 0;
    for (int p = 0; p < size_; ++p) {
      send_total = std::max(send_total, send_displs[p] + send_counts[p]);
      recv_total = std::max(recv_total, recv_displs[p] + recv_counts[p]);
    }
    Staged in(send, send_total * eb, true, stream_), out(recv, recv_total * eb, false, stream_);
    ready_to_launch("all_to_all_v");
    auto* src = static_cast<char*>(in.dev());
    auto* dst = static_cast<char*>(out.dev());
    DCP_NCCL_CHECK(ncclGroupStart(), comm_);
    for (int p = 0; p < size_; ++p) {
      if (send_counts[p] > 0)
        DCP_NCCL_CHECK(ncclSend(src + send_displs[p] * eb, send_counts[p], nccl_type(type), p,
                                comm_, stream_),
                       comm_);
      if (recv_counts[p] > 0)
        DCP_NCCL_CHECK(ncclRecv(dst + recv_displs[p] * eb, recv_counts[p], nccl_type(type), p,
                                comm_, stream_),
                       comm_);
    }
    DCP_NCCL_CHECK(ncclGroupEnd(), comm_);
    wait_stream(coll_what("all_to_all_v"));
    out.copy_out();
  }
  void barrier() override {
    DCP_NVTX_RANGE();
    int32_t* flag = nullptr;
    DCP_CUDA_CHECK(cudaMalloc(&flag, sizeof(int32_t)));
    try {
      all_reduce_raw(flag, flag, 1, DType::i32, ReduceOp::sum);
    } catch (...) {
      cudaFree(flag);
      throw;
    }
    cudaFree(flag);
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    DCP_NVTX_RANGE();
    barrier();  // deadline-bounded rendezvous: ncclCommSplit itself cannot be polled
    ncclComm_t out = nullptr;
    DCP_NCCL_CHECK(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &out,
                                 nullptr),
                   comm_);
    if (color < 0 || out == nullptr) return nullptr;
    return std::make_unique<NcclComm>(out, device_, options_);
  }

  // --- used by NcclRequest ---
  void launch(P2pBatch& batch) {
    if (batch.launched) return;
    ready_to_launch("p2p group");  // (sets the device)
    DCP_NCCL_CHECK(ncclGroupStart(), comm_);
    for (auto& op : batch.ops) {
      const auto t = nccl_type(op.type);
      if (op.is_send) {
        DCP_NCCL_CHECK(ncclSend(op.staged->dev(), op.count, t, op.peer, comm_, stream_), comm_);
      } else {
        DCP_NCCL_CHECK(ncclRecv(op.staged->dev(), op.count, t, op.peer, comm_, stream_), comm_);
      }
    }
    DCP_NCCL_CHECK(ncclGroupEnd(), comm_);
    DCP_CUDA_CHECK(cudaEventCreateWithFlags(&batch.done_event, cudaEventDisableTiming));
    DCP_CUDA_CHECK(cudaEventRecord(batch.done_event, stream_));
    batch.launched = true;
    if (pending_.get() == &batch) pending_.reset();
  }
  // A request destroyed before its batch finished (error paths; communicator.h): the communicator
  // is aborted, so the batch is never launched later with another one, nothing is copied back
  // into a receive buffer its caller may have freed, and no wait on a peer that never comes
  // blocks (cudaFree of the staging buffers after the abort does not wait for NCCL's kernels).
  // Until 2026-11-28 an unlaunched op stayed queued and ran with the next batch.
  void abandon(P2pBatch& batch) noexcept {
    if (batch.finished || batch.abandoned) return;
    batch.abandoned = true;
    abort_once();
    if (pending_.get() == &batch) pending_.reset();
    if (batch.done_event) cudaEventDestroy(batch.done_event);
    batch.done_event = nullptr;
    batch.ops.clear();
  }
  // Polls the batch's event; finishes it (copies staged receives back) when done.
  bool poll(P2pBatch& batch, bool block) {
    if (batch.abandoned)
      throw Error("nccl comm: p2p on rank " + std::to_string(rank_) +
                  ": another request of the same batch was abandoned unfinished; communicator aborted");
    if (batch.finished) return true;
    launch(batch);
    const std::string what = batch.ops.empty() ? "p2p" : batch.ops.front().what;
    const auto deadline = std::chrono::steady_clock::now() + options_.deadline;
    for (;;) {
      const cudaError_t st = cudaEventQuery(batch.done_event);
      if (st == cudaSuccess) break;
      if (st != cudaErrorNotReady) fail(what, std::string("CUDA ") + cudaGetErrorString(st));
      check_async(what);
      if (!block) return false;
      if (std::chrono::steady_clock::now() > deadline) fail(what, timeout_text());
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    for (auto& op : batch.ops)
      if (!op.is_send) op.staged->copy_out();
    cudaEventDestroy(batch.done_event);
    batch.done_event = nullptr;
    batch.ops.clear();  // frees the staging buffers
    batch.finished = true;
    return true;
  }

 private:
  RequestPtr queue(bool is_send, void* buf, size_t count, DType type, int peer, int tag,
                   const char* op, const char* dir) {
    DCP_CHECK(peer >= 0 && peer < size_, "nccl comm: ", op, " on rank ", rank_, ": peer ", peer,
              " outside communicator of size ", size_);
    DCP_CHECK(tag >= 0, "nccl comm: user tags must be >= 0, got ", tag);
    if (!pending_) pending_ = std::make_shared<P2pBatch>();
    P2pOp p{is_send, buf, count, type, peer,
            std::make_unique<Staged>(buf, count * dtype_bytes(type), is_send, stream_),
            std::string(op) + " on rank " + std::to_string(rank_) + " " + dir + " peer " +
                std::to_string(peer) + " (tag " + std::to_string(tag) + ")"};
    pending_->ops.push_back(std::move(p));
    return std::make_unique<NcclRequest>(this, pending_);
  }
  // Before each NCCL launch: usable, and ordered after the work already queued on the default
  // stream. The communicator's stream is non-blocking (no implicit order with stream 0: CUDA
  // runtime API, "Stream synchronization behavior"), and a device buffer is handed to NCCL as it
  // is (Staged), so a kernel on stream 0 that writes it must finish first. One way only: stream 0
  // never waits for a collective, which needs the peers.
  void ready_to_launch(const char* op) {
    check_usable(op);
    DCP_CUDA_CHECK(cudaSetDevice(device_));  // the event and stream 0 of this communicator's GPU
    DCP_CUDA_CHECK(cudaEventRecord(order_event_, nullptr));
    DCP_CUDA_CHECK(cudaStreamWaitEvent(stream_, order_event_, 0));
  }
  void check_usable(const char* op) const {
    if (aborted_)
      throw Error(std::string("nccl comm: ") + op + " on rank " + std::to_string(rank_) +
                  ": communicator was aborted after an earlier error");
  }
  std::string timeout_text() const {
    return "timed out after " + std::to_string(options_.deadline.count()) +
           " ms (deadline from CommOptions)";
  }
  std::string coll_what(const char* op) const {
    return std::string(op) + " on rank " + std::to_string(rank_) + " (peers: all " +
           std::to_string(size_) + " ranks)";
  }
  void check_async(const std::string& what) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &async);
    if (rc != ncclSuccess) fail(what, std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(rc));
    if (async != ncclSuccess && async != ncclInProgress)
      fail(what, std::string("NCCL async error ") + ncclGetErrorString(async) + ": " +
                     ncclGetLastError(comm_));
  }
  [[noreturn]] void fail(const std::string& what, const std::string& why) {
    abort_once();
    throw Error("nccl comm: " + what + " " + why + "; communicator aborted");
  }
  void abort_once() noexcept {
    if (aborted_) return;
    ncclCommAbort(comm_);
    aborted_ = true;
  }
  void wait_stream(const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + options_.deadline;
    for (;;) {
      const cudaError_t st = cudaStreamQuery(stream_);
      if (st == cudaSuccess) return;
      if (st != cudaErrorNotReady) fail(what, std::string("CUDA ") + cudaGetErrorString(st));
      check_async(what);
      if (std::chrono::steady_clock::now() > deadline) fail(what, timeout_text());
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  ncclComm_t comm_;
  int device_;
  CommOptions options_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t order_event_ = nullptr;  // ready_to_launch: stream 0's work so far
  int rank_ = 0;
  int size_ = 0;
  bool aborted_ = false;
  std::shared_ptr<P2pBatch> pending_;
};

NcclRequest::~NcclRequest() {
  if (batch_ && !batch_->finished) comm_->abandon(*batch_);
}
void NcclRequest::wait() { comm_->poll(*batch_, true); }
bool NcclRequest::test() { return comm_->poll(*batch_, false); }

}  // namespace

std::unique_ptr<Communicator> nccl_communicator(MPI_Comm bootstrap, int device,
                                                CommOptions options) {
  DCP_NVTX_RANGE();
  int rank = 0, size = 0, ndev = 0;
  MPI_Comm_rank(bootstrap, &rank);
  MPI_Comm_size(bootstrap, &size);
  DCP_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  DCP_REQUIRE(ndev > 0, "nccl comm: no CUDA device on rank ", rank);
  if (device < 0) device = rank % ndev;
  DCP_REQUIRE(device < ndev, "nccl comm: device ", device, " requested on rank ", rank,
              " but only ", ndev, " devices exist");
  DCP_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  if (rank == 0) DCP_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
  DCP_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, bootstrap) == MPI_SUCCESS,
            "nccl comm: MPI_Bcast of the NCCL unique id failed on rank ", rank);
  ncclComm_t comm = nullptr;
  DCP_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank), nullptr);
  return std::make_unique<NcclComm>(comm, device, options);
}

}  // namespace dcp::comm
