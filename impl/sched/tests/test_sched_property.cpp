// Property tests over 10,000 seeded random inputs (tests/test_inputs.h: N from 1 to 1024, powers of
// two and not, min_cp, VPP groups 2/4/8, log-normal / bimodal / tied / uniform lengths from 1 to
// N*M): each port returns a plan that plan::validate accepts, or a dcp::InputError (only the
// impossible VPP count can cause one for these inputs, which all fit the pool); two runs give the
// same plan. Under AddressSanitizer each suite runs its first tenth (core/sanitizer.h: ~10x slower
// there; the normal build runs all 10,000). Every loop in the ports is bounded, so a hang would show up as a test timeout.
#include "core/error.h"
#include "core/sanitizer.h"
#include "plan/validate.h"
#include "sched/megatron_dev.h"
#include "sched/megatron_pr2000.h"
#include "sched/nvidia_prototype.h"
#include "sched/planners.h"
#include "test_inputs.h"

#include <gtest/gtest.h>

namespace dcp::sched {
namespace {

using PlanFn = plan::Plan (*)(const plan::Batch&, const plan::PlanConfig&);

bool same_plan(const plan::Plan& a, const plan::Plan& b) {
  if (a.microbatches.size() != b.microbatches.size()) return false;
  for (size_t m = 0; m < a.microbatches.size(); ++m) {
    const auto& ga = a.microbatches[m].groups;
    const auto& gb = b.microbatches[m].groups;
    if (ga.size() != gb.size()) return false;
    for (size_t g = 0; g < ga.size(); ++g) {
      if (ga[g].first_rank != gb[g].first_rank || ga[g].cp_size != gb[g].cp_size || ga[g].samples != gb[g].samples)
        return false;
    }
  }
  return true;
}

void check_property(const std::string& name, PlanFn fn, int all_cases) {
  const int cases = sanitized_cases(all_cases);
  int planned = 0, vpp_errors = 0, with_vpp = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(cases); ++seed) {
    const testing_inputs::Case c = testing_inputs::random_case(seed, /*max_n=*/1024, /*max_g=*/300);
    if (c.config.vpp_group) ++with_vpp;
    try {
      const plan::Plan p = fn(c.batch, c.config);
      const auto violation = plan::find_violation(p, c.batch);
      ASSERT_FALSE(violation.has_value()) << name << " seed " << seed << ": " << *violation << "\n"
                                          << testing_inputs::describe(c);
      const plan::Plan again = fn(c.batch, c.config);
      ASSERT_TRUE(same_plan(p, again))
          << name << " seed " << seed << " not deterministic\n" << testing_inputs::describe(c);
      ++planned;
    } catch (const InputError& e) {
      const std::string what = e.what();
      ASSERT_TRUE(c.config.vpp_group.has_value() && what.find("vpp_group") != std::string::npos)
          << name << " seed " << seed << ": unexpected InputError: " << what << "\n" << testing_inputs::describe(c);
      ++vpp_errors;
    }
  }
  EXPECT_EQ(planned + vpp_errors, cases);
  // The impossible-alignment error must stay the exception, not the rule, among VPP cases.
  EXPECT_LT(vpp_errors, with_vpp / 2) << name;
}

TEST(SchedProperty, Pr2000ValidOrInputError) { check_property("megatron-pr2000", megatron_pr2000_plan, 10000); }

TEST(SchedProperty, DevValidOrInputError) { check_property("megatron-dev", megatron_dev_plan, 10000); }

TEST(SchedProperty, NvidiaPrototypeValidOrInputError) {
  // Built-in cost (no options: pp = 1) and with pp = 4 (m * 4 micro-batches per slot).
  check_property("nvidia-prototype", +[](const plan::Batch& b, const plan::PlanConfig& c) {
    return nvidia_prototype_plan(b, c);
  }, 10000);
  check_property("nvidia-prototype pp4", +[](const plan::Batch& b, const plan::PlanConfig& c) {
    plan::PlannerOptions o;
    o.pp = 4;
    return nvidia_prototype_plan(b, c, o);
  }, 2000);
}

TEST(SchedProperty, RegistryNamesBothPorts) {
  plan::PlannerRegistry registry;
  register_sched_planners(registry);
  ASSERT_TRUE(registry.contains("megatron-pr2000"));
  ASSERT_TRUE(registry.contains("megatron-dev"));
  const auto planner = registry.make("megatron-dev");
  EXPECT_EQ(planner->name(), "megatron-dev");
  EXPECT_TRUE(planner->dynamic());
  const testing_inputs::Case c = testing_inputs::random_case(42, 64, 100);
  plan::PlanConfig cfg = c.config;
  cfg.vpp_group.reset();
  EXPECT_EQ(plan::rank_lists_of(planner->plan(c.batch, cfg)), plan::rank_lists_of(megatron_dev_plan(c.batch, cfg)));
  EXPECT_EQ(registry.make("megatron-pr2000")->plan(c.batch, cfg).planner, "megatron-pr2000");
}

}  // namespace
}  // namespace dcp::sched
