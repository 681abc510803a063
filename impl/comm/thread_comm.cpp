// Thread backend: see thread_comm.h for the invariants (eager FIFO queues, rank-order
// reductions, one abort flag per world, deadline on every wait).
#include "comm/thread_comm.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "core/nvtx.h"
#include "core/rng.h"

namespace dcp::comm {

namespace {
constexpr int kCollTag = -1;  // reserved tag for collectives (user tags are >= 0)

struct Message {
  DType type;
  size_t count;
  std::vector<std::byte> data;
};

// (context, source world rank, destination world rank, tag)
using QueueKey = std::tuple<uint64_t, int, int, int>;
}  // namespace

struct ThreadWorldState {
  int size = 0;
  CommOptions options;
  std::mutex mu;
  std::vector<std::condition_variable> cvs;  // one per world rank: a send wakes only its receiver
  std::map<QueueKey, std::deque<Message>> queues;
  bool aborted = false;
  std::string abort_reason;
  uint64_t next_context = 1;  // context 0 is the world
  // (parent context, split sequence number on the parent, color) -> new context
  std::map<std::tuple<uint64_t, uint64_t, int>, uint64_t> split_contexts;
};

namespace {

class ThreadComm;

// A send is an eager copy here, so it is complete when posted. MPI and NCCL may still read the
// buffer until the send's wait() returns, so wait() checks that the caller has not written into it
// before then: a buffer reused too early (say, for the next ring step's receive) runs correctly on
// threads and corrupts data under MPI by timing (helper-38's audit found the thread backend hid
// it); here it is an error every time.
class ThreadSendRequest final : public Request {
 public:
  ThreadSendRequest(const void* buf, size_t count, DType type, int rank, int peer, int tag)
      : buf_(buf), count_(count), type_(type), rank_(rank), peer_(peer), tag_(tag),
        hash_(fnv1a(buf, count * dtype_bytes(type))) {}
  void wait() override {
    if (done_) return;
    DCP_CHECK(fnv1a(buf_, count_ * dtype_bytes(type_)) == hash_, "thread comm: isend on rank ", rank_,
              " to peer ", peer_, " (tag ", tag_, ", ", count_, " x ", dtype_name(type_),
              "): the send buffer was written before the send's wait() returned (MPI and NCCL may "
              "still be reading it then)");
    done_ = true;  // only once the check passed: a second wait() after a failure fails again
  }
  bool test() override {
    wait();
    return true;
  }

 private:
  const void* buf_;
  size_t count_;
  DType type_;
  int rank_, peer_, tag_;  // for the message only: formatted when the check fails
  uint64_t hash_;
  bool done_ = false;
};

class ThreadRecvRequest final : public Request {
 public:
  ThreadRecvRequest(std::shared_ptr<ThreadWorldState> st, QueueKey key, void* buf, size_t count,
                    DType type, std::string what)
      : st_(std::move(st)), key_(key), buf_(buf), count_(count), type_(type),
        what_(std::move(what)) {}
  // An unfinished receive is simply abandoned: sends are eager copies, so nothing can write
  // into buf_ after this (only error paths abandon requests).
  ~ThreadRecvRequest() override = default;
  void wait() override {
    if (done_) return;
    std::unique_lock lock(st_->mu);
    const auto deadline = std::chrono::steady_clock::now() + st_->options.deadline;
    auto& q = st_->queues[key_];
    const bool ready =
        st_->cvs[std::get<2>(key_)].wait_until(lock, deadline, [&] { return st_->aborted || !q.empty(); });
    if (st_->aborted) {
      done_ = true;
      throw Error("thread comm: " + what_ + " interrupted: world aborted because " +
                  st_->abort_reason);
    }
    if (!ready) {
      done_ = true;
      throw Error("thread comm: " + what_ + " timed out after " +
                  std::to_string(st_->options.deadline.count()) +
                  " ms (the peer never sent; deadline from CommOptions)");
    }
    take(q);
  }
  bool test() override {
    if (done_) return true;
    std::unique_lock lock(st_->mu);
    if (st_->aborted) {
      done_ = true;
      throw Error("thread comm: " + what_ + " interrupted: world aborted because " +
                  st_->abort_reason);
    }
    auto& q = st_->queues[key_];
    if (q.empty()) return false;
    take(q);
    return true;
  }

 private:
  void take(std::deque<Message>& q) {
    Message m = std::move(q.front());
    q.pop_front();
    done_ = true;
    DCP_CHECK(m.type == type_ && m.count == count_, "thread comm: ", what_, ": received ",
              m.count, " x ", dtype_name(m.type), " but expected ", count_, " x ",
              dtype_name(type_));
    if (count_ > 0) std::memcpy(buf_, m.data.data(), m.data.size());
  }

  std::shared_ptr<ThreadWorldState> st_;
  QueueKey key_;
  void* buf_;
  size_t count_;
  DType type_;
  std::string what_;
  bool done_ = false;
};

class ThreadComm final : public Communicator {
 public:
  ThreadComm(std::shared_ptr<ThreadWorldState> st, uint64_t context, std::vector<int> members,
             int rank)
      : st_(std::move(st)), context_(context), members_(std::move(members)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string backend() const override { return "thread"; }
  const CommOptions& options() const override { return st_->options; }

  RequestPtr isend_raw(const void* buf, size_t count, DType type, int peer, int tag) override {
    DCP_NVTX_RANGE();
    DCP_CHECK(tag >= 0, "thread comm: user tags must be >= 0, got ", tag);
    post(buf, count, type, peer, tag, "isend");
    return std::make_unique<ThreadSendRequest>(buf, count, type, rank_, peer, tag);
  }
  RequestPtr irecv_raw(void* buf, size_t count, DType type, int peer, int tag) override {
    DCP_NVTX_RANGE();
    DCP_CHECK(tag >= 0, "thread comm: user tags must be >= 0, got ", tag);
    return make_recv(buf, count, type, peer, tag, "irecv");
  }

  void all_reduce_raw(const void* send, void* recv, size_t count, DType type,
                      ReduceOp op) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    std::vector<std::byte> all(bytes * members_.size());
    gather_all(send, all.data(), count, type, "all_reduce");
    for (size_t i = 1; i < members_.size(); ++i)
      reduce_into(all.data(), all.data() + i * bytes, count, type, op);
    if (bytes > 0) std::memmove(recv, all.data(), bytes);
  }
  void all_gather_raw(const void* send, void* recv, size_t count, DType type) override {
    DCP_NVTX_RANGE();
    gather_all(send, recv, count, type, "all_gather");
  }
  void reduce_scatter_raw(const void* send, void* recv, size_t count, DType type,
                          ReduceOp op) override {
    DCP_NVTX_RANGE();
    const size_t bytes = count * dtype_bytes(type);
    const auto* src = static_cast<const std::byte*>(send);
    for (int p = 0; p < size(); ++p)
      if (p != rank_) post(src + p * bytes, count, type, p, kCollTag, "reduce_scatter");
    std::vector<std::byte> blocks(bytes * members_.size());
    std::vector<RequestPtr> reqs;
    for (int p = 0; p < size(); ++p) {
      if (p == rank_) {
        if (bytes > 0) std::memcpy(blocks.data() + p * bytes, src + rank_ * bytes, bytes);
      } else {
        reqs.push_back(
            make_recv(blocks.data() + p * bytes, count, type, p, kCollTag, "reduce_scatter"));
      }
    }
    wait_all(reqs);
    for (size_t i = 1; i < members_.size(); ++i)
      reduce_into(blocks.data(), blocks.data() + i * bytes, count, type, op);
    if (bytes > 0) std::memcpy(recv, blocks.data(), bytes);
  }
  void all_to_all_v_raw(const void* send, const size_t* send_counts, const size_t* send_displs,
                        void* recv, const size_t* recv_counts, const size_t* recv_displs,
                        DType type) override {
    DCP_NVTX_RANGE();
    const size_t eb = dtype_bytes(type);
    const auto* src = static_cast<const std::byte*>(send);
    auto* dst = static_cast<std::byte*>(recv);
    for (int p = 0; p < size(); ++p)
      if (p != rank_) post(src + send_displs[p] * eb, send_counts[p], type, p, kCollTag,
                           "all_to_all_v");
    std::vector<RequestPtr> reqs;
    for (int p = 0; p < size(); ++p) {
      if (p == rank_) {
        DCP_CHECK(send_counts[p] == recv_counts[p], "all_to_all_v: rank ", rank_, " sends ",
                  send_counts[p], " elements to itself but expects ", recv_counts[p]);
        if (send_counts[p] > 0)
          std::memcpy(dst + recv_displs[p] * eb, src + send_displs[p] * eb, send_counts[p] * eb);
      } else {
        reqs.push_back(make_recv(dst + recv_displs[p] * eb, recv_counts[p], type, p, kCollTag,
                                 "all_to_all_v"));
      }
    }
    wait_all(reqs);
  }
  void barrier() override {
    DCP_NVTX_RANGE();
    std::vector<int32_t> dummy(members_.size());
    const int32_t mine = 0;
    gather_all(&mine, dummy.data(), 1, DType::i32, "barrier");
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    DCP_NVTX_RANGE();
    const int64_t mine[2] = {color, key};
    std::vector<int64_t> all(2 * members_.size());
    gather_all(mine, all.data(), 2, DType::i64, "split");
    const uint64_t seq = split_seq_++;
    if (color < 0) return nullptr;
    std::vector<std::tuple<int64_t, int, int>> order;  // (key, old rank, world rank)
    for (int p = 0; p < size(); ++p)
      if (all[2 * p] == color) order.emplace_back(all[2 * p + 1], p, members_[p]);
    std::sort(order.begin(), order.end());
    std::vector<int> members;
    int new_rank = -1;
    for (const auto& [k, old_rank, world_rank] : order) {
      if (old_rank == rank_) new_rank = static_cast<int>(members.size());
      members.push_back(world_rank);
    }
    uint64_t ctx;
    {
      std::lock_guard lock(st_->mu);
      auto [it, inserted] = st_->split_contexts.try_emplace({context_, seq, color}, 0);
      if (inserted) it->second = st_->next_context++;
      ctx = it->second;
    }
    return std::make_unique<ThreadComm>(st_, ctx, std::move(members), new_rank);
  }

 private:
  void check_peer(int peer, const char* op) const {
    DCP_CHECK(peer >= 0 && peer < size(), "thread comm: ", op, " on rank ", rank_, ": peer ",
              peer, " outside communicator of size ", size());
  }
  void post(const void* buf, size_t count, DType type, int peer, int tag, const char* op) {
    check_peer(peer, op);
    Message m{type, count, std::vector<std::byte>(count * dtype_bytes(type))};
    if (!m.data.empty()) std::memcpy(m.data.data(), buf, m.data.size());
    {
      std::lock_guard lock(st_->mu);
      if (st_->aborted)
        throw Error(std::string("thread comm: ") + op + " on rank " + std::to_string(rank_) +
                    " to peer " + std::to_string(peer) + " interrupted: world aborted because " +
                    st_->abort_reason);
      st_->queues[{context_, members_[rank_], members_[peer], tag}].push_back(std::move(m));
    }
    st_->cvs[members_[peer]].notify_all();
  }
  RequestPtr make_recv(void* buf, size_t count, DType type, int peer, int tag, const char* op) {
    check_peer(peer, op);
    std::string what = std::string(op) + " on rank " + std::to_string(rank_) + " from peer " +
                       std::to_string(peer) + " (tag " + std::to_string(tag) + ", " +
                       std::to_string(count) + " x " + dtype_name(type) + ")";
    return std::make_unique<ThreadRecvRequest>(
        st_, QueueKey{context_, members_[peer], members_[rank_], tag}, buf, count, type,
        std::move(what));
  }
  // recv: [size * count], rank p's block at p * count.
  void gather_all(const void* send, void* recv, size_t count, DType type, const char* op) {
    const size_t bytes = count * dtype_bytes(type);
    for (int p = 0; p < size(); ++p)
      if (p != rank_) post(send, count, type, p, kCollTag, op);
    auto* dst = static_cast<std::byte*>(recv);
    std::vector<RequestPtr> reqs;
    for (int p = 0; p < size(); ++p) {
      if (p == rank_) {
        if (bytes > 0) std::memmove(dst + p * bytes, send, bytes);
      } else {
        reqs.push_back(make_recv(dst + p * bytes, count, type, p, kCollTag, op));
      }
    }
    wait_all(reqs);
  }

  std::shared_ptr<ThreadWorldState> st_;
  uint64_t context_;
  std::vector<int> members_;  // world ranks, indexed by rank in this communicator
  int rank_;
  uint64_t split_seq_ = 0;
};

}  // namespace

ThreadWorld::ThreadWorld(int size, CommOptions options)
    : size_(size), state_(std::make_shared<ThreadWorldState>()) {
  DCP_REQUIRE(size >= 1, "thread world: size must be >= 1, got ", size);
  state_->size = size;
  state_->cvs = std::vector<std::condition_variable>(size);
  state_->options = options;
}

ThreadWorld::~ThreadWorld() = default;

std::unique_ptr<Communicator> ThreadWorld::communicator(int rank) {
  DCP_CHECK(rank >= 0 && rank < size_, "thread world: rank ", rank, " outside world of ", size_);
  std::vector<int> members(size_);
  for (int i = 0; i < size_; ++i) members[i] = i;
  return std::make_unique<ThreadComm>(state_, 0, std::move(members), rank);
}

void ThreadWorld::abort(int failed_rank, const std::string& reason) {
  {
    std::lock_guard lock(state_->mu);
    if (state_->aborted) return;  // keep the first (root-cause) reason
    state_->aborted = true;
    state_->abort_reason = "rank " + std::to_string(failed_rank) + " failed: " + reason;
  }
  for (auto& cv : state_->cvs) cv.notify_all();
}

bool ThreadWorld::aborted() const {
  std::lock_guard lock(state_->mu);
  return state_->aborted;
}

void run_threads(int size, const std::function<void(Communicator&)>& fn, CommOptions options) {
  DCP_NVTX_RANGE();
  ThreadWorld world(size, options);
  std::vector<std::exception_ptr> errors(size);
  std::atomic<int> first_failed{-1};
  std::vector<std::thread> threads;
  threads.reserve(size);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = world.communicator(r);
        fn(*comm);
      } catch (const std::exception& e) {
        errors[r] = std::current_exception();
        int expected = -1;
        first_failed.compare_exchange_strong(expected, r);
        world.abort(r, e.what());
      } catch (...) {
        errors[r] = std::current_exception();
        int expected = -1;
        first_failed.compare_exchange_strong(expected, r);
        world.abort(r, "unknown exception");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first_failed.load() >= 0) std::rethrow_exception(errors[first_failed.load()]);
}

}  // namespace dcp::comm
