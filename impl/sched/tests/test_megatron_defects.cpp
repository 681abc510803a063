// One test per defect of reference §7 that touches the scheduler: where Megatron crashes, hangs or
// returns an invalid plan, both ports return a plan that plan::validate accepts, or a clear
// dcp::InputError. Reproducer inputs are the ones quoted in the reference, read from their one
// home, the conformance cases (scenarios/conformance/s7*.json; conformance_files.h).
#include "conformance_files.h"
#include "core/error.h"
#include "plan/geometry.h"
#include "plan/validate.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"
#include "sched/vpp_align.h"

#include <gtest/gtest.h>

#include <functional>

namespace dcp::sched {
namespace {

using PlanFn = std::function<plan::Plan(const plan::Batch&, const plan::PlanConfig&)>;
const std::vector<std::pair<std::string, PlanFn>> kPorts{{"pr2000", megatron_pr2000_plan},
                                                         {"dev", megatron_dev_plan}};

void expect_input_error(const PlanFn& fn, const plan::Batch& b, const plan::PlanConfig& c, const std::string& text) {
  try {
    fn(b, c);
    ADD_FAILURE() << "expected InputError containing '" << text << "'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// (a) fill_empty reads sample_id_group[-1] before testing i >= 0. The port tests the bound first;
// the all-runs-equal branch that walks to i = -1 still doubles the run exactly as Megatron does.
TEST(MegatronDefects, A_FillEmptyBoundTestedFirst) {
  const std::vector<int64_t> lengths{100, 100};
  const auto out = align_sample_id_groups({{{0}, {0}, {1}, {1}}}, 2, AlignContext{4, 1, 100, &lengths});
  EXPECT_EQ(out, (plan::RankLists{{{1}, {1}, {1}, {1}}, {{0}, {0}, {0}, {0}}}));
}

// (b) N=10 (dp=5, cp=2), M=100, [400, 400]: PR2000 builds [0..3] and [4..7] and its expansion writes
// past rank 9 (IndexError); DEV d48bd6be0a too. Both ports: both samples on the whole pool.
TEST(MegatronDefects, B_FillEmptyGpusPastPoolEnd) {
  const auto c = testing_cases::load("s7b-fill-past-pool-end-n10");
  const plan::Batch& b = c.batch;
  for (const auto& [name, fn] : kPorts) {
    const auto p = fn(b, c.config);
    EXPECT_FALSE(plan::find_violation(p, b).has_value()) << name;
    EXPECT_EQ(plan::rank_lists_of(p), (plan::RankLists{std::vector<std::vector<int>>(10, {0, 1})})) << name;
  }
}

// (c) PR2000's fill aliases one list over the expanded ranks and counts only the first sample's
// work. The ports keep one sample list per group; an expanded group lists every sample on every
// rank (this test checks megatron-dev's plan only).
TEST(MegatronDefects, C_ExpandedGroupKeepsAllSamples) {
  const auto c = testing_cases::load("s7c-expanded-group-keeps-all-samples");
  const auto p = megatron_dev_plan(c.batch, c.config);
  ASSERT_EQ(p.microbatches.size(), 1u);
  const auto& g = p.microbatches[0].groups;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[1].first_rank, 2);
  EXPECT_EQ(g[1].cp_size, 2);
  EXPECT_EQ(g[1].samples, (std::vector<int>{1, 2}));
}

// (d) A sample needing more than N ranks (N=8, M=100, L=1000 needs 16): PR2000 fails with a truncated
// assertion message. Both ports: InputError naming the sample, its length and the largest that fits.
TEST(MegatronDefects, D_SampleNeedsMoreThanPool) {
  const auto c = testing_cases::load("s7d-sample-needs-more-than-pool");
  for (const auto& [name, fn] : kPorts) {
    SCOPED_TRACE(name);
    expect_input_error(fn, c.batch, c.config, "sample 0 has length 1000 which needs CP size 16");
    expect_input_error(fn, c.batch, c.config, "largest length that fits: 800");
  }
}

// (f) N=6 (dp=3, cp=2), M=100, [400,100,100], VPP group 2: Megatron's alignment loops forever.
TEST(MegatronDefects, F_VppAlignmentHangNonPowerOfTwo) {
  const auto c = testing_cases::load("s7f-vpp-hang-n6");
  const plan::Batch& b = c.batch;
  for (const auto& [name, fn] : kPorts) {
    const auto p = fn(b, c.config);
    EXPECT_FALSE(plan::find_violation(p, b).has_value()) << name;
    EXPECT_EQ(p.microbatches.size(), 2u) << name;
  }
}

// (g) N=8, M=100, [800, 790, 780], VPP group 2: three single-sample micro-batches that cannot be
// split (AssertionError in Megatron): a clear InputError.
TEST(MegatronDefects, G_VppAlignmentImpossible) {
  const auto c = testing_cases::load("s7g-vpp-impossible");
  for (const auto& [name, fn] : kPorts) {
    SCOPED_TRACE(name);
    expect_input_error(fn, c.batch, c.config, "cannot make the micro-batch count a multiple of vpp_group 2");
  }
}

// (i) A zero-length sample: math.log2(0) raises in Megatron. Both ports: InputError naming it.
TEST(MegatronDefects, I_ZeroLengthSample) {
  const auto c = testing_cases::load("s7i-zero-length-sample");
  for (const auto& [name, fn] : kPorts) {
    SCOPED_TRACE(name);
    expect_input_error(fn, c.batch, c.config, "sample 1 has length 0");
  }
}

// Not a §7 defect: Megatron keeps sample lengths in int32, so both ports refuse one of 2^31 tokens
// (within the harness's 2^40 limit, which dcp and the static planners take) naming the limit.
TEST(MegatronDefects, LengthBeyondInt32IsRefusedNamingTheLimit) {
  const plan::Batch b{{100, int64_t{1} << 31}};
  plan::PlanConfig c;
  c.dp = 1;
  c.cp = 1;
  c.max_seqlen_per_rank = int64_t{1} << 40;
  for (const auto& [name, fn] : kPorts) {
    SCOPED_TRACE(name);
    expect_input_error(fn, b, c, "sample 1 has length 2147483648, above 2147483647, the limit of the Megatron ports");
  }
  const plan::Batch ok{{100, (int64_t{1} << 31) - 1}};
  for (const auto& [name, fn] : kPorts) EXPECT_NO_THROW(plan::validate(fn(ok, c), ok, c)) << name;
}

// (j) Non-power-of-two N: Megatron can pick a size that is not created (4 in N=6, 8 in N=12).
// Every group of both ports has a size that exists in the pool (plan/geometry.h).
TEST(MegatronDefects, J_NonPowerOfTwoPoolUsesExistingSizes) {
  for (int n : {6, 12, 10, 14}) {
    const auto c = testing_cases::load("s7j-missing-group-size-n" + std::to_string(n));
    const plan::Batch& b = c.batch;
    for (const auto& [name, fn] : kPorts) {
      const auto p = fn(b, c.config);
      EXPECT_FALSE(plan::find_violation(p, b).has_value()) << name << " N=" << n;
      for (const auto& mb : p.microbatches)
        for (const auto& g : mb.groups) EXPECT_TRUE(plan::group_size_exists(n, g.cp_size)) << name << " N=" << n;
    }
  }
}

// (k) An empty rank crashes Megatron's runtime (ids[0]). Paths where Megatron's fill fails (N=10,
// N=14) still give micro-batches whose groups cover every rank with samples.
TEST(MegatronDefects, K_NoEmptyRanks) {
  for (const char* file : {"s7b-fill-past-pool-end-n10", "s7k-empty-rank-n14", "s7b-fill-past-pool-end-n10-three"}) {
    const auto c = testing_cases::load(file);
    const int n = c.config.pool();
    for (const auto& [name, fn] : kPorts) {
      for (const auto& ranks : plan::rank_lists_of(fn(c.batch, c.config))) {
        for (const auto& r : ranks) EXPECT_FALSE(r.empty()) << name << " N=" << n;
      }
    }
  }
}

// (l) Megatron only checks that the set of scheduled ids has size G. The ports' plans pass the full
// validate(): each sample in exactly one aligned block, also after VPP splits duplicate ids over
// expanded blocks.
TEST(MegatronDefects, L_EverySampleExactlyOnceAfterVpp) {
  const auto c = testing_cases::load("s7h-vpp-changes-cp-degree");
  const plan::Batch& b = c.batch;
  for (const auto& [name, fn] : kPorts) {
    const auto p = fn(b, c.config);
    EXPECT_FALSE(plan::find_violation(p, b).has_value()) << name;
    EXPECT_EQ(p.microbatches.size() % 4, 0u) << name;
    std::vector<int> count(b.lengths.size(), 0);
    for (const auto& mb : p.microbatches)
      for (const auto& g : mb.groups)
        for (int s : g.samples) ++count[s];
    EXPECT_EQ(count, std::vector<int>(b.lengths.size(), 1)) << name;
  }
}

// (m) PR2000's candidate scan ignores capacity, which closes a micro-batch early: reproduced as is
// (it only costs an extra micro-batch, the plan is valid).
TEST(MegatronDefects, M_ScanIgnoresCapacityKeptAsIs) {
  const auto c = testing_cases::load("s7m-scan-ignores-capacity");
  const plan::Batch& b = c.batch;
  const auto p = megatron_pr2000_plan(b, c.config);
  EXPECT_EQ(p.microbatches.size(), 2u);
  EXPECT_FALSE(plan::find_violation(p, b).has_value());
}

// (n) min_cp that is not a power of two (Megatron accepts 3 and then asks for groups of size 3).
TEST(MegatronDefects, N_NonPowerOfTwoMinCp) {
  const auto c = testing_cases::load("s7n-min-cp-not-power-of-two");
  for (const auto& [name, fn] : kPorts) {
    SCOPED_TRACE(name);
    expect_input_error(fn, c.batch, c.config, "--min-cp 3 is not a power of two");
  }
}

// (p) Ties and determinism: equal lengths keep global-id order, and two runs are identical.
TEST(MegatronDefects, P_TiesAndDeterminism) {
  const auto c = testing_cases::load("s7p-ties-keep-id-order");
  for (const auto& [name, fn] : kPorts) {
    const auto p1 = fn(c.batch, c.config);
    const auto p2 = fn(c.batch, c.config);
    EXPECT_EQ(plan::rank_lists_of(p1), plan::rank_lists_of(p2)) << name;
  }
  // PR2000, N=4, M=100: one bucket of 9s then 7s with the last 7 alone; ids in ascending order.
  const auto t = testing_cases::load("s7p-ties-n4");
  EXPECT_EQ(plan::rank_lists_of(megatron_pr2000_plan(t.batch, t.config)),
            (plan::RankLists{{{1}, {3}, {0}, {2}}}));
}

}  // namespace
}  // namespace dcp::sched
