// Both Megatron ports against every case of scenarios/conformance/ (the same judge as
// `dcpbench conform`): the exact cases reproduce the plan of the port's own Megatron version, the
// others get a valid plan or a clear InputError as each case requires.
#include "conformance_files.h"
#include "core/error.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

using plan::conformance::Outcome;

Outcome run_port(plan::Plan (*fn)(const plan::Batch&, const plan::PlanConfig&), const plan::conformance::Case& c) {
  Outcome o;
  try {
    o.plan = fn(c.batch, c.config);
    o.kind = Outcome::kPlan;
  } catch (const InputError& e) {
    o.kind = Outcome::kError;
    o.message = e.what();
  }
  return o;
}

TEST(ConformanceCases, BothPortsPassEveryCase) {
  const auto cases = plan::conformance::read_cases(testing_cases::conformance_dir());
  ASSERT_GE(cases.size(), 400u);
  int exact_dev = 0, exact_pr2000 = 0;
  for (const auto& c : cases) {
    const auto dev = plan::conformance::judge(c, run_port(&megatron_dev_plan, c), "megatron-dev");
    EXPECT_TRUE(dev.pass) << c.name << " (megatron-dev): " << dev.reason;
    const auto pr = plan::conformance::judge(c, run_port(&megatron_pr2000_plan, c), "megatron-pr2000");
    EXPECT_TRUE(pr.pass) << c.name << " (megatron-pr2000): " << pr.reason;
    exact_dev += c.plans.count("megatron-dev") ? 1 : 0;
    exact_pr2000 += c.plans.count("megatron-pr2000") ? 1 : 0;
  }
  // Most cases hold Megatron's plan for each version (the rest are §7 defects and pools where
  // Megatron fails): the suite is mostly an exactness check, not only a validity check.
  EXPECT_GE(exact_dev, 300);
  EXPECT_GE(exact_pr2000, 300);
}

// The judge catches a wrong plan: one sample moved to another micro-batch of an exact case.
TEST(ConformanceCases, JudgeNamesTheFirstDifferingMicroBatch) {
  const auto c = testing_cases::load("s8-dev-larger-cp-for-short-sequences");
  Outcome o;
  o.kind = Outcome::kPlan;
  o.lists = plan::RankLists{{{0}, {0}}, {{1}, {1}}};  // valid, but PR2000's plan, not DEV's
  const auto v = plan::conformance::judge(c, o, "megatron-dev");
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.reason.find("micro-batch 0 differs from megatron-dev's: rank 0 holds [0], megatron-dev puts [0, 1]"),
            std::string::npos)
      << v.reason;
  EXPECT_TRUE(plan::conformance::judge(c, o, "megatron-pr2000").pass);
  EXPECT_TRUE(plan::conformance::judge(c, o, "").pass);  // validity only
  o.lists = plan::RankLists{{{0}, {1}}, {{1}, {1}}};     // sample 1 on two runs
  const auto w = plan::conformance::judge(c, o, "");
  EXPECT_FALSE(w.pass);
  EXPECT_NE(w.reason.find("invalid plan"), std::string::npos) << w.reason;
}

}  // namespace
}  // namespace dcp::sched
