// The fast ports against the slow literal translations of tests/megatron_ref.h on thousands of
// seeded random inputs (a tenth under AddressSanitizer, core/sanitizer.h): identical micro-batches, groups and pack order (before VPP alignment,
// which both share). Power-of-two and other pools, min_cp, log-normal / bimodal / tied lengths.
// (The literal translations were themselves compared with Megatron's Python functions, outside
// this repository, on ~9,000 random inputs: identical wherever Megatron returns a valid plan.)
#include "core/rng.h"
#include "core/sanitizer.h"
#include "megatron_ref.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"
#include "test_inputs.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

std::vector<std::vector<plan::Group>> groups_of(const plan::Plan& p) {
  std::vector<std::vector<plan::Group>> out;
  for (const auto& mb : p.microbatches) out.push_back(mb.groups);
  return out;
}

void expect_same(const std::vector<std::vector<plan::Group>>& fast, const std::vector<std::vector<plan::Group>>& slow,
                 const std::string& what) {
  ASSERT_EQ(fast.size(), slow.size()) << what;
  for (size_t m = 0; m < fast.size(); ++m) {
    ASSERT_EQ(fast[m].size(), slow[m].size()) << what << " micro-batch " << m;
    for (size_t g = 0; g < fast[m].size(); ++g) {
      EXPECT_EQ(fast[m][g].first_rank, slow[m][g].first_rank) << what << " mb " << m << " group " << g;
      EXPECT_EQ(fast[m][g].cp_size, slow[m][g].cp_size) << what << " mb " << m << " group " << g;
      ASSERT_EQ(fast[m][g].samples, slow[m][g].samples) << what << " mb " << m << " group " << g;
    }
  }
}

TEST(MegatronExactness, FastPortsMatchLiteralReference) {
  int compared = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(sanitized_cases(3000)); ++seed) {
    testing_inputs::Case c = testing_inputs::random_case(seed, /*max_n=*/64, /*max_g=*/120);
    c.config.vpp_group.reset();
    const int n = c.config.pool();
    const std::string what = testing_inputs::describe(c);
    expect_same(groups_of(megatron_dev_plan(c.batch, c.config)),
                ref::dev(c.batch, n, c.config.max_seqlen_per_rank, c.config.min_cp), "dev " + what);
    expect_same(groups_of(megatron_pr2000_plan(c.batch, c.config)),
                ref::pr2000(c.batch, n, c.config.max_seqlen_per_rank, c.config.min_cp), "pr2000 " + what);
    if (HasFatalFailure()) return;
    ++compared;
  }
  EXPECT_EQ(compared, sanitized_cases(3000));
}

}  // namespace
}  // namespace dcp::sched
