// See megatron_common.h. Float arithmetic follows CPython: every comparison below is between the
// same IEEE doubles Python computes (ints are converted exactly: lengths < 2^31, M < 2^53).
#include "sched/megatron_common.h"

#include "core/error.h"
#include "plan/geometry.h"
#include "plan/planner.h"
#include "plan/validate.h"
#include "sched/vpp_align.h"

#include <algorithm>
#include <cmath>

namespace dcp::sched::megatron {

int64_t cp_min_float(int64_t len, int64_t max_seqlen_per_rank, int min_cp) {
  DCP_CHECK(len >= 1 && max_seqlen_per_rank >= 1, "len ", len, " M ", max_seqlen_per_rank);
  const double ratio = static_cast<double>(len) / static_cast<double>(max_seqlen_per_rank);
  const double exponent = std::ceil(std::log2(ratio));
  DCP_CHECK(exponent < 62, "length ", len, " needs 2^", exponent, " ranks");
  // 2 ** e is an int for e >= 0 and a float below 1 for e < 0; max(1, .) makes both 1.
  const int64_t raw = exponent <= 0 ? 1 : (int64_t{1} << static_cast<int>(exponent));
  return std::max<int64_t>(min_cp, raw);
}

double python_sum(const std::vector<double>& values) {
  double total = 0.0;  // int 0 + first float == that float exactly
  for (double v : values) total += v;
  return total;
}

std::vector<SeqItem> sorted_desc(const plan::Batch& batch) {
  std::vector<SeqItem> items(batch.lengths.size());
  for (size_t i = 0; i < items.size(); ++i) items[i] = SeqItem{static_cast<int>(i), batch.lengths[i]};
  std::stable_sort(items.begin(), items.end(), [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; });
  return items;
}

CallResult fill_with_full_dpxcp_group(const std::vector<SeqItem>& input, int n, int64_t max_seqlen_per_rank) {
  CallResult out;
  out.fallback = true;
  plan::Group g{0, n, {}};
  double packed = 0.0;
  const double m = static_cast<double>(max_seqlen_per_rank);
  for (const SeqItem& s : input) {
    const double per_rank = static_cast<double>(s.len) / static_cast<double>(n);
    if (packed + per_rank <= m) {
      g.samples.push_back(s.id);
      packed += per_rank;
    } else {
      out.leftovers.push_back(s);
    }
  }
  DCP_REQUIRE(!g.samples.empty(), "sample ", input.empty() ? -1 : input[0].id, " of length ",
              input.empty() ? 0 : input[0].len, " does not fit the whole pool of ", n, " ranks x ",
              max_seqlen_per_rank, " tokens");
  out.groups.push_back(std::move(g));
  return out;
}

bool microbatch_valid(const std::vector<plan::Group>& groups, const plan::PlanConfig& config, const plan::Batch& batch) {
  return !plan::find_microbatch_violation(groups, config, batch.lengths).has_value();
}

std::vector<std::vector<int>> to_rank_lists(const std::vector<plan::Group>& groups, int n) {
  std::vector<std::vector<int>> ranks(n);
  for (const plan::Group& g : groups) {
    for (int r = g.first_rank; r < g.first_rank + g.cp_size && r < n; ++r) ranks[r] = g.samples;
  }
  return ranks;
}

void check_inputs(const plan::Batch& batch, const plan::PlanConfig& config) {
  plan::check_config(batch, config);
  plan::check_fits(batch, config);
  DCP_REQUIRE(batch.size() < (int64_t{1} << 31), "batch of ", batch.size(), " samples is too large");
  for (int64_t i = 0; i < batch.size(); ++i)
    DCP_REQUIRE(batch.lengths[i] < (int64_t{1} << 31), "sample ", i, " has length ", batch.lengths[i],
                ", above 2147483647, the limit of the Megatron ports (Megatron keeps lengths in int32)");
}

plan::Plan run_scheduler(const plan::Batch& batch, const plan::PlanConfig& config, const std::string& planner,
                         NextGroupFn next_group, const void* context, bool resort) {
  const auto longer = [](const SeqItem& a, const SeqItem& b) { return a.len > b.len; };
  std::vector<SeqItem> remaining = sorted_desc(batch);
  std::vector<std::vector<plan::Group>> microbatches;
  // Every call places at least one sample (checked), so G calls bound the loop.
  for (int64_t call = 0; !remaining.empty(); ++call) {
    DCP_CHECK(call <= batch.size(), "scheduler made no progress");
    if (resort && !std::is_sorted(remaining.begin(), remaining.end(), longer))
      std::stable_sort(remaining.begin(), remaining.end(), longer);
    CallResult r = next_group(remaining, context);
    DCP_CHECK(r.leftovers.size() < remaining.size(), "call placed nothing");
    microbatches.push_back(std::move(r.groups));
    remaining = std::move(r.leftovers);
  }
  return assemble_plan(std::move(microbatches), planner, batch, config);
}

plan::Plan assemble_plan(std::vector<std::vector<plan::Group>> microbatches, const std::string& planner,
                         const plan::Batch& batch, const plan::PlanConfig& config) {
  plan::Plan out;
  const int n = config.pool();
  if (config.vpp_group && *config.vpp_group > 1 && microbatches.size() % *config.vpp_group != 0) {
    AlignContext ctx{n, config.min_cp, config.max_seqlen_per_rank, &batch.lengths};
    microbatches = align_microbatch_groups(std::move(microbatches), *config.vpp_group, ctx);
  }
  out.planner = planner;
  out.config = config;
  out.microbatches.reserve(microbatches.size());
  for (auto& mb : microbatches) out.microbatches.push_back(plan::MicroBatch{std::move(mb)});
  out.dynamic = true;
  plan::validate(out, batch);
  return out;
}

}  // namespace dcp::sched::megatron
