// See plan_json.h.
#include "plan/plan_json.h"

#include "core/error.h"
#include "core/json_io.h"
#include "core/text.h"
#include "plan/planner.h"
#include "plan/summary.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace dcp::plan {

namespace {

// The "summary" of a plan.v1 file: what plan_to_json writes and summary_violation compares with.
nlohmann::json summary_of(const Plan& plan, const Batch& batch, const nlohmann::json& summary_extra) {
  using nlohmann::json;
  const PlanStats st = plan_stats(plan, batch);
  json summary = summary_extra.is_object() ? summary_extra : json::object();
  summary["samples"] = batch.size();
  int64_t tokens = 0;
  for (auto L : batch.lengths) tokens += L;
  summary["tokens"] = tokens;
  summary["microbatch_count"] = plan.microbatches.size();
  summary["dynamic"] = plan.dynamic;  // false: static CP, every group has size cp
  if (plan.pad_to > 0) summary["pad_to"] = plan.pad_to;  // every sample padded to this length
  json per_mb = json::array();
  for (const auto& ms : st.microbatches) {
    per_mb.push_back({{"max_rank_workload", ms.max_rank_workload},
                      {"mean_rank_workload", ms.mean_rank_workload},
                      {"max_rank_tokens", ms.max_rank_tokens},
                      {"mean_rank_tokens", ms.mean_rank_tokens},
                      {"groups", ms.groups}});
  }
  summary["per_microbatch"] = per_mb;
  // Critical path in Megatron's cost unit (sum L^2/k): the sum over micro-batches of the
  // busiest rank, against the perfectly balanced sum L^2 / N.
  double crit = 0;
  for (const auto& ms : st.microbatches) crit += ms.max_rank_workload;
  summary["workload_critical_path"] = crit;
  const int pool = plan.config.pool();
  summary["workload_balanced_bound"] = pool > 0 ? st.total_workload / pool : 0.0;
  json hist = json::object();
  for (const auto& [k, count] : st.cp_size_histogram) hist[std::to_string(k)] = count;
  summary["cp_size_histogram"] = hist;
  return summary;
}

}  // namespace

nlohmann::json plan_to_json(const Plan& plan, const Batch& batch, const nlohmann::json& summary_extra) {
  using nlohmann::json;
  const PlanConfig& c = plan.config;
  json j;
  j["schema"] = "dcpbench.plan.v1";
  j["planner"] = plan.planner;
  j["dp"] = c.dp;
  j["cp"] = c.cp;
  j["pool"] = c.pool();
  j["max_seqlen_per_rank"] = c.max_seqlen_per_rank;
  j["min_cp"] = c.min_cp;
  j["vpp_group"] = c.vpp_group ? json(*c.vpp_group) : json(nullptr);
  // Only where it was set (`--max-seqlen`): a plan without it is byte for byte what plan.v1 had
  // always been, and readers ignore a key they do not know (helper-75's trial: `check` could not
  // tell which max_seqlen a plan was made for).
  if (c.max_seqlen) j["max_seqlen"] = *c.max_seqlen;
  json mbs = json::array();
  for (const auto& mb : plan.microbatches) {
    json groups = json::array();
    for (const auto& g : mb.groups) {
      json ranks = json::array();
      for (int r = g.first_rank; r <= g.last_rank(); ++r) ranks.push_back(r);
      groups.push_back({{"ranks", ranks}, {"cp_size", g.cp_size}, {"samples", g.samples}});
    }
    mbs.push_back({{"groups", groups}});
  }
  j["microbatches"] = mbs;
  j["summary"] = summary_of(plan, batch, summary_extra);
  return j;
}

std::optional<std::string> summary_violation(const nlohmann::json& j, const Plan& plan, const Batch& batch) {
  using nlohmann::json;
  const auto differs = [](const std::string& key, const json& have, const json& want) {
    return detail::concat("\"", key, "\" is ", one_line(have.dump(), 80), ", the plan has ", one_line(want.dump(), 80));
  };
  if (j.contains("pool") && j["pool"] != json(int64_t{plan.config.dp} * plan.config.cp))
    return differs("pool", j["pool"], int64_t{plan.config.dp} * plan.config.cp);
  if (!j.contains("summary")) return std::nullopt;
  const json& have = j["summary"];
  if (!have.is_object()) return detail::concat("\"summary\" is ", one_line(have.dump(), 80), ", not an object");
  // The summary is recomputed from the lengths of the plan's samples: an id past the batch is a
  // violation here too, never an out-of-bounds read (callers check validity first; helper-78).
  for (const auto& mb : plan.microbatches)
    for (const auto& g : mb.groups)
      for (const int s : g.samples)
        if (s < 0 || s >= batch.size())
          return detail::concat("sample id ", s, " is outside [0, ", batch.size(), "): no summary to compare");
  const json want = summary_of(plan, batch, json::object());  // (not the whole plan's JSON)
  // A number equal in value (1 and 1.0 are the same count).
  const auto same_number = [](const json& a, const json& b, double rel) {
    if (!a.is_number() || !b.is_number()) return a == b;
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || std::abs(x - y) <= rel * std::max(std::abs(x), std::abs(y));
  };
  // ("dynamic" and "pad_to" are read from the summary into the plan: they agree by construction.)
  for (const char* key : {"samples", "tokens", "microbatch_count"})
    if (have.contains(key) && !same_number(have[key], want[key], 0.0))
      return differs(std::string("summary.") + key, have[key], want[key]);
  if (have.contains("cp_size_histogram")) {
    const json& h = have["cp_size_histogram"];
    bool same = h.is_object() && h.size() == want["cp_size_histogram"].size();
    for (auto it = want["cp_size_histogram"].begin(); same && it != want["cp_size_histogram"].end(); ++it)
      same = h.contains(it.key()) && same_number(h[it.key()], it.value(), 0.0);
    if (!same) return differs("summary.cp_size_histogram", h, want["cp_size_histogram"]);
  }
  for (const char* key : {"workload_critical_path", "workload_balanced_bound"})
    if (have.contains(key) && !same_number(have[key], want[key], 1e-9))
      return differs(std::string("summary.") + key, have[key], want[key]);
  if (have.contains("per_microbatch")) {
    const json& h = have["per_microbatch"];
    const json& w = want["per_microbatch"];
    if (!h.is_array() || h.size() != w.size())
      return detail::concat("\"summary.per_microbatch\" has ", h.is_array() ? std::to_string(h.size()) : "no",
                            " entries, the plan ", w.size(), " micro-batches");
    for (size_t m = 0; m < w.size(); ++m) {
      if (!h[m].is_object()) return differs(detail::concat("summary.per_microbatch[", m, "]"), h[m], w[m]);
      for (auto it = w[m].begin(); it != w[m].end(); ++it) {
        const bool count = it.key() == "groups";  // the rest are sums of L/k or L^2/k
        if (h[m].contains(it.key()) && !same_number(h[m][it.key()], it.value(), count ? 0.0 : 1e-9))
          return differs(detail::concat("summary.per_microbatch[", m, "].", it.key()), h[m][it.key()], it.value());
      }
    }
  }
  return std::nullopt;
}

Plan plan_from_json(const nlohmann::json& j) {
  using nlohmann::json;
  // Every message is one line "plan JSON: "<dotted.key>" ...", never nlohmann's text (a caller
  // shows it as the answer of `dcpbench check` or a ValueError of the Python module).
  const auto member = [](const json& obj, const std::string& path, const char* key) -> const json& {
    const auto it = obj.find(key);
    DCP_REQUIRE(it != obj.end(), "plan JSON: \"", path.empty() ? "" : path + ".", key, "\" is missing");
    return *it;
  };
  const auto object_at = [](const json& v, const std::string& path) -> const json& {
    DCP_REQUIRE(v.is_object(), "plan JSON: \"", path, "\"=", json_excerpt(v), " is not an object");
    return v;
  };
  // Every integer through json_int (core/json_io.h): a 2^63, a negative count or a 1e300 is an
  // InputError naming the key, never a wrapped or undefined conversion.
  const auto int_at = [&member](const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi) {
    return json_int(member(obj, path, key), lo, hi,
                    std::string("plan JSON: \"") + (path.empty() ? "" : path + ".") + key + "\"");
  };
  try {
    DCP_REQUIRE(j.is_object(), "plan JSON: not an object");
    // "schema" may be left out (an answer of an external planner, `dcpbench conform`); given, it is ours.
    if (j.contains("schema"))
      DCP_REQUIRE(j["schema"] == "dcpbench.plan.v1", "plan JSON: \"schema\"=", json_excerpt(j["schema"]),
                  " is not dcpbench.plan.v1");
    Plan p;
    const json& planner = member(j, "", "planner");
    DCP_REQUIRE(planner.is_string(), "plan JSON: \"planner\"=", json_excerpt(planner), " is not a string");
    p.planner = planner.get<std::string>();
    p.config.dp = static_cast<int>(int_at(j, "", "dp", 1, kMaxPool));
    p.config.cp = static_cast<int>(int_at(j, "", "cp", 1, kMaxPool));
    DCP_REQUIRE(int64_t{p.config.dp} * p.config.cp <= kMaxPool, "plan JSON: dp x cp = ",
                int64_t{p.config.dp} * p.config.cp, " is above the supported pool of ", kMaxPool, " ranks");
    p.config.max_seqlen_per_rank = int_at(j, "", "max_seqlen_per_rank", 1, kMaxTokensPerRank);
    p.config.min_cp = j.contains("min_cp") ? static_cast<int>(int_at(j, "", "min_cp", 1, kMaxPool)) : 1;
    if (j.contains("vpp_group") && !j["vpp_group"].is_null())
      p.config.vpp_group = static_cast<int>(int_at(j, "", "vpp_group", 1, kMaxPool));
    if (j.contains("max_seqlen") && !j["max_seqlen"].is_null())
      p.config.max_seqlen = int_at(j, "", "max_seqlen", 1, kMaxTokensPerRank);
    DCP_REQUIRE(!j.contains("summary") || j["summary"].is_object(), "plan JSON: \"summary\" is not an object");
    if (j.contains("summary") && j["summary"].contains("dynamic")) {
      const json& dynamic = j["summary"]["dynamic"];
      DCP_REQUIRE(dynamic.is_boolean(), "plan JSON: \"summary.dynamic\"=", json_excerpt(dynamic),
                  " is not true or false");
      p.dynamic = dynamic.get<bool>();
    } else {
      p.dynamic = true;
    }
    if (j.contains("summary") && j["summary"].contains("pad_to"))
      p.pad_to = int_at(j["summary"], "summary", "pad_to", 0, kMaxPool * kMaxTokensPerRank);
    const json& mbs = member(j, "", "microbatches");
    DCP_REQUIRE(mbs.is_array(), "plan JSON: \"microbatches\" is not an array");
    for (size_t m = 0; m < mbs.size(); ++m) {
      const std::string mb_path = detail::concat("microbatches[", m, "]");
      MicroBatch mb;
      const json& groups = member(object_at(mbs[m], mb_path), mb_path, "groups");
      DCP_REQUIRE(groups.is_array(), "plan JSON: \"groups\" is not an array");
      for (size_t i = 0; i < groups.size(); ++i) {
        const std::string g_path = detail::concat(mb_path, ".groups[", i, "]");
        const json& g = object_at(groups[i], g_path);
        Group gr;
        const json& ranks = member(g, g_path, "ranks");
        DCP_REQUIRE(ranks.is_array() && !ranks.empty(), "plan JSON: plan group with no ranks");
        gr.first_rank = static_cast<int>(json_int(ranks.front(), 0, kMaxPool - 1, "plan JSON: \"ranks\"[0]"));
        gr.cp_size = static_cast<int>(int_at(g, g_path, "cp_size", 1, kMaxPool));
        const json& samples = member(g, g_path, "samples");
        DCP_REQUIRE(samples.is_array(), "plan JSON: \"samples\" is not an array");
        gr.samples.reserve(samples.size());
        for (const auto& id : samples)
          gr.samples.push_back(static_cast<int>(json_int(id, 0, kMaxBatchSamples - 1, "plan JSON: sample id")));
        mb.groups.push_back(std::move(gr));
      }
      p.microbatches.push_back(std::move(mb));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(detail::concat("plan JSON: ", e.what()));  // not expected: every access above is checked
  }
}

}  // namespace dcp::plan
