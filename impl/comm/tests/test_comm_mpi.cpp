// MPI backend, run under `mpirun -np 4` (CTest label mpi): point-to-point ring, every collective,
// split, the group registry on the 4-rank pool, and the deadline error. Every rank runs every
// test; a failing assertion on any rank makes mpirun exit non-zero.
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/group_registry.h"
#include "comm/mpi_comm.h"

namespace dcp::comm {
namespace {

std::unique_ptr<Communicator> world(int deadline_ms = 30000) {
  CommOptions opt;
  opt.deadline = std::chrono::milliseconds(deadline_ms);
  return mpi_communicator(MPI_COMM_WORLD, opt);
}

double val(int r, size_t i) { return 1.0 + r * 1000.0 + static_cast<double>(i) * 0.25; }

TEST(MpiComm, RingSendRecv) {
  auto c = world();
  const int r = c->rank(), p = c->size();
  std::vector<double> s(9), got(9, -1);
  for (size_t i = 0; i < s.size(); ++i) s[i] = val(r, i);
  auto rq = c->irecv(std::span<double>(got), (r + p - 1) % p, 5);
  auto sq = c->isend(std::span<const double>(s), (r + 1) % p, 5);
  sq->wait();
  rq->wait();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], val((r + p - 1) % p, i));
}

TEST(MpiComm, Collectives) {
  auto c = world();
  const int r = c->rank(), n = c->size();
  // The rank holding an element's maximum / minimum moves with the element and the sign
  // alternates (values that grow with the rank would pass a reduction keeping one rank's buffer).
  const auto mixed = [n](int q, size_t i) {
    return (i % 2 ? 1.0 : -1.0) * val((q + static_cast<int>(i)) % n, i);
  };
  std::vector<double> a(5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = mixed(r, i);
  auto mx = a, mn = a;
  c->all_reduce(std::span<double>(a));
  c->all_reduce(std::span<double>(mx), ReduceOp::max);
  c->all_reduce(std::span<double>(mn), ReduceOp::min);
  for (size_t i = 0; i < a.size(); ++i) {
    double want = 0, hi = mixed(0, i), lo = mixed(0, i);
    for (int q = 0; q < n; ++q) {
      want += mixed(q, i);
      hi = std::max(hi, mixed(q, i));
      lo = std::min(lo, mixed(q, i));
    }
    ASSERT_EQ(a[i], want);
    ASSERT_EQ(mx[i], hi);
    ASSERT_EQ(mn[i], lo);
  }
  std::vector<float> all(static_cast<size_t>(n) * 2);
  const float mine[2] = {static_cast<float>(r), static_cast<float>(-r)};
  c->all_gather(std::span<const float>(mine, 2), std::span<float>(all));
  for (int q = 0; q < n; ++q) {
    ASSERT_EQ(all[2 * q], static_cast<float>(q));
    ASSERT_EQ(all[2 * q + 1], static_cast<float>(-q));
  }
  std::vector<double> blocks(n), out(1);
  for (int q = 0; q < n; ++q) blocks[q] = val(r, q);
  c->reduce_scatter(std::span<const double>(blocks), std::span<double>(out));
  double want = 0;
  for (int q = 0; q < n; ++q) want += val(q, r);
  ASSERT_EQ(out[0], want);
  std::vector<size_t> sc(n), rc(n);
  std::vector<int64_t> send, recv(static_cast<size_t>(n) * (r + 1));
  for (int q = 0; q < n; ++q) {
    sc[q] = q + 1;
    rc[q] = r + 1;
    for (int k = 0; k <= q; ++k) send.push_back(100000 * k + 100 * r + q);  // copy k of r -> q
  }
  c->all_to_all_v(std::span<const int64_t>(send), std::span<const size_t>(sc),
                  std::span<int64_t>(recv), std::span<const size_t>(rc));
  for (int q = 0; q < n; ++q)
    for (int k = 0; k <= r; ++k) ASSERT_EQ(recv[q * (r + 1) + k], 100000 * k + 100 * q + r);
  c->barrier();
}

TEST(MpiComm, GroupRegistryOnThePool) {
  auto c = world();
  GroupRegistry reg(*c);
  const int n = c->size();
  ASSERT_EQ(reg.sizes().back(), n);
  for (int k : reg.sizes()) {
    auto& g = reg.group(k);
    ASSERT_EQ(g.size(), k);
    std::vector<int32_t> members(k);
    const int32_t mine = c->rank();
    g.all_gather(std::span<const int32_t>(&mine, 1), std::span<int32_t>(members));
    for (int i = 0; i < k; ++i) ASSERT_EQ(members[i], reg.group_first_rank(k) + i);
  }
  EXPECT_THROW(reg.group(3), InputError);
}

// A message shorter than the receive is an error, as on threads (MPI itself completes it and
// leaves the buffer's tail as it was; until 2026-11-28 so did we).
TEST(MpiComm, ShortMessageIsAnError) {
  auto c = world();
  const int r = c->rank(), p = c->size();
  std::vector<double> s(3, 7.0), got(4, -1.0);
  auto rq = c->irecv(std::span<double>(got), (r + p - 1) % p, 6);
  c->send(std::span<const double>(s), (r + 1) % p, 6);
  try {
    rq->wait();
    FAIL() << "a 3-element message completed a 4-element receive";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("received 3 x float64 but expected 4 x float64"), std::string::npos) << e.what();
  }
  c->barrier();
}

TEST(MpiComm, RecvWithoutSenderHitsDeadline) {
  auto c = world(200);
  auto sync = world();
  if (c->rank() == 0) {
    double x = 0;
    try {
      c->recv(std::span<double>(&x, 1), c->size() - 1, 99);
      FAIL() << "expected a deadline error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("irecv on rank 0 from peer"), std::string::npos)
          << e.what();
    }
  }
  sync->barrier();  // the abandoned receive was cancelled; everyone continues
}

}  // namespace
}  // namespace dcp::comm

int main(int argc, char** argv) {
  dcp::comm::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
