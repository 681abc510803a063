// MPI backend: see mpi_comm.h (non-blocking MPI calls completed by deadline-bounded polling).
#include "comm/mpi_comm.h"

#include <climits>
#include <cstddef>
#include <cstring>
#include <cstdio>
#include <thread>

#include "core/nvtx.h"

#define DCP_MPI_CHECK(expr)                                                         \
  do {                                                                              \
    const int dcp_mpi_rc_ = (expr);                                                 \
    if (dcp_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                                  \
      char dcp_mpi_msg_[MPI_MAX_ERROR_STRING];                                      \
      int dcp_mpi_len_ = 0;                                                         \
      MPI_Error_string(dcp_mpi_rc_, dcp_mpi_msg_, &dcp_mpi_len_);                   \
      DCP_FAIL("MPI error in ", #expr, ": ", std::string(dcp_mpi_msg_, dcp_mpi_len_)); \
    }                                                                               \
  } while (0)

namespace dcp::comm {

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
  }
  DCP_FAIL("unknown dtype ", static_cast<int>(t));
}

int to_int(size_t n, const char* what) {
  DCP_CHECK(n <= static_cast<size_t>(INT_MAX), "MPI ", what, ": ", n,
            " elements exceed the int count MPI takes");
  return static_cast<int>(n);
}

// Polls `req` until done or the deadline passes. `what` names op, rank and peer. `status` (may be
// null): the completed operation's status.
void wait_deadline(MPI_Request* req, const CommOptions& opt, const std::string& what,
                   MPI_Status* status = MPI_STATUS_IGNORE) {
  const auto deadline = std::chrono::steady_clock::now() + opt.deadline;
  for (int polls = 0;; ++polls) {
    int done = 0;
    DCP_MPI_CHECK(MPI_Test(req, &done, status));
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error("mpi comm: " + what + " timed out after " +
                  std::to_string(opt.deadline.count()) + " ms (deadline from CommOptions)");
    // Spin briefly, then back off: under mpirun --oversubscribe ranks share cores.
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class MpiRequest final : public Request {
 public:
  // count, type: what a receive expects. A longer message is MPI's truncation error; a shorter one
  // completes without error in MPI and is checked here (the thread backend refuses both).
  MpiRequest(MPI_Request req, bool is_recv, const CommOptions& opt, std::string what, int count = 0,
             DType type = DType::f32)
      : req_(req), is_recv_(is_recv), opt_(opt), what_(std::move(what)), count_(count), type_(type) {}
  ~MpiRequest() override {
    if (req_ == MPI_REQUEST_NULL) return;
    // Abandoned (error path): MPI must never write into the buffer later. A receive is cancelled
    // and then completed: MPI_Wait on a cancelled receive is local (MPI 4.0 §3.8.4), and one that
    // was already matched finishes its transfer before the wait returns; MPI_Request_free after
    // MPI_Cancel, as until 2026-11-28, gave neither guarantee (helper-21). A send's buffer is only
    // read; its request is freed.
    if (is_recv_) {
      MPI_Cancel(&req_);
      MPI_Wait(&req_, MPI_STATUS_IGNORE);
    } else {
      MPI_Request_free(&req_);
    }
  }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    MPI_Status st;
    wait_deadline(&req_, opt_, what_, &st);
    check_count(st);
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_Status st;
    DCP_MPI_CHECK(MPI_Test(&req_, &done, &st));
    if (done) check_count(st);
    return done != 0;
  }

 private:
  void check_count(const MPI_Status& st) const {
    if (!is_recv_) return;
    int got = 0;
    DCP_MPI_CHECK(MPI_Get_count(&st, mpi_type(type_), &got));
    DCP_CHECK(got == count_, "mpi comm: ", what_, ": received ", got == MPI_UNDEFINED ? -1 : got, " x ",
              dtype_name(type_), " but expected ", count_, " x ", dtype_name(type_));
  }

  MPI_Request req_;
  bool is_recv_;
  CommOptions opt_;
  std::string what_;
  int count_;
  DType type_;
};

class MpiComm final : public Communicator {
 public:
  MpiComm(MPI_Comm owned, CommOptions options) : comm_(owned), options_(options) {
    DCP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    DCP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    DCP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiComm() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  const CommOptions& options() const override { return options_; }

  RequestPtr isend_raw(const void* buf, size_t count, DType type, int peer, int tag) override {
    DCP_NVTX_RANGE();
    check_p2p(peer, tag, "isend");
    MPI_Request req;
    DCP_MPI_CHECK(MPI_Isend(buf, to_int(count, "isend"), mpi_type(type), peer, tag, comm_, &req));
    return std::make_unique<MpiRequest>(req, false, options_, p2p_what("isend", "to", peer, tag));
  }
  RequestPtr irecv_raw(void* buf, size_t count, DType type, int peer, int tag) override {
    DCP_NVTX_RANGE();
    check_p2p(peer, tag, "irecv");
    MPI_Request req;
    const int n = to_int(count, "irecv");
    DCP_MPI_CHECK(MPI_Irecv(buf, n, mpi_type(type), peer, tag, comm_, &req));
    return std::make_unique<MpiRequest>(req, true, options_, p2p_what("irecv", "from", peer, tag), n, type);
  }
  // Reductions gather every rank's operand and reduce in rank order, exactly as the thread
  // backend does, so a run under mpirun gives the same bits as the same run on threads (MPI's own
  // reduction order is implementation-defined). Cost: size x count elements per rank; the
  // reductions dcpbench runs over MPI are small (loss sums, CP-group dK/dV blocks).
  void all_reduce_raw(const void* send, void* recv, size_t count, DType type,
                      ReduceOp op) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    std::vector<std::byte> all(bytes * static_cast<size_t>(size_));
    MPI_Request req;
    DCP_MPI_CHECK(MPI_Iallgather(send, to_int(count, "all_reduce"), mpi_type(type), all.data(),
                                 to_int(count, "all_reduce"), mpi_type(type), comm_, &req));
    wait_deadline(&req, options_, coll_what("all_reduce"));
    for (int i = 1; i < size_; ++i) reduce_into(all.data(), all.data() + i * bytes, count, type, op);
    if (bytes > 0) std::memmove(recv, all.data(), bytes);
  }
  void all_gather_raw(const void* send, void* recv, size_t count, DType type) override {
    DCP_NVTX_RANGE();
    MPI_Request req;
    const int n = to_int(count, "all_gather");
    DCP_MPI_CHECK(MPI_Iallgather(send, n, mpi_type(type), recv, n, mpi_type(type), comm_, &req));
    wait_deadline(&req, options_, coll_what("all_gather"));
  }
  void reduce_scatter_raw(const void* send, void* recv, size_t count, DType type,
                          ReduceOp op) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    std::vector<std::byte> blocks(bytes * static_cast<size_t>(size_));  // block p: rank p's operand
    MPI_Request req;
    DCP_MPI_CHECK(MPI_Ialltoall(send, to_int(count, "reduce_scatter"), mpi_type(type), blocks.data(),
                                to_int(count, "reduce_scatter"), mpi_type(type), comm_, &req));
    wait_deadline(&req, options_, coll_what("reduce_scatter"));
    for (int i = 1; i < size_; ++i) reduce_into(blocks.data(), blocks.data() + i * bytes, count, type, op);
    if (bytes > 0) std::memcpy(recv, blocks.data(), bytes);
  }
  void all_to_all_v_raw(const void* send, const size_t* send_counts, const size_t* send_displs,
                        void* recv, const size_t* recv_counts, const size_t* recv_displs,
                        DType type) override {
    DCP_NVTX_RANGE();
    std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
    for (int p = 0; p < size_; ++p) {
      sc[p] = to_int(send_counts[p], "all_to_all_v");
      sd[p] = to_int(send_displs[p], "all_to_all_v");
      rc[p] = to_int(recv_counts[p], "all_to_all_v");
      rd[p] = to_int(recv_displs[p], "all_to_all_v");
    }
    MPI_Request req;
    DCP_MPI_CHECK(MPI_Ialltoallv(send, sc.data(), sd.data(), mpi_type(type), recv, rc.data(),
                                 rd.data(), mpi_type(type), comm_, &req));
    wait_deadline(&req, options_, coll_what("all_to_all_v"));
  }
  void barrier() override {
    DCP_NVTX_RANGE();
    MPI_Request req;
    DCP_MPI_CHECK(MPI_Ibarrier(comm_, &req));
    wait_deadline(&req, options_, coll_what("barrier"));
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    DCP_NVTX_RANGE();
    // Deadline-bounded rendezvous first: MPI_Comm_split itself cannot be polled.
    const int64_t mine[2] = {color, key};
    std::vector<int64_t> all(2 * static_cast<size_t>(size_));
    all_gather_raw(mine, all.data(), 2, DType::i64);
    MPI_Comm out = MPI_COMM_NULL;
    DCP_MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
    if (out == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiComm>(out, options_);
  }

 private:
  void check_p2p(int peer, int tag, const char* op) const {
    DCP_CHECK(peer >= 0 && peer < size_, "mpi comm: ", op, " on rank ", rank_, ": peer ", peer,
              " outside communicator of size ", size_);
    DCP_CHECK(tag >= 0, "mpi comm: user tags must be >= 0, got ", tag);
  }
  std::string p2p_what(const char* op, const char* dir, int peer, int tag) const {
    return std::string(op) + " on rank " + std::to_string(rank_) + " " + dir + " peer " +
           std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  }
  std::string coll_what(const char* op) const {
    return std::string(op) + " on rank " + std::to_string(rank_) + " (peers: all " +
           std::to_string(size_) + " ranks)";
  }

  MPI_Comm comm_;
  CommOptions options_;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    DCP_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    owns_ = true;
  }
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

std::unique_ptr<Communicator> mpi_communicator(MPI_Comm comm, CommOptions options) {
  MPI_Comm dup = MPI_COMM_NULL;
  DCP_MPI_CHECK(MPI_Comm_dup(comm, &dup));
  return std::make_unique<MpiComm>(dup, options);
}

int run_mpi(const std::function<void(Communicator&)>& fn, CommOptions options) {
  DCP_NVTX_RANGE();
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    auto world = mpi_communicator(MPI_COMM_WORLD, options);
    fn(*world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dcpbench rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}

}  // namespace dcp::comm
