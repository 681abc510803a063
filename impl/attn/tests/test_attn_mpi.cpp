// Ring and all-gather CP attention over the MPI backend, run under `mpirun -np 4` (label mpi):
// each rank builds its shard from (seed, global index), computes the float64 reference of the
// whole batch itself, and compares its own rows. Also uses the group registry: every group size
// of the 4-rank pool (1, 2, 4) runs the same batch, as Dynamic-CP switches groups per
// micro-batch.
#include <gtest/gtest.h>

#include "attn/compare.h"
#include "attn/cp_attn.h"
#include "attn/tolerances.h"
#include "attn_test_util.h"
#include "comm/group_registry.h"
#include "comm/mpi_comm.h"

namespace dcp::attn {
namespace {

using namespace dcp::attn::testing;

template <typename T>
void check_rows(const std::vector<double>& ref, const std::vector<T>& got,
                const std::vector<int64_t>& rows, int64_t row, const std::string& what) {
  std::vector<double> ref_local(rows.size() * row);
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e = 0; e < row; ++e) ref_local[t * row + e] = ref[rows[t] * row + e];
  const auto cmp = compare_to_ref<T>(ref_local, got);
  EXPECT_TRUE(cmp.within(tolerance_for<T>().rel_to_max)) << cmp.report(what);
}

template <typename T>
void run_all_groups(CpAlgo algo) {
  comm::CommOptions opt;
  opt.deadline = std::chrono::seconds(60);
  auto world = comm::mpi_communicator(MPI_COMM_WORLD, opt);
  comm::GroupRegistry reg(*world);
  for (int cp : reg.sizes()) {
    comm::Communicator& g = reg.group(cp);
    for (int ci : {1, 4, 6}) {
      const auto c = varlen_cases(cp)[ci];
      const ThdBatch b = case_batch(c, cp);
      const AttnShape s = case_shape(c);
      const RefResult ref = reference<T>(b, s, 99);
      const int r = g.rank();
      const auto q = local_tensor<T>(99, kQ, b, cp, r, s.q_row());
      const auto k = local_tensor<T>(99, kK, b, cp, r, s.kv_row());
      const auto v = local_tensor<T>(99, kV, b, cp, r, s.kv_row());
      const auto dout = local_tensor<T>(99, kDout, b, cp, r, s.q_row());
      std::vector<T> out(q.size()), lse(q.size() / s.head_dim), dq(q.size()), dk(k.size()),
          dv(v.size());
      cp_attn_fwd_fn<T>(algo)(g, b, s, q, k, v, out, lse);
      cp_attn_bwd_fn<T>(algo)(g, b, s, q, k, v, out, lse, dout, dq, dk, dv);
      const auto rows = zigzag_rows(b, cp, r);
      const std::string where = std::string(cp_algo_name(algo)) + " cp=" + std::to_string(cp) +
                                " rank " + std::to_string(world->rank()) + " case " + c.what;
      check_rows(ref.out, out, rows, s.q_row(), where + " out");
      check_rows(ref.lse, lse, rows, s.heads, where + " lse");
      check_rows(ref.dq, dq, rows, s.q_row(), where + " dq");
      check_rows(ref.dk, dk, rows, s.kv_row(), where + " dk");
      check_rows(ref.dv, dv, rows, s.kv_row(), where + " dv");
    }
  }
}

TEST(MpiCpAttn, RingF64AllGroupSizes) { run_all_groups<double>(CpAlgo::ring); }
TEST(MpiCpAttn, RingF32AllGroupSizes) { run_all_groups<float>(CpAlgo::ring); }
TEST(MpiCpAttn, AllGatherF64AllGroupSizes) { run_all_groups<double>(CpAlgo::all_gather); }

}  // namespace
}  // namespace dcp::attn

int main(int argc, char** argv) {
  dcp::comm::MpiRuntime mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
