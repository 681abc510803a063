// Planner registry and the shared input checks.
#include "plan/planner.h"

#include "core/error.h"
#include "core/text.h"
#include "plan/cp_rule.h"

namespace dcp::plan {

void PlannerRegistry::add(const std::string& name, Factory factory) {
  DCP_CHECK(!factories_.count(name), "planner ", name, " registered twice");
  factories_[name] = std::move(factory);
}

void PlannerRegistry::add(const std::string& name, std::function<std::unique_ptr<Planner>()> factory) {
  add(name, Factory([f = std::move(factory)](const PlannerOptions&) { return f(); }));
}

bool PlannerRegistry::contains(const std::string& name) const { return factories_.count(name) > 0; }

std::vector<std::string> PlannerRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : factories_) out.push_back(k);
  return out;
}

std::unique_ptr<Planner> PlannerRegistry::make(const std::string& name, const PlannerOptions& options) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
    throw InputError(detail::concat("unknown planner ", quote(name), " (known: ", known, ")"));
  }
  return it->second(options);
}

void check_config(const Batch& batch, const PlanConfig& c) {
  DCP_REQUIRE(c.dp >= 1, "--dp ", c.dp, " must be >= 1");
  DCP_REQUIRE(c.cp >= 1, "--cp ", c.cp, " must be >= 1");
  DCP_REQUIRE(c.max_seqlen_per_rank >= 1, "--max-seqlen-per-rank ", c.max_seqlen_per_rank, " must be >= 1");
  // Bounds that keep every token product (pool x M, k x M) far from int64 overflow.
  DCP_REQUIRE(c.max_seqlen_per_rank <= kMaxTokensPerRank, "--max-seqlen-per-rank ", c.max_seqlen_per_rank,
              " is larger than the supported ", kMaxTokensPerRank, " tokens");
  DCP_REQUIRE(static_cast<int64_t>(c.dp) * c.cp <= kMaxPool, "--dp ", c.dp, " x --cp ", c.cp,
              " is larger than the supported pool of ", kMaxPool, " ranks");
  DCP_REQUIRE(is_pow2(c.min_cp), "--min-cp ", c.min_cp, " is not a power of two");
  DCP_REQUIRE(c.min_cp <= c.pool(), "--min-cp ", c.min_cp, " is larger than the pool dp*cp = ", c.pool());
  DCP_REQUIRE(!c.vpp_group || *c.vpp_group >= 1, "--vpp-group ", c.vpp_group.value_or(0), " must be >= 1");
  DCP_REQUIRE(!c.max_seqlen || *c.max_seqlen >= 1, "--max-seqlen ", c.max_seqlen.value_or(0), " must be >= 1");
  DCP_REQUIRE(!c.max_seqlen || *c.max_seqlen <= kMaxTokensPerRank, "--max-seqlen ", c.max_seqlen.value_or(0),
              " is above the limit of ", kMaxTokensPerRank, " tokens per sample");
  DCP_REQUIRE(batch.size() <= kMaxBatchSamples, "the batch has ", batch.size(),
              " samples, more than the limit of ", kMaxBatchSamples, " per global batch");
  DCP_REQUIRE(batch.size() * c.pool() <= kMaxSamplesTimesPool, "the batch has ", batch.size(), " samples x a pool of ",
              c.pool(), " ranks = ", batch.size() * c.pool(), ", more than the limit of ", kMaxSamplesTimesPool,
              " (samples x ranks: a plan lists every rank of every micro-batch)");
  // Token sums stay below 2^60 (= kMaxPool * kMaxTokensPerRank), so no total can overflow int64.
  constexpr int64_t kMaxTotalTokens = kMaxPool * kMaxTokensPerRank;
  int64_t total = 0;
  for (int64_t i = 0; i < batch.size(); ++i) {
    DCP_REQUIRE(batch.lengths[i] >= 1, "sample ", i, " has length ", batch.lengths[i], " (must be >= 1)");
    DCP_REQUIRE(batch.lengths[i] <= kMaxTokensPerRank, "sample ", i, " has length ", batch.lengths[i],
                ", above the limit of ", kMaxTokensPerRank, " tokens per sample");
    DCP_REQUIRE(batch.lengths[i] <= kMaxTotalTokens - total, "sample ", i, " (length ", batch.lengths[i],
                ") brings the batch past the supported total of ", kMaxTotalTokens, " tokens");
    total += batch.lengths[i];
    DCP_REQUIRE(!c.max_seqlen || batch.lengths[i] <= *c.max_seqlen, "sample ", i, " has length ",
                batch.lengths[i], " > --max-seqlen ", *c.max_seqlen);
  }
}

void check_fits(const Batch& batch, const PlanConfig& c) {
  const int64_t largest = static_cast<int64_t>(c.pool()) * c.max_seqlen_per_rank;
  for (int64_t i = 0; i < batch.size(); ++i) {
    DCP_REQUIRE(batch.lengths[i] <= largest, "sample ", i, " has length ", batch.lengths[i],
                " which needs CP size ", next_pow2(ceil_div(batch.lengths[i], c.max_seqlen_per_rank)),
                " but the pool has ", c.pool(), " ranks (largest length that fits: ", largest, ")");
  }
}

}  // namespace dcp::plan
