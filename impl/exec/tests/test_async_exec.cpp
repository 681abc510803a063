// Async planning with the real planners and the executor (plan/async_planner.h,
// exec/planned_training.h): for every registered planner, the plans handed out one step ahead
// equal the plans of calling the planner synchronously, on seeded batches of awkward sizes, and a
// batch that cannot be planned fails at its own step with the planner's own message; training on
// 8 thread ranks with plans made one step ahead gives bitwise the losses and gradients of
// planning each step synchronously, and a planning error stops training exactly at its step.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <nlohmann/json.hpp>

#include "baselines/planners.h"
#include "comm/thread_comm.h"
#include "core/error.h"
#include "core/rng.h"
#include "exec/planned_training.h"
#include "exec/tests/exec_fixtures.h"
#include "plan/async_planner.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "sched/planners.h"

namespace dcp::exec {
namespace {

using testing::all_planners;
using testing::tiny_model;
using testing::token_batches;


// Pool of 8 ranks (dp 2 x cp 4), M = 64 tokens per rank: a sample fits up to 512 tokens.
plan::PlanConfig pool_config() {
  plan::PlanConfig c;
  c.dp = 2;
  c.cp = 4;
  c.max_seqlen_per_rank = 64;
  c.max_seqlen = 512;
  return c;
}

// Seeded global batches of awkward sizes (1, 2, 7, 16, 33, 64 samples; lengths 1..500, with
// lengths 1, 63, 64, 65 and 512 forced in), and at `bad_step` one sample of 600 tokens, more than
// the pool's 8 x 64.
std::vector<plan::Batch> seeded_batches(uint64_t seed, int bad_step) {
  const int sizes[] = {1, 2, 7, 16, 33, 64};
  std::vector<plan::Batch> out;
  Rng rng(seed);
  for (int step = 0; step < 6; ++step) {
    plan::Batch b;
    for (int i = 0; i < sizes[step]; ++i) b.lengths.push_back(rng.uniform_int(1, 500));
    const int64_t forced[] = {1, 63, 64, 65, 512};
    for (int i = 0; i < sizes[step] && i < 5; ++i) b.lengths[static_cast<size_t>(i)] = forced[(i + step) % 5];
    if (step == bad_step) b.lengths.back() = 600;
    out.push_back(std::move(b));
  }
  return out;
}

// The global batch padded so it divides dp = 2, for the static planners (packing and bshd require
// it); the dynamic ones plan the awkward sizes as they are.
plan::Batch even(plan::Batch b) {
  if (b.size() % 2) b.lengths.push_back(5);
  return b;
}

TEST(AsyncPlanning, EveryRegisteredPlannerGivesTheSynchronousPlansInOrder) {
  const plan::PlannerRegistry& reg = all_planners();
  ASSERT_GE(reg.names().size(), 5u);
  for (const std::string& name : reg.names()) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      const int bad_step = static_cast<int>(seed) + 1;  // 2, 3, 4
      std::vector<plan::Batch> batches = seeded_batches(seed, bad_step);
      const auto planner = reg.make(name);
      if (!planner->dynamic())
        for (auto& b : batches) b = even(std::move(b));
      // The synchronous path: the planner called in order, in this thread.
      std::vector<std::optional<plan::Plan>> want;
      std::vector<std::string> want_error;
      for (const auto& b : batches) {
        try {
          want.push_back(planner->plan(b, pool_config()));
          want_error.emplace_back();
        } catch (const InputError& e) {
          want.push_back(std::nullopt);
          want_error.emplace_back(e.what());
        }
      }
      ASSERT_FALSE(want[static_cast<size_t>(bad_step)].has_value()) << "the 600-token sample must not fit";
      // A dynamic planner plans every other step, odd batch sizes (1, 7, 33 samples) included, so
      // the async path is compared on plans, not only on refusals (the static ones refuse the
      // 512-token samples too: static CP 4 holds 256).
      if (planner->dynamic()) {
        for (size_t i = 0; i < batches.size(); ++i) {
          if (static_cast<int>(i) != bad_step) {
            EXPECT_TRUE(want[i].has_value()) << "step " << i << ": " << want_error[i];
          }
        }
      }
      plan::AsyncPlanner ap(*planner, pool_config(), [&](int64_t step) -> std::optional<plan::Batch> {
        if (step >= static_cast<int64_t>(batches.size())) return std::nullopt;
        return batches[static_cast<size_t>(step)];
      });
      for (size_t i = 0; i < batches.size(); ++i) {
        if (!want[i]) {
          try {
            ap.next();
            ADD_FAILURE() << "step " << i << " should have thrown";
          } catch (const InputError& e) {
            EXPECT_EQ(std::string(e.what()), want_error[i]) << "step " << i;
          }
          continue;
        }
        const std::optional<plan::PlannedStep> got = ap.next();
        ASSERT_TRUE(got.has_value()) << "step " << i;
        EXPECT_EQ(got->step, static_cast<int64_t>(i));
        EXPECT_EQ(got->batch.lengths, batches[i].lengths);
        EXPECT_EQ(plan::plan_to_json(got->plan, batches[i], {}).dump(),
                  plan::plan_to_json(*want[i], batches[i], {}).dump())
            << "step " << i;
      }
      EXPECT_FALSE(ap.next().has_value());
    }
  }
}



struct Trained {
  std::vector<double> losses, mtp_losses;
  std::vector<std::vector<double>> grads;
  int64_t steps = 0;
  std::optional<PlanFailure> failure;
  std::set<int> cp_sizes;  // group sizes of the plans trained
};

// Trains every batch on 8 thread ranks, planning with `planner` either one step ahead
// (AsyncPlanner + train_planned) or synchronously before each step; rank 0's record.
Trained train_all(const std::string& planner_name, const std::vector<GlobalBatch>& batches, bool async) {
  plan::PlanConfig pc;
  pc.dp = 2;
  pc.cp = 4;
  pc.max_seqlen_per_rank = 16;
  pc.max_seqlen = 128;
  Trained out;
  comm::run_threads(8, [&](comm::Communicator& world) {
    const auto planner = all_planners().make(planner_name);
    comm::GroupRegistry reg(world);
    auto k = model::make_cpu_kernels<double>();
    model::Model<double> m(tiny_model(), *k);
    model::AdamWHyper h;
    h.lr = 1e-2;
    Executor<double> ex(m, world, reg, h);
    Trained t;
    auto keep = [&](const plan::Plan& p, const StepStats& st) {
      for (const auto& mb : p.microbatches)
        for (const auto& g : mb.groups) t.cp_sizes.insert(g.cp_size);
      t.losses.push_back(st.loss);
      t.mtp_losses.push_back(st.mtp_loss);
      t.grads.emplace_back(ex.last_grads().begin(), ex.last_grads().end());
    };
    if (async) {
      plan::AsyncPlanner ap(*planner, pc, [&](int64_t i) -> std::optional<plan::Batch> {
        if (i >= static_cast<int64_t>(batches.size())) return std::nullopt;
        return batches[static_cast<size_t>(i)].lengths();
      });
      const PlannedRun run = train_planned<double>(
          ex, ap, [&](int64_t i) -> const GlobalBatch& { return batches[static_cast<size_t>(i)]; },
          [&](const plan::PlannedStep& ps, const StepStats& st) { keep(ps.plan, st); });
      t.steps = run.steps_trained;
      t.failure = run.failure;
    } else {
      for (const auto& b : batches) {
        plan::Plan p;
        try {
          p = planner->plan(b.lengths(), pc);
        } catch (const Error& e) {
          t.failure = PlanFailure{t.steps, e.what()};
          break;
        }
        keep(p, ex.step(p, b));
        ++t.steps;
      }
    }
    if (world.rank() == 0) out = std::move(t);
  });
  return out;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

TEST(AsyncPlanning, TrainingWithPlansMadeOneStepAheadIsBitwiseTheSynchronousTraining) {
  // Four different global batches (8 samples each, so dp = 2 divides them); M = 16 tokens per
  // rank, so dynamic CP sizes 1..4 appear (64 tokens: the most static CP 4 holds).
  const auto batches = token_batches({{61, 3, 17, 1, 40, 9, 9, 25},
                                      {2, 33, 12, 5, 48, 7, 20, 14},
                                      {64, 1, 1, 2, 3, 5, 8, 13},
                                      {16, 16, 17, 15, 31, 33, 64, 63}},
                                     11);
  for (const char* name : {"dcp", "megatron-dev", "packing"}) {
    SCOPED_TRACE(name);
    const Trained a = train_all(name, batches, true), s = train_all(name, batches, false);
    ASSERT_FALSE(a.failure.has_value()) << a.failure->message;
    ASSERT_FALSE(s.failure.has_value()) << s.failure->message;
    ASSERT_EQ(a.steps, 4);
    ASSERT_EQ(s.steps, 4);
    EXPECT_TRUE(bitwise_equal(a.losses, s.losses));
    EXPECT_TRUE(bitwise_equal(a.mtp_losses, s.mtp_losses));
    for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(bitwise_equal(a.grads[i], s.grads[i])) << "step " << i;
    EXPECT_LT(a.losses[3], a.losses[0]);  // it trains
    EXPECT_EQ(a.cp_sizes, s.cp_sizes);
    if (std::string(name) == "packing") {
      EXPECT_EQ(a.cp_sizes, std::set<int>{4});
    } else {  // dynamic: more than one group size, CP across ranks among them
      EXPECT_GE(a.cp_sizes.size(), 2u);
      EXPECT_GT(*a.cp_sizes.rbegin(), 1);
    }
  }
}

TEST(AsyncPlanning, APlanningErrorStopsTrainingAtItsStep) {
  // Step 2 holds a 200-token sample, more than the pool's 8 x 16 tokens.
  const auto batches = token_batches({{30, 5, 12, 19}, {2, 8, 40, 11}, {200, 3, 4, 5}, {6, 7, 8, 9}}, 12);
  const Trained a = train_all("dcp", batches, true), s = train_all("dcp", batches, false);
  ASSERT_TRUE(a.failure.has_value());
  ASSERT_TRUE(s.failure.has_value());
  EXPECT_EQ(a.failure->step, 2);
  EXPECT_EQ(a.steps, 2);  // steps 0 and 1 trained, step 3 not
  EXPECT_EQ(a.failure->message, s.failure->message);
  EXPECT_NE(a.failure->message.find("200"), std::string::npos) << a.failure->message;
  EXPECT_TRUE(bitwise_equal(a.losses, s.losses));
}

}  // namespace
}  // namespace dcp::exec
