// See conformance_specs.h. Hand cases quote their inputs from the reference (§7 entries, §8 unit
// tests of Megatron-LM tests/unit_tests/test_sequence_packing.py at DEV d48bd6be0a); generated
// families draw seeded inputs (core/rng.h, so the files are reproducible bit for bit).
#include "conformance_specs.h"

#include "core/rng.h"
#include "plan/cp_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dcp::sched::conformance_gen {
namespace {

using plan::conformance::Must;

const char* const kRef = "reference/megatron-dynamic-cp.md";

plan::PlanConfig cfg(int dp, int cp, int64_t m, int min_cp = 1, int vpp = 0) {
  plan::PlanConfig c;
  c.dp = dp;
  c.cp = cp;
  c.max_seqlen_per_rank = m;
  c.min_cp = min_cp;
  if (vpp > 0) c.vpp_group = vpp;
  return c;
}

Spec hand(std::string name, std::string description, std::string origin, std::vector<std::string> tags,
          std::vector<int64_t> lengths, plan::PlanConfig config) {
  Spec s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.origin = std::move(origin);
  s.tags = std::move(tags);
  s.batch.lengths = std::move(lengths);
  s.config = config;
  return s;
}

Spec defect(Spec s, Must must, std::string what, std::string megatron, std::string correct) {
  s.must = must;
  s.defect = std::move(what);
  s.megatron = std::move(megatron);
  s.correct = std::move(correct);
  return s;
}

std::string sec7(const char* entry) { return std::string(kRef) + " §7(" + entry + ")"; }

void add_hand_cases(std::vector<Spec>& out) {
  const std::string any_plan = "return a valid plan or a clear one-line error; never crash, hang or return an invalid plan";
  // §7(a): latent; the all-runs-equal branch of fill_empty walks i to -1. Megatron's plan is valid.
  out.push_back(hand("s7a-fill-empty-index-minus-one",
                     "VPP split of [[0],[0],[1],[1]] walks fill_empty's run scan to i = -1, where Megatron reads "
                     "sample_id_group[-1] before testing i >= 0 (latent: the last rank is empty there)",
                     sec7("a") + " (fill_empty condition order)", {"s7", "vpp", "fill-empty"}, {200, 200},
                     cfg(4, 1, 100, 1, 2)));
  out.push_back(defect(hand("s7b-fill-past-pool-end-n10", "N=10 (dp=5, cp=2), M=100, [400, 400]: groups [0..3] and "
                            "[4..7] leave 2 empty ranks; the expansion needs 4",
                            sec7("b") + " trigger", {"s7", "non-pow2", "fill-empty"}, {400, 400}, cfg(5, 2, 100)),
                       Must::kPlanOrError, "§7(b) fill_empty_gpus writes past rank N-1 (vacuous assertion)",
                       "PR2000 and DEV d48bd6be0a: IndexError: list assignment index out of range",
                       any_plan + " (a valid plan exists: both samples on the whole pool of 10 ranks)"));
  out.push_back(defect(hand("s7b-fill-past-pool-end-n10-three", "N=10, M=100, [400, 400, 100]: the same fill failure "
                            "with a sample left for a second micro-batch",
                            sec7("b") + " / §7(k)", {"s7", "non-pow2", "fill-empty"}, {400, 400, 100}, cfg(10, 1, 100)),
                       Must::kPlanOrError, "§7(b) fill_empty_gpus writes past rank N-1; §7(k) an empty rank crashes the runtime",
                       "PR2000 and DEV d48bd6be0a: IndexError in fill_empty_gpus", any_plan));
  // §7(c): aliasing in PR2000's fill; the plan itself is valid: exact.
  out.push_back(hand("s7c-expanded-group-keeps-all-samples",
                     "N=4, M=100, [60, 30, 30]: the group {30, 30} is expanded by fill_empty_gpus (PR2000 aliases "
                     "one list over the expanded ranks and counts only the first sample's work)",
                     sec7("c"), {"s7", "fill-empty"}, {60, 30, 30}, cfg(4, 1, 100)));
  out.push_back(defect(hand("s7d-sample-needs-more-than-pool", "N=8, M=100, L=1000 needs CP 16", sec7("d") + " trigger",
                            {"s7", "error"}, {1000}, cfg(8, 1, 100)),
                       Must::kError, "§7(d) a sample needs more ranks than the pool",
                       "PR2000: AssertionError with a truncated message ('There should be at least one group existing, "
                       "cannot redistribute, '); DEV: AssertionError: Sequence length 1000 requires CP size 16, but "
                       "only 8 DPxCP ranks are available.",
                       "a clear error naming the sample, its length and the largest length that fits (800)"));
  out.push_back(defect(hand("s7d-one-sample-too-long-among-many", "N=4, M=100: one of five samples (L=401) needs CP 8",
                            sec7("d"), {"s7", "error"}, {50, 401, 20, 30, 10}, cfg(2, 2, 100)),
                       Must::kError, "§7(d) a sample needs more ranks than the pool",
                       "PR2000: AssertionError (truncated message) once only that sample is left; DEV: AssertionError "
                       "Sequence length 401 requires CP size 8",
                       "a clear error naming sample 1, its length 401 and the largest length that fits (400)"));
  out.push_back(defect(hand("s7f-vpp-hang-n6", "N=6 (dp=3, cp=2), M=100, [400, 100, 100], VPP group 2: the one "
                            "micro-batch [4-run, 1, 1] splits into a half whose run of 4 exceeds its 2 empty ranks",
                            sec7("f") + " trigger", {"s7", "vpp", "non-pow2"}, {400, 100, 100}, cfg(3, 2, 100, 1, 2)),
                       Must::kPlanOrError, "§7(f) fill_empty_by_expanding_cp loops forever",
                       "PR2000 and DEV: never returns (fill_empty leaves the list unchanged)",
                       any_plan + " (2 micro-batches exist: [400] on 6 ranks, [100, 100])"));
  out.push_back(defect(hand("s7g-vpp-impossible", "N=8, M=100, [800, 790, 780], VPP group 2: three micro-batches of "
                            "one whole-pool sample each; no tail micro-batch can be split",
                            sec7("g") + " trigger", {"s7", "vpp", "error"}, {800, 790, 780}, cfg(8, 1, 100, 1, 2)),
                       Must::kError, "§7(g) VPP alignment impossible",
                       "PR2000 and DEV: AssertionError: align_sample_id_groups: no tail microbatch has enough ids to split",
                       "a clear error: 4 micro-batches would need 4 samples, each needs the whole pool"));
  out.push_back(hand("s7h-vpp-changes-cp-degree", "N=8, M=100, ten samples, VPP group 4: the alignment splits "
                     "micro-batches and re-expands the halves, so samples run with a larger CP than scheduled",
                     sec7("h") + " / §7(l)", {"s7", "vpp", "fill-empty"}, {300, 200, 100, 100, 60, 50, 40, 30, 20, 10},
                     cfg(8, 1, 100, 1, 4)));
  out.push_back(defect(hand("s7i-zero-length-sample", "A zero-length sample among [10, 0, 5], N=2, M=100", sec7("i"),
                            {"s7", "error"}, {10, 0, 5}, cfg(2, 1, 100)),
                       Must::kError, "§7(i) zero-length sample", "PR2000 and DEV: ValueError: math domain error (log2(0))",
                       "a clear error naming sample 1 and its length 0"));
  out.push_back(defect(hand("s7i-negative-length-sample", "A negative length among [10, -5], N=2, M=100", sec7("i"),
                            {"s7", "error"}, {10, -5}, cfg(2, 1, 100)),
                       Must::kError, "§7(i) non-positive length", "PR2000 and DEV: ValueError: math domain error",
                       "a clear error naming sample 1 and its length -5"));
  const std::vector<std::pair<int, std::vector<int64_t>>> j_cases{
      {6, {300, 100, 100}}, {12, {800, 50, 50, 700}}, {10, {400, 200, 100, 100, 30}}, {14, {350, 50}}};
  for (const auto& [n, lengths] : j_cases) {
    char name[64];
    std::snprintf(name, sizeof name, "s7j-missing-group-size-n%d", n);
    out.push_back(hand(name, "Non-power-of-two pool N=" + std::to_string(n) + ", M=100: Megatron may pick a group "
                       "size that is never created (4 in N=6, 8 in N=12)",
                       sec7("j"), {"s7", "non-pow2"}, lengths, cfg(n, 1, 100)));
  }
  out.push_back(hand("s7k-empty-rank-n14", "N=14, M=100, [50, 50]: the fill cannot cover 14 ranks with power-of-two "
                     "growth (Megatron DEV falls back to the whole pool)",
                     sec7("k") + "; Megatron DEV unit test ..._fills_non_power_of_two_dpxcp_group", {"s7", "s8", "non-pow2"},
                     {50, 50}, cfg(7, 2, 100)));
  out.push_back(hand("s7m-scan-ignores-capacity", "PR2000's candidate scan counts a full group as a place: the "
                     "micro-batch closes early (an extra micro-batch, still a valid plan)",
                     sec7("m"), {"s7"}, {90, 80, 60, 10, 10}, cfg(2, 1, 100)));
  out.push_back(defect(hand("s7n-min-cp-not-power-of-two", "min_cp = 3 in a pool of 8", sec7("n"), {"s7", "error"},
                            {10, 20}, cfg(8, 1, 100, 3)),
                       Must::kError, "§7(n) min_cp not a power of two",
                       "accepted; cp_min returns 3 and no group of size 3 exists",
                       "a clear error naming min_cp 3"));
  out.push_back(defect(hand("s7n-min-cp-above-pool", "min_cp = 16 in a pool of 8", sec7("n"), {"s7", "error"}, {10, 20},
                            cfg(4, 2, 100, 16)),
                       Must::kError, "§7(n) min_cp larger than the pool", "rejected by Megatron's argument checks",
                       "a clear error naming min_cp 16"));
  out.push_back(defect(hand("s7-budget-zero", "max_seqlen_per_dp_cp_rank = 0", sec7("i") + " (division by M)",
                            {"s7", "error"}, {10, 20}, cfg(2, 1, 0)),
                       Must::kError, "a non-positive per-rank budget", "ZeroDivisionError in dcp_gpus_needed",
                       "a clear error naming the budget 0"));
  out.push_back(hand("s7o-empty-batch", "An empty global batch gives zero micro-batches", sec7("o"), {"s7"}, {},
                     cfg(2, 2, 100)));
  out.push_back(hand("s7o-empty-batch-vpp", "An empty global batch with a VPP group: zero is a multiple", sec7("o"),
                     {"s7", "vpp"}, {}, cfg(2, 2, 100, 1, 4)));
  out.push_back(hand("s7p-ties-keep-id-order", "Equal lengths keep global-id order (stable sort)", sec7("p"),
                     {"s7", "ties"}, {7, 9, 7, 9, 9, 7, 7, 9}, cfg(2, 2, 100)));
  out.push_back(hand("s7p-ties-n4", "PR2000, N=4: one bucket of 9s then 7s, ids ascending", sec7("p"), {"s7", "ties"},
                     {7, 9, 7, 9}, cfg(4, 1, 100)));
  out.push_back(hand("s7-whole-pool-exactly", "A sample of exactly N*M tokens needs the whole pool", sec7("d") +
                     " (boundary)", {"s7", "whole-pool"}, {800, 5, 3}, cfg(8, 1, 100)));
  out.push_back(defect(hand("s7-whole-pool-plus-one", "A sample of N*M + 1 tokens fits nowhere", sec7("d") +
                            " (boundary)", {"s7", "error", "whole-pool"}, {801}, cfg(8, 1, 100)),
                       Must::kError, "§7(d) one token more than the pool holds",
                       "PR2000: truncated AssertionError; DEV: AssertionError requires CP size 16",
                       "a clear error naming sample 0 and the largest length that fits (800)"));

  // §8: Megatron's own scheduler unit tests (DEV d48bd6be0a).
  Spec u1 = hand("s8-dev-larger-cp-for-short-sequences",
                 "[(0,6144),(1,2048)], N=2, M=4096: one 2-rank group holds both (a larger CP for the short sample)",
                 "Megatron-LM tests/unit_tests/test_sequence_packing.py::test_next_hdp_group_packing_aware_can_use_"
                 "larger_cp_group_for_short_sequences (DEV d48bd6be0a), reference §8",
                 {"s8"}, {6144, 2048}, cfg(2, 1, 4096));
  u1.expected_dev = plan::RankLists{{{0, 1}, {0, 1}}};
  out.push_back(u1);
  Spec u2 = hand("s8-dev-fills-non-power-of-two-pool", "[(0,50),(1,50)], N=14, M=100: all 14 ranks hold [0, 1]",
                 "Megatron-LM tests/unit_tests/test_sequence_packing.py::test_next_hdp_group_packing_aware_fills_non_"
                 "power_of_two_dpxcp_group (DEV d48bd6be0a), reference §8; the plan the test asserts",
                 {"s8", "non-pow2"}, {50, 50}, cfg(14, 1, 100));
  // d48bd6be0a's own fill fails on N=14 (§7b-DEV); the test asserts the whole-pool plan of the later
  // dev source, which the transcription's fallback reproduces (checked by the generator).
  u2.expected_dev = plan::RankLists{std::vector<std::vector<int>>(14, std::vector<int>{0, 1})};
  out.push_back(u2);
  Spec u3 = hand("s8-dev-default-scheduler", "DefaultDynamicCPScheduler(dp=1, cp=2, M=4096) on [6144, 2048]",
                 "Megatron-LM tests/unit_tests/test_sequence_packing.py::test_default_dynamic_cp_scheduler_uses_"
                 "packing_aware_grouping_by_default (DEV d48bd6be0a), reference §8",
                 {"s8"}, {6144, 2048}, cfg(1, 2, 4096));
  u3.expected_dev = plan::RankLists{{{0, 1}, {0, 1}}};
  out.push_back(u3);
  // test_wrap_dataloader's scheduling input: GBS 64, lengths random.Random(42).randint(2048, 8192)
  // padded to 16, M = 8192, VPP group = pp. Python's Mersenne Twister is not reproduced here, so
  // the lengths are drawn from core/rng.h in the same range and padding (the grid's configs).
  struct Grid {
    int dp, cp, vpp;
  };
  for (const Grid g : {Grid{1, 8, 0}, Grid{2, 4, 0}, Grid{4, 2, 0}, Grid{2, 2, 4}}) {
    Rng rng(4242 + g.dp * 10 + g.cp);
    std::vector<int64_t> lengths;
    for (int i = 0; i < 64; ++i) lengths.push_back((rng.uniform_int(2048, 8192) + 15) / 16 * 16);
    char name[96];
    std::snprintf(name, sizeof name, "s8-wrap-dataloader-grid-dp%d-cp%d%s", g.dp, g.cp, g.vpp ? "-vpp4" : "");
    out.push_back(hand(name, "test_wrap_dataloader's shape: 64 samples of 2048..8192 tokens padded to 16, M = 8192",
                       "Megatron-LM tests/unit_tests/test_sequence_packing.py::test_wrap_dataloader grid (reference §8); "
                       "lengths drawn with core/rng.h in its range (Python's random.Random(42) is not reproduced)",
                       {"s8", g.vpp ? "vpp" : "pow2"}, lengths, cfg(g.dp, g.cp, 8192, 1, g.vpp)));
  }
  // The functional test's shape: N = 4, M = 512, log-normal lengths 128..2048 (mean 512, sigma 1.2).
  for (int t = 0; t < 4; ++t) {
    Rng rng(512 + t);
    std::vector<int64_t> lengths;
    for (int i = 0; i < 32; ++i)
      lengths.push_back(std::clamp<int64_t>(static_cast<int64_t>(rng.lognormal(std::log(512.0) - 0.72, 1.2)), 128, 2048));
    char name[64];
    std::snprintf(name, sizeof name, "s8-functional-tp2-cp4-dcp-%d", t);
    out.push_back(hand(name, "gpt3_mcore_te_tp2_pp1_cp4_dcp's shape: N = 4, M = 512, 32 log-normal lengths in 128..2048",
                       "Megatron-LM tests/functional_tests/test_cases/gpt/gpt3_mcore_te_tp2_pp1_cp4_dcp (reference §8); "
                       "lengths drawn with core/rng.h from its distribution",
                       {"s8", "pow2"}, lengths, cfg(1, 4, 512)));
  }
}

// ---------------------------------------------------------------------------------------- families
struct Family {
  const char* name;
  const char* description;
  int count;
};

int pick(Rng& rng, std::initializer_list<int> values) {
  const int i = static_cast<int>(rng.uniform_int(0, static_cast<int64_t>(values.size()) - 1));
  return *(values.begin() + i);
}

plan::PlanConfig pool_config(Rng& rng, int n, int64_t m) {
  plan::PlanConfig c;
  c.cp = 1;
  for (int d : {8, 4, 2})
    if (n % d == 0 && rng.uniform() < 0.5) {
      c.cp = d;
      break;
    }
  c.dp = n / c.cp;
  c.max_seqlen_per_rank = m;
  return c;
}

std::vector<int64_t> lognormal_lengths(Rng& rng, int g, int64_t m, int64_t max_len) {
  const double mu = std::log(std::max(1.0, static_cast<double>(m) * rng.uniform(0.05, 1.5)));
  std::vector<int64_t> out;
  for (int i = 0; i < g; ++i)
    out.push_back(std::clamp<int64_t>(static_cast<int64_t>(rng.lognormal(mu, 1.5)), 1, max_len));
  return out;
}

Spec generated(const std::string& family, int index, const std::string& description, const plan::PlanConfig& c,
               std::vector<int64_t> lengths, uint64_t seed, std::vector<std::string> tags) {
  char name[96];
  std::snprintf(name, sizeof name, "gen-%s-%03d", family.c_str(), index);
  Spec s;
  s.name = name;
  s.description = description;
  s.origin = "generated by impl/sched/tests/gen_conformance (family " + family + ", seed " + std::to_string(seed) + ")";
  s.tags = std::move(tags);
  s.tags.insert(s.tags.begin(), "generated");
  s.batch.lengths = std::move(lengths);
  s.config = c;
  return s;
}

void add_generated(std::vector<Spec>& out) {
  const int64_t budgets[] = {64, 100, 1000, 4096, 8192};
  // Power-of-two pools, log-normal lengths.
  for (int i = 0; i < 130; ++i) {
    const uint64_t seed = 1000 + i;
    Rng rng(seed);
    const int n = pick(rng, {1, 2, 4, 8, 16, 32});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    const plan::PlanConfig c = pool_config(rng, n, m);
    const int g = static_cast<int>(rng.uniform_int(1, 48));
    out.push_back(generated("pow2", i, "power-of-two pool, log-normal lengths up to the whole pool", c,
                            lognormal_lengths(rng, g, m, static_cast<int64_t>(n) * m), seed, {"pow2"}));
  }
  // Tied lengths: two or three distinct values (stable sort order, tie-breaks of group choice).
  for (int i = 0; i < 40; ++i) {
    const uint64_t seed = 2000 + i;
    Rng rng(seed);
    const int n = pick(rng, {2, 4, 8, 16});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    const plan::PlanConfig c = pool_config(rng, n, m);
    const int64_t a = rng.uniform_int(1, n * m), b = rng.uniform_int(1, std::max<int64_t>(1, m)),
                  d = rng.uniform_int(1, 2 * m);
    std::vector<int64_t> lengths;
    const int g = static_cast<int>(rng.uniform_int(2, 40));
    for (int k = 0; k < g; ++k) {
      const double u = rng.uniform();
      lengths.push_back(u < 0.2 ? std::min(a, n * m) : u < 0.7 ? b : std::min(d, n * m));
    }
    out.push_back(generated("ties", i, "tied lengths (three distinct values)", c, lengths, seed, {"ties"}));
  }
  // Non-power-of-two pools.
  for (int i = 0; i < 60; ++i) {
    const uint64_t seed = 3000 + i;
    Rng rng(seed);
    const int n = pick(rng, {3, 5, 6, 7, 10, 12, 14, 24});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    const plan::PlanConfig c = pool_config(rng, n, m);
    const int g = static_cast<int>(rng.uniform_int(1, 40));
    out.push_back(generated("non-pow2", i, "non-power-of-two pool (group sizes: powers of two dividing N, and N)", c,
                            lognormal_lengths(rng, g, m, static_cast<int64_t>(n) * m), seed, {"non-pow2"}));
  }
  // min_cp > 1.
  for (int i = 0; i < 30; ++i) {
    const uint64_t seed = 4000 + i;
    Rng rng(seed);
    const int n = pick(rng, {4, 8, 16, 32});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    plan::PlanConfig c = pool_config(rng, n, m);
    c.min_cp = pick(rng, {2, 4});
    const int g = static_cast<int>(rng.uniform_int(1, 40));
    out.push_back(generated("min-cp", i, "min_cp > 1: no group smaller than min_cp", c,
                            lognormal_lengths(rng, g, m, static_cast<int64_t>(n) * m), seed, {"min-cp"}));
  }
  // VPP alignment splits: the micro-batch count must become a multiple of V.
  for (int i = 0; i < 80; ++i) {
    const uint64_t seed = 5000 + i;
    Rng rng(seed);
    const int n = pick(rng, {2, 4, 8, 16, 32});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    plan::PlanConfig c = pool_config(rng, n, m);
    c.vpp_group = pick(rng, {2, 3, 4, 8});
    if (rng.uniform() < 0.2) c.min_cp = 2 <= n ? 2 : 1;
    const int g = static_cast<int>(rng.uniform_int(2, 48));
    out.push_back(generated("vpp", i, "VPP group: alignment splits micro-batches and re-expands the halves", c,
                            lognormal_lengths(rng, g, m, static_cast<int64_t>(n) * m), seed, {"vpp"}));
  }
  // fill_empty expansions: few samples on a large pool, so most ranks start empty.
  for (int i = 0; i < 40; ++i) {
    const uint64_t seed = 6000 + i;
    Rng rng(seed);
    const int n = pick(rng, {4, 8, 16, 32});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    const plan::PlanConfig c = pool_config(rng, n, m);
    const int g = static_cast<int>(rng.uniform_int(1, 5));
    std::vector<int64_t> lengths;
    for (int k = 0; k < g; ++k) lengths.push_back(rng.uniform_int(1, 3 * m));
    out.push_back(generated("fill-empty", i, "few samples on a large pool: fill_empty grows groups to cover every rank",
                            c, lengths, seed, {"fill-empty"}));
  }
  // Lengths of 1 (with a few longer ones).
  for (int i = 0; i < 15; ++i) {
    const uint64_t seed = 7000 + i;
    Rng rng(seed);
    const int n = pick(rng, {1, 2, 4, 8, 6});
    const int64_t m = pick(rng, {1, 2, 3, 7, 100});
    const plan::PlanConfig c = pool_config(rng, n, m);
    std::vector<int64_t> lengths;
    const int g = static_cast<int>(rng.uniform_int(1, 40));
    for (int k = 0; k < g; ++k) lengths.push_back(rng.uniform() < 0.85 ? 1 : rng.uniform_int(1, n * m));
    out.push_back(generated("length-one", i, "lengths of 1 (M as small as 1)", c, lengths, seed, {"length-one"}));
  }
  // Lengths of the whole pool (N*M exactly), among others.
  for (int i = 0; i < 15; ++i) {
    const uint64_t seed = 8000 + i;
    Rng rng(seed);
    const int n = pick(rng, {1, 2, 4, 8, 16, 6, 12});
    const int64_t m = budgets[rng.uniform_int(0, 4)];
    const plan::PlanConfig c = pool_config(rng, n, m);
    std::vector<int64_t> lengths;
    const int g = static_cast<int>(rng.uniform_int(1, 12));
    for (int k = 0; k < g; ++k) lengths.push_back(rng.uniform() < 0.5 ? n * m : rng.uniform_int(1, n * m));
    out.push_back(generated("whole-pool", i, "samples of exactly N*M tokens (the whole pool)", c, lengths, seed,
                            {"whole-pool"}));
  }
}

}  // namespace

std::vector<Spec> all_specs() {
  std::vector<Spec> out;
  add_hand_cases(out);
  add_generated(out);
  return out;
}

}  // namespace dcp::sched::conformance_gen
