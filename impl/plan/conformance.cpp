// See conformance.h. Judging order: the outcome kind against the expectation, then validity (the
// one check, plan/validate.h, against the case's config), then the exact plan.
#include "plan/conformance.h"

#include "core/error.h"
#include "core/json_io.h"
#include "plan/validate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>

namespace dcp::plan::conformance {

namespace {

using detail::concat;
using nlohmann::json;

struct Reader {
  const std::string& file;

  // `what` is "=<value> ..." or a phrase: file: "key"=5 is not a string, file: "key" is missing.
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InputError(concat(file, ": \"", key, "\"", what.starts_with('=') ? "" : " ", what));
  }
  const json& at(const json& j, const std::string& key, const std::string& path) const {
    if (!j.is_object() || !j.contains(key)) fail(path, "is missing");
    return j.at(key);
  }
  std::string str(const json& j, const std::string& key, const std::string& path) const {
    const json& v = at(j, key, path);
    if (!v.is_string()) fail(path, concat("=", v.dump(), " is not a string"));
    return v.get<std::string>();
  }
  int64_t int64(const json& v, const std::string& path) const {
    if (!v.is_number_integer()) fail(path, concat("=", v.dump(), " is not an integer"));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, concat("=", v.dump(), " is out of range"));
    return v.get<int64_t>();
  }
  int int32(const json& v, const std::string& path) const {
    const int64_t x = int64(v, path);
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
      fail(path, concat("=", x, " is out of range"));
    return static_cast<int>(x);
  }
  RankLists rank_lists(const json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "is not a list of micro-batches");
    RankLists out;
    for (size_t m = 0; m < v.size(); ++m) {
      const std::string pm = concat(path, "[", m, "]");
      if (!v[m].is_array()) fail(pm, "is not a list of rank lists");
      std::vector<std::vector<int>> ranks;
      for (size_t r = 0; r < v[m].size(); ++r) {
        const std::string pr = concat(pm, "[", r, "]");
        if (!v[m][r].is_array()) fail(pr, "is not a list of sample ids");
        std::vector<int> ids;
        for (size_t i = 0; i < v[m][r].size(); ++i) ids.push_back(int32(v[m][r][i], concat(pr, "[", i, "]")));
        ranks.push_back(std::move(ids));
      }
      out.push_back(std::move(ranks));
    }
    return out;
  }
};

Must parse_must(const Reader& rd, const std::string& s) {
  if (s == "plan") return Must::kPlan;
  if (s == "error") return Must::kError;
  if (s == "plan-or-error") return Must::kPlanOrError;
  rd.fail("expect.must", concat("=\"", s, "\" is not one of plan, error, plan-or-error"));
}

std::string ids_text(const std::vector<int>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 8 && ids.size() > 10) return out + ", ... (" + std::to_string(ids.size()) + " ids)]";
    out += (i ? ", " : "") + std::to_string(ids[i]);
  }
  return out + "]";
}

// First difference between two plans in Megatron's format, or nullopt.
std::optional<std::string> first_difference(const RankLists& got, const RankLists& want, const std::string& ref) {
  const size_t common = std::min(got.size(), want.size());
  for (size_t m = 0; m < common; ++m) {
    if (got[m] == want[m]) continue;
    for (size_t r = 0; r < std::max(got[m].size(), want[m].size()); ++r) {
      const std::vector<int> g = r < got[m].size() ? got[m][r] : std::vector<int>{};
      const std::vector<int> w = r < want[m].size() ? want[m][r] : std::vector<int>{};
      if (g != w)
        return concat("micro-batch ", m, " differs from ", ref, "'s: rank ", r, " holds ", ids_text(g), ", ", ref,
                      " puts ", ids_text(w), " there");
    }
  }
  if (got.size() != want.size())
    return concat(got.size(), " micro-batches where ", ref, " makes ", want.size(), " (the first ", common,
                  " are identical)");
  return std::nullopt;
}

const char* must_text(Must m) {
  switch (m) {
    case Must::kPlan: return "a valid plan";
    case Must::kError: return "a clear error (no valid plan exists)";
    case Must::kPlanOrError: return "a valid plan or a clear error";
  }
  return "?";
}

}  // namespace

const char* outcome_name(Outcome::Kind kind) {
  switch (kind) {
    case Outcome::kPlan: return "plan";
    case Outcome::kError: return "error";
    case Outcome::kCrash: return "crash";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kBadOutput: return "bad-output";
  }
  return "?";
}

Case read_case(const std::string& path) {
  const json j = read_json_file(path);
  const Reader rd{path};
  Case c;
  c.file = path;
  if (!j.is_object())
    throw InputError(concat(path, ": the file holds ", json_excerpt(j, 40),
                            ", not a JSON object (a dcpbench.conformance.v1 case)"));
  const std::string schema = rd.str(j, "schema", "schema");
  if (schema != "dcpbench.conformance.v1") rd.fail("schema", concat("=\"", schema, "\" is not dcpbench.conformance.v1"));
  c.name = rd.str(j, "name", "name");
  c.description = rd.str(j, "description", "description");
  c.origin = rd.str(j, "origin", "origin");
  if (j.contains("tags")) {
    if (!j["tags"].is_array()) rd.fail("tags", "is not a list");
    for (const auto& t : j["tags"]) {
      if (!t.is_string()) rd.fail("tags", concat("holds ", t.dump(), ", not a string"));
      c.tags.push_back(t.get<std::string>());
    }
  }
  const json& in = rd.at(j, "input", "input");
  const json& lens = rd.at(in, "seqlens", "input.seqlens");
  if (!lens.is_array()) rd.fail("input.seqlens", "is not a list");
  for (size_t i = 0; i < lens.size(); ++i) c.batch.lengths.push_back(rd.int64(lens[i], concat("input.seqlens[", i, "]")));
  c.config.dp = rd.int32(rd.at(in, "dp", "input.dp"), "input.dp");
  c.config.cp = rd.int32(rd.at(in, "cp", "input.cp"), "input.cp");
  c.config.max_seqlen_per_rank =
      rd.int64(rd.at(in, "max_seqlen_per_dp_cp_rank", "input.max_seqlen_per_dp_cp_rank"), "input.max_seqlen_per_dp_cp_rank");
  c.config.min_cp = in.contains("min_cp") ? rd.int32(in["min_cp"], "input.min_cp") : 1;
  if (in.contains("vpp_group") && !in["vpp_group"].is_null()) c.config.vpp_group = rd.int32(in["vpp_group"], "input.vpp_group");

  const json& ex = rd.at(j, "expect", "expect");
  const std::string kind = rd.str(ex, "kind", "expect.kind");
  if (kind == "exact") {
    c.exact = true;
    c.must = Must::kPlan;
    const json& plans = rd.at(ex, "plans", "expect.plans");
    if (!plans.is_object() || plans.empty()) rd.fail("expect.plans", "must name at least one Megatron version");
    for (const auto& [ref, p] : plans.items()) c.plans[ref] = rd.rank_lists(p, "expect.plans." + ref);
  } else if (kind == "valid-or-error") {
    c.must = parse_must(rd, rd.str(ex, "must", "expect.must"));
    c.defect = rd.str(ex, "defect", "expect.defect");
    c.megatron = rd.str(ex, "megatron", "expect.megatron");
    c.correct = rd.str(ex, "correct", "expect.correct");
  } else {
    rd.fail("expect.kind", concat("=\"", kind, "\" is not exact or valid-or-error"));
  }
  return c;
}

std::vector<Case> read_cases(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(concat("--cases ", dir, " is not a folder"));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  }
  if (ec) throw InputError(concat("--cases ", dir, ": ", ec.message()));
  if (files.empty()) throw InputError(concat("--cases ", dir, " holds no *.json case files"));
  std::sort(files.begin(), files.end());
  std::vector<Case> out;
  out.reserve(files.size());
  for (const auto& f : files) out.push_back(read_case(f));
  return out;
}

Verdict judge(const Case& c, const Outcome& o, const std::string& reference) {
  const bool error_ok = c.must != Must::kPlan;
  const bool plan_ok = c.must != Must::kError;
  switch (o.kind) {
    case Outcome::kError:
      if (error_ok) return {true, "error: " + o.message};
      return {false, concat("returned an error where ", must_text(c.must), " is required: ", o.message)};
    case Outcome::kCrash:
    case Outcome::kTimeout:
    case Outcome::kBadOutput:
      return {false, concat(outcome_name(o.kind), ": ", o.message)};
    case Outcome::kPlan:
      break;
  }
  if (!plan_ok) return {false, "returned a plan where no valid plan exists (a clear error is required)"};
  Plan p;
  if (o.lists) {
    if (auto v = rank_lists_violation(*o.lists, c.config.pool())) return {false, "invalid plan: " + *v};
    // Read as dynamic on purpose (not plan_from_megatron_format): the contract is a drop-in for
    // Megatron's dynamic scheduler, where a group of a size the pool lacks cannot run (helper-85).
    p = plan_from_rank_lists(*o.lists, "scheduler", c.config);
  } else if (o.plan) {
    p = *o.plan;
    // A case asks for no max_seqlen (its input has none): a plan.v1 answer that records one (made
    // by `dcpbench schedule --max-seqlen`, plan_json.h) is judged on the rest, as before the key.
    p.config.max_seqlen = c.config.max_seqlen;
  } else {
    return {false, "bad-output: no plan"};
  }
  if (auto v = find_violation(p, c.batch, c.config)) return {false, "invalid plan: " + *v};
  if (c.exact && !reference.empty()) {
    const auto it = c.plans.find(reference);
    if (it != c.plans.end()) {
      const RankLists got = o.lists ? *o.lists : rank_lists_of(p);
      if (auto d = first_difference(got, it->second, reference)) return {false, *d};
      return {true, "identical to " + reference};
    }
  }
  return {true, "valid plan"};
}

}  // namespace dcp::plan::conformance
