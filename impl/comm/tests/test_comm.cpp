// Thread backend of Communicator: every operation against values computed independently on
// each rank, plus the failure behaviour (deadline, abort of a world when one rank throws).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "comm/thread_comm.h"

namespace dcp::comm {
namespace {

// Value rank r contributes at element i (distinct per (r, i); exact in float and double).
double val(int r, size_t i) { return 1.0 + r * 1000.0 + static_cast<double>(i) * 0.5; }

class ThreadComm : public ::testing::TestWithParam<int> {};

TEST_P(ThreadComm, RingSendRecvBothDtypes) {
  const int n = GetParam();
  run_threads(n, [](Communicator& c) {
    const int r = c.rank(), p = c.size();
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    std::vector<double> sd(7), rd(7, -1);
    std::vector<float> sf(3), rf(3, -1);
    for (size_t i = 0; i < sd.size(); ++i) sd[i] = val(r, i);
    for (size_t i = 0; i < sf.size(); ++i) sf[i] = static_cast<float>(val(r, i));
    std::vector<RequestPtr> reqs;
    reqs.push_back(c.isend(std::span<const double>(sd), next, 3));
    reqs.push_back(c.isend(std::span<const float>(sf), next, 4));
    reqs.push_back(c.irecv(std::span<float>(rf), prev, 4));  // posted out of order on purpose
    reqs.push_back(c.irecv(std::span<double>(rd), prev, 3));
    wait_all(reqs);
    for (size_t i = 0; i < rd.size(); ++i) ASSERT_EQ(rd[i], val(prev, i));
    for (size_t i = 0; i < rf.size(); ++i) ASSERT_EQ(rf[i], static_cast<float>(val(prev, i)));
  });
}

TEST_P(ThreadComm, CollectivesMatchDirectComputation) {
  const int n = GetParam();
  run_threads(n, [n](Communicator& c) {
    const int r = c.rank();
    // all_reduce sum / max / min in float64, float32 and int64. The rank holding an element's
    // maximum (minimum) moves with the element and the sign alternates, so neither the first
    // nor the last rank's value is the answer everywhere (a reduction that kept one rank's
    // buffer would pass a test where the values grow with the rank).
    const auto mixed = [n](int q, size_t i) {
      return (i % 2 ? 1.0 : -1.0) * val((q + static_cast<int>(i)) % n, i);
    };
    const size_t len = 7;
    std::vector<double> a(len);
    std::vector<float> af(len);
    std::vector<int64_t> ai(len);
    for (size_t i = 0; i < len; ++i) {
      a[i] = mixed(r, i);
      af[i] = static_cast<float>(mixed(r, i));
      ai[i] = static_cast<int64_t>(mixed(r, i) * 2);
    }
    auto s = a, mx = a, mn = a;
    auto sf = af, mxf = af, mnf = af;
    auto si = ai, mxi = ai, mni = ai;
    c.all_reduce(std::span<double>(s));
    c.all_reduce(std::span<double>(mx), ReduceOp::max);
    c.all_reduce(std::span<double>(mn), ReduceOp::min);
    c.all_reduce(std::span<float>(sf));
    c.all_reduce(std::span<float>(mxf), ReduceOp::max);
    c.all_reduce(std::span<float>(mnf), ReduceOp::min);
    c.all_reduce(std::span<int64_t>(si));
    c.all_reduce(std::span<int64_t>(mxi), ReduceOp::max);
    c.all_reduce(std::span<int64_t>(mni), ReduceOp::min);
    for (size_t i = 0; i < len; ++i) {
      double sum = 0, hi = mixed(0, i), lo = mixed(0, i);
      float sumf = 0;
      int64_t sumi = 0;
      for (int q = 0; q < n; ++q) {
        sum += mixed(q, i);
        sumf += static_cast<float>(mixed(q, i));  // the values are exact in float: any order
        sumi += static_cast<int64_t>(mixed(q, i) * 2);
        hi = std::max(hi, mixed(q, i));
        lo = std::min(lo, mixed(q, i));
      }
      ASSERT_EQ(s[i], sum);
      ASSERT_EQ(mx[i], hi);
      ASSERT_EQ(mn[i], lo);
      ASSERT_EQ(sf[i], sumf);
      ASSERT_EQ(mxf[i], static_cast<float>(hi));
      ASSERT_EQ(mnf[i], static_cast<float>(lo));
      ASSERT_EQ(si[i], sumi);
      ASSERT_EQ(mxi[i], static_cast<int64_t>(hi * 2));
      ASSERT_EQ(mni[i], static_cast<int64_t>(lo * 2));
    }
    // all_gather
    std::vector<int64_t> mine = {r, 10 * r};
    std::vector<int64_t> all(2 * n);
    c.all_gather(std::span<const int64_t>(mine), std::span<int64_t>(all));
    for (int q = 0; q < n; ++q) {
      ASSERT_EQ(all[2 * q], q);
      ASSERT_EQ(all[2 * q + 1], 10 * q);
    }
    // reduce_scatter: block q of rank r holds val(r, q); rank r gets sum over ranks of block r.
    std::vector<double> blocks(2 * n), out(2);
    for (int q = 0; q < n; ++q) blocks[2 * q] = blocks[2 * q + 1] = val(r, q);
    c.reduce_scatter(std::span<const double>(blocks), std::span<double>(out));
    double want = 0;
    for (int q = 0; q < n; ++q) want += val(q, r);
    ASSERT_EQ(out[0], want);
    ASSERT_EQ(out[1], want);
    // all_to_all_v: rank r sends (q + 1) copies of 100r + q to rank q.
    std::vector<size_t> sc(n), rc(n);
    std::vector<int32_t> send, recv;
    for (int q = 0; q < n; ++q) {
      sc[q] = q + 1;
      rc[q] = r + 1;
      for (int k = 0; k <= q; ++k) send.push_back(100 * r + q);
    }
    recv.assign(static_cast<size_t>(n) * (r + 1), -1);
    c.all_to_all_v(std::span<const int32_t>(send), std::span<const size_t>(sc),
                   std::span<int32_t>(recv), std::span<const size_t>(rc));
    for (int q = 0; q < n; ++q)
      for (int k = 0; k <= r; ++k) ASSERT_EQ(recv[q * (r + 1) + k], 100 * q + r);
    c.barrier();
  });
}

TEST_P(ThreadComm, SplitOrdersByKeyAndIsolatesTraffic) {
  const int n = GetParam();
  run_threads(n, [n](Communicator& c) {
    const int r = c.rank();
    // Two colors (even/odd), reversed order inside each through the key.
    auto sub = c.split(r % 2, -r);
    ASSERT_NE(sub, nullptr);
    const int members = (n + 1 - r % 2) / 2;
    ASSERT_EQ(sub->size(), members);
    ASSERT_EQ(sub->rank(), members - 1 - r / 2);
    int64_t x = r;
    sub->all_reduce(std::span<int64_t>(&x, 1));
    int64_t want = 0;
    for (int q = r % 2; q < n; q += 2) want += q;
    ASSERT_EQ(x, want);
    // Traffic on the parent with the same tag between the same two threads does not leak into
    // the child, nor the child's into the parent: each rank sends on the parent first, then on
    // the child, to the thread of its next child rank, and receives the child's message first.
    // (Sharing one context, the child's receive would take the parent's message, which is
    // first in the queue of that pair and tag.)
    const int m = sub->size(), k = sub->rank();
    const auto world_of = [&](int child_rank) { return 2 * (m - 1 - child_rank) + r % 2; };
    const int cnext = (k + 1) % m, cprev = (k + m - 1) % m;
    const int32_t on_parent = 1000 + r, on_child = 2000 + r;
    int32_t got_parent = -1, got_child = -1;
    auto s1 = c.isend(std::span<const int32_t>(&on_parent, 1), world_of(cnext), 0);
    auto s2 = sub->isend(std::span<const int32_t>(&on_child, 1), cnext, 0);
    auto r2 = sub->irecv(std::span<int32_t>(&got_child, 1), cprev, 0);
    auto r1 = c.irecv(std::span<int32_t>(&got_parent, 1), world_of(cprev), 0);
    r2->wait();
    r1->wait();
    s1->wait();
    s2->wait();
    ASSERT_EQ(got_child, 2000 + world_of(cprev));
    ASSERT_EQ(got_parent, 1000 + world_of(cprev));
    auto none = c.split(r == 0 ? -1 : 0, 0);
    ASSERT_EQ(none == nullptr, r == 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, ThreadComm, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// MPI and NCCL may read a send buffer until the send's wait() returns; the thread backend's eager
// copy would hide a buffer written before then, so its wait() checks the buffer is unchanged.
TEST(ThreadCommFailure, SendBufferWrittenBeforeItsWaitIsAnError) {
  run_threads(2, [](Communicator& c) {
    const int peer = 1 - c.rank();
    std::vector<double> out = {1.0, 2.0, 3.0}, in(3);
    auto s = c.isend(std::span<const double>(out), peer, 7);
    auto r = c.irecv(std::span<double>(in), peer, 7);
    r->wait();
    s->wait();  // unchanged: fine
    EXPECT_EQ(in, (std::vector<double>{1.0, 2.0, 3.0}));
    auto s2 = c.isend(std::span<const double>(out), peer, 8);
    auto r2 = c.irecv(std::span<double>(in), peer, 8);
    r2->wait();
    out[0] = 4.0;  // written while the send may still be read
    try {
      s2->wait();
      ADD_FAILURE() << "a send buffer written before its wait() passed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the send buffer was written before the send's wait() returned"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(ThreadCommFailure, RecvWithoutSenderHitsDeadlineNamingRankAndPeer) {
  CommOptions opt;
  opt.deadline = std::chrono::milliseconds(100);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_threads(2, [](Communicator& c) {
      if (c.rank() == 1) {
        double x;
        c.recv(std::span<double>(&x, 1), 0, 7);
      }
    }, opt);
    FAIL() << "expected a deadline error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("irecv on rank 1 from peer 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(ThreadCommFailure, OneRankThrowingWakesTheOthersAndItsErrorIsRethrown) {
  CommOptions opt;
  opt.deadline = std::chrono::seconds(60);  // must not be what ends the waits
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(run_threads(4, [](Communicator& c) {
                 if (c.rank() == 2) throw InputError("bad input on rank 2");
                 c.barrier();  // ranks 0, 1, 3 wait here for rank 2 forever
               }, opt),
               InputError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(ThreadCommFailure, SizeMismatchAndBadPeerAreErrors) {
  EXPECT_THROW(run_threads(2, [](Communicator& c) {
                 std::vector<double> x(c.rank() == 0 ? 3 : 4);
                 if (c.rank() == 0) c.send(std::span<const double>(x), 1, 0);
                 else c.recv(std::span<double>(x), 0, 0);
               }),
               Error);
  EXPECT_THROW(run_threads(1, [](Communicator& c) {
                 double x = 0;
                 c.send(std::span<const double>(&x, 1), 1, 0);
               }),
               Error);
  EXPECT_THROW(ThreadWorld(0), InputError);
}

}  // namespace
}  // namespace dcp::comm
