// Communicator: the one interface every rank-to-rank exchange in dcpbench goes through.
//
// Three backends implement it (docs/comm.md):
//   thread_comm.h : N threads in one process sharing memory (tests, single-process runs)
//   mpi_comm.h    : one process per rank under mpirun (OpenMPI)
//   nccl_comm.h   : one process per GPU, NCCL bootstrapped through MPI (only with CUDA + NCCL)
//
// Invariants every backend keeps:
//   - Every wait has a deadline (CommOptions::deadline). When it passes, the wait throws a
//     dcp::Error that names the operation, this rank and the peer (or "all" for collectives),
//     never hangs.
//   - A rank that fails does not leave the others hanging: the thread world wakes every waiter
//     through its abort flag, the MPI runner calls MPI_Abort, NCCL calls ncclCommAbort.
//   - Point-to-point messages between one (sender, receiver, tag) triple are non-overtaking
//     (MPI semantics). User tags are >= 0; negative tags are reserved for the backends.
//     NCCL has no tags: it matches a rank's sends to a peer with that peer's receives from the
//     rank in the order they are posted, whatever the tags. Portable code therefore posts the
//     messages between two ranks in the same order on both sides (every caller here does: the
//     ring, the MTP roll, the collectives); receives posted out of order work on threads and MPI
//     only.
//   - Collectives must be called by every rank of the communicator in the same order with the
//     same counts; reductions are deterministic (the same bits on every rank and every run for
//     the thread backend, which reduces in rank order).
// Buffers are typed (float, double, int32, int64); the typed wrappers below take std::span and
// check sizes. For the NCCL backend, pointers may be device or host memory (host memory is
// staged through the device).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace dcp::comm {

enum class DType { f32, f64, i32, i64 };
enum class ReduceOp { sum, max, min };

size_t dtype_bytes(DType t);
const char* dtype_name(DType t);
const char* reduce_op_name(ReduceOp op);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <>
constexpr DType dtype_of<int64_t>() { return DType::i64; }

struct CommOptions {
  // Longest any single wait (recv, collective, barrier) may block before it throws.
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};
};

// A pending non-blocking send or receive. wait() blocks until done (or throws at the deadline);
// test() returns true once done. Destroying an unfinished request abandons it without waiting
// (error paths only): the thread backend drops it, MPI cancels a receive, NCCL aborts the
// communicator. Correct code always waits.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool test() = 0;
};
using RequestPtr = std::unique_ptr<Request>;

// Waits for every request in order; the first error propagates.
void wait_all(std::vector<RequestPtr>& requests);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "thread", "mpi", "nccl"
  virtual const CommOptions& options() const = 0;

  // --- untyped core (count = number of elements of `type`) ---
  virtual RequestPtr isend_raw(const void* buf, size_t count, DType type, int peer, int tag) = 0;
  virtual RequestPtr irecv_raw(void* buf, size_t count, DType type, int peer, int tag) = 0;
  // send/recv: [count] each rank; in place allowed (send == recv).
  virtual void all_reduce_raw(const void* send, void* recv, size_t count, DType type,
                              ReduceOp op) = 0;
  // send: [count] per rank; recv: [size * count], rank i's block at i * count.
  virtual void all_gather_raw(const void* send, void* recv, size_t count, DType type) = 0;
  // send: [size * count]; recv: [count] = sum over ranks of their block `rank()`.
  virtual void reduce_scatter_raw(const void* send, void* recv, size_t count, DType type,
                                  ReduceOp op) = 0;
  // send_counts/send_displs/recv_counts/recv_displs: [size] each, in elements.
  virtual void all_to_all_v_raw(const void* send, const size_t* send_counts,
                                const size_t* send_displs, void* recv, const size_t* recv_counts,
                                const size_t* recv_displs, DType type) = 0;
  virtual void barrier() = 0;
  // Collective: ranks with the same color form a new communicator, ordered by (key, old rank).
  // color < 0 means "not a member": the result is nullptr for that rank.
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // --- typed wrappers ---
  template <typename T>
  RequestPtr isend(std::span<const T> buf, int peer, int tag) {
    return isend_raw(buf.data(), buf.size(), dtype_of<T>(), peer, tag);
  }
  template <typename T>
  RequestPtr irecv(std::span<T> buf, int peer, int tag) {
    return irecv_raw(buf.data(), buf.size(), dtype_of<T>(), peer, tag);
  }
  template <typename T>
  void send(std::span<const T> buf, int peer, int tag) { isend(buf, peer, tag)->wait(); }
  template <typename T>
  void recv(std::span<T> buf, int peer, int tag) { irecv(buf, peer, tag)->wait(); }

  template <typename T>
  void all_reduce(std::span<T> buf, ReduceOp op = ReduceOp::sum) {
    all_reduce_raw(buf.data(), buf.data(), buf.size(), dtype_of<T>(), op);
  }
  // send: [n]; recv: [size * n].
  template <typename T>
  void all_gather(std::span<const T> send, std::span<T> recv) {
    DCP_CHECK(recv.size() == send.size() * static_cast<size_t>(size()), "all_gather: recv has ",
              recv.size(), " elements, expected ", send.size(), " x ", size());
    all_gather_raw(send.data(), recv.data(), send.size(), dtype_of<T>());
  }
  // send: [size * n]; recv: [n].
  template <typename T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, ReduceOp op = ReduceOp::sum) {
    DCP_CHECK(send.size() == recv.size() * static_cast<size_t>(size()),
              "reduce_scatter: send has ", send.size(), " elements, expected ", recv.size(),
              " x ", size());
    reduce_scatter_raw(send.data(), recv.data(), recv.size(), dtype_of<T>(), op);
  }
  // Displacements are the exclusive prefix sums of the counts (packed blocks, rank order).
  template <typename T>
  void all_to_all_v(std::span<const T> send, std::span<const size_t> send_counts,
                    std::span<T> recv, std::span<const size_t> recv_counts);
};

// Exclusive prefix sums of counts: [n] -> [n].
std::vector<size_t> displacements(std::span<const size_t> counts);

template <typename T>
void Communicator::all_to_all_v(std::span<const T> send, std::span<const size_t> send_counts,
                                std::span<T> recv, std::span<const size_t> recv_counts) {
  const size_t n = static_cast<size_t>(size());
  DCP_CHECK(send_counts.size() == n && recv_counts.size() == n, "all_to_all_v: counts need ", n,
            " entries, got ", send_counts.size(), " and ", recv_counts.size());
  const auto sd = displacements(send_counts);
  const auto rd = displacements(recv_counts);
  DCP_CHECK(sd.back() + send_counts.back() <= send.size(), "all_to_all_v: send buffer too small");
  DCP_CHECK(rd.back() + recv_counts.back() <= recv.size(), "all_to_all_v: recv buffer too small");
  all_to_all_v_raw(send.data(), send_counts.data(), sd.data(), recv.data(), recv_counts.data(),
                   rd.data(), dtype_of<T>());
}

// Applies `op` elementwise: acc[i] = op(acc[i], x[i]) for `count` elements of `type`.
void reduce_into(void* acc, const void* x, size_t count, DType type, ReduceOp op);

}  // namespace dcp::comm
