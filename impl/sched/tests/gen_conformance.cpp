// gen_conformance: writes the scheduler conformance cases, scenarios/conformance/*.json
// (schema dcpbench.conformance.v1, impl/plan/conformance.h), or with --check verifies that the
// committed files are exactly what it writes (CTest conformance_cases_current), so the cases keep
// one home and cannot drift from their stated origin.
//
//   gen_conformance DIR            write every case into DIR (removes DIR/*.json it does not write)
//   gen_conformance --check DIR    exit 1 naming the first file that differs, is missing or extra
//
// Where the expected plans come from (stated in each file's "origin"):
//   * hand cases (conformance_specs.cpp): every scheduler entry of reference §7 and Megatron's own
//     scheduler unit tests (§8), with their inputs as quoted there;
//   * generated cases: seeded inputs in named families (power-of-two and other pools, ties,
//     min_cp, VPP alignment splits, fill_empty expansions, lengths of 1 and of the whole pool).
// The exact plans are Megatron's as computed by the slow literal per-rank transcriptions of its
// Python (tests/megatron_ref.h: next_hdp_group, next_hdp_group_packing_aware; and
// tests/megatron_ref_vpp.h: align_sample_id_groups), never by the fast ports under test. A
// version's plan is recorded only where that transcription stays Megatron's own (no call raises or
// is invalid, the alignment neither raises nor hangs, and the plan passes plan::validate); where
// no version does, the case becomes "valid-or-error" and says what Megatron does.
#include "conformance_specs.h"
#include "core/error.h"
#include "core/json_io.h"
#include "megatron_ref.h"
#include "megatron_ref_vpp.h"
#include "plan/validate.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace dcp::sched::conformance_gen {
namespace {

using nlohmann::json;

// Megatron's plan for one version, or what Megatron does instead.
struct VersionResult {
  std::optional<plan::RankLists> plan;
  std::string what;  // when !plan
};

plan::RankLists to_lists(const std::vector<std::vector<plan::Group>>& mbs, int n) {
  plan::RankLists out;
  for (const auto& mb : mbs) out.push_back(megatron::to_rank_lists(mb, n));
  return out;
}

VersionResult megatron_version(const Spec& s, bool dev) {
  const int n = s.config.pool();
  ref::Deviations d;
  const auto mbs = dev ? ref::dev(s.batch, n, s.config.max_seqlen_per_rank, s.config.min_cp, &d)
                       : ref::pr2000(s.batch, n, s.config.max_seqlen_per_rank, s.config.min_cp, &d);
  if (d.calls > 0) return {std::nullopt, d.first};
  plan::RankLists lists = to_lists(mbs, n);
  // get_groups_and_subsamples aligns when microbatch_group_size_per_vp_stage > 1.
  if (s.config.vpp_group && *s.config.vpp_group > 1) {
    ref::AlignOutcome a = ref::align_sample_id_groups(lists, *s.config.vpp_group);
    if (a.kind == ref::AlignOutcome::kRaise) return {std::nullopt, "align_sample_id_groups raises " + a.what};
    if (a.kind == ref::AlignOutcome::kHang) return {std::nullopt, "align_sample_id_groups hangs: " + a.what};
    lists = std::move(a.groups);
  }
  if (auto v = plan::rank_lists_violation(lists, n)) return {std::nullopt, "returns an invalid plan: " + *v};
  const plan::Plan p = plan::plan_from_rank_lists(lists, dev ? "megatron-dev" : "megatron-pr2000", s.config);
  if (auto v = plan::find_violation(p, s.batch, s.config)) return {std::nullopt, "returns an invalid plan: " + *v};
  return {std::move(lists), ""};
}

// Compact JSON for long arrays inside an indented file (one micro-batch per line).
std::string render(const json& doc, const std::map<std::string, std::string>& compact) {
  std::string text = doc.dump(1);
  for (const auto& [placeholder, value] : compact) {
    const std::string quoted = "\"" + placeholder + "\"";
    const size_t at = text.find(quoted);
    DCP_CHECK(at != std::string::npos, "placeholder ", placeholder);
    text.replace(at, quoted.size(), value);
  }
  return text + "\n";
}

std::string plan_text(const plan::RankLists& lists) {
  std::string out = "[";
  for (size_t m = 0; m < lists.size(); ++m) out += (m ? ",\n    " : "\n    ") + json(lists[m]).dump();
  return out + (lists.empty() ? "]" : "\n   ]");
}

const char* must_name(plan::conformance::Must m) {
  switch (m) {
    case plan::conformance::Must::kPlan: return "plan";
    case plan::conformance::Must::kError: return "error";
    case plan::conformance::Must::kPlanOrError: return "plan-or-error";
  }
  return "?";
}

std::string case_file_text(const Spec& s) {
  std::map<std::string, std::string> compact;
  json doc;
  doc["schema"] = "dcpbench.conformance.v1";
  doc["name"] = s.name;
  doc["description"] = s.description;
  std::string origin = s.origin;
  doc["tags"] = s.tags;
  json in;
  in["seqlens"] = "@seqlens";
  compact["@seqlens"] = json(s.batch.lengths).dump();
  in["dp"] = s.config.dp;
  in["cp"] = s.config.cp;
  in["max_seqlen_per_dp_cp_rank"] = s.config.max_seqlen_per_rank;
  in["min_cp"] = s.config.min_cp;
  in["vpp_group"] = s.config.vpp_group ? json(*s.config.vpp_group) : json(nullptr);
  doc["input"] = in;
  json ex;
  if (s.must) {  // hand-written defect case
    ex["kind"] = "valid-or-error";
    ex["must"] = must_name(*s.must);
    ex["defect"] = s.defect;
    ex["megatron"] = s.megatron;
    ex["correct"] = s.correct;
  } else {
    std::map<std::string, VersionResult> versions{{"megatron-dev", megatron_version(s, true)},
                                                  {"megatron-pr2000", megatron_version(s, false)}};
    if (s.expected_dev) {
      // Megatron's own unit test states the dev plan. The transcription (with its fallback where
      // d48bd6be0a's fill fails, as the later dev source does) must give the same plan.
      const int n = s.config.pool();
      const auto got = to_lists(ref::dev(s.batch, n, s.config.max_seqlen_per_rank, s.config.min_cp), n);
      DCP_CHECK(got == *s.expected_dev, s.name, ": the literal transcription does not reproduce Megatron's unit-test plan");
      versions["megatron-dev"] = VersionResult{*s.expected_dev, ""};
    }
    json plans = json::object();
    std::string notes;
    for (const auto& [name, r] : versions) {
      if (r.plan) {
        plans[name] = "@plan-" + name;
        compact["@plan-" + name] = plan_text(*r.plan);
      } else {
        notes += (notes.empty() ? "" : "; ") + name + ": " + r.what;
      }
    }
    if (!plans.empty()) {
      ex["kind"] = "exact";
      ex["plans"] = plans;
      origin += plans.size() == 2 ? ". Expected plans: Megatron's, computed by the literal transcriptions"
                                    " (impl/sched/tests/megatron_ref*.h)"
                                  : ". Expected plan: Megatron's, computed by the literal transcriptions"
                                    " (impl/sched/tests/megatron_ref*.h); the other version has none here (" +
                                        notes + ")";
    } else {
      ex["kind"] = "valid-or-error";
      ex["must"] = "plan-or-error";
      ex["defect"] = s.defect.empty() ? "Megatron returns no valid plan for this input" : s.defect;
      ex["megatron"] = notes + " (literal transcriptions, impl/sched/tests/megatron_ref*.h)";
      ex["correct"] = "return a valid plan or a clear one-line error; never crash, hang or return an invalid plan";
    }
  }
  doc["origin"] = origin;
  doc["expect"] = ex;
  return render(doc, compact);
}

int run(int argc, char** argv) {
  bool check = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") {
      check = true;
    } else if (a == "--help" || a == "-h") {
      std::printf("usage: gen_conformance [--check] DIR\n");
      return 0;
    } else {
      dir = a;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "gen_conformance: error: no output folder (usage: gen_conformance [--check] DIR)\n");
    return 2;
  }
  namespace fs = std::filesystem;
  std::map<std::string, std::string> files;  // file name -> text
  for (const Spec& s : all_specs()) {
    const std::string file = s.name + ".json";
    DCP_CHECK(!files.count(file), "two cases named ", s.name);
    files[file] = case_file_text(s);
  }
  std::set<std::string> on_disk;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") on_disk.insert(e.path().filename().string());
  }
  if (check) {
    for (const auto& [name, text] : files) {
      std::ifstream f(fs::path(dir) / name, std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      if (!f || ss.str() != text) {
        std::fprintf(stderr, "gen_conformance: %s/%s is %s; regenerate with: gen_conformance %s\n", dir.c_str(),
                     name.c_str(), f ? "not what the generator writes" : "missing", dir.c_str());
        return 1;
      }
    }
    for (const auto& name : on_disk) {
      if (!files.count(name)) {
        std::fprintf(stderr, "gen_conformance: %s/%s is not written by the generator (add it to conformance_specs.cpp)\n",
                     dir.c_str(), name.c_str());
        return 1;
      }
    }
    std::printf("gen_conformance: %zu cases in %s are current\n", files.size(), dir.c_str());
    return 0;
  }
  fs::create_directories(dir);
  for (const auto& name : on_disk)
    if (!files.count(name)) fs::remove(fs::path(dir) / name);
  int exact = 0;
  for (const auto& [name, text] : files) {
    write_file_atomic((fs::path(dir) / name).string(), text);
    exact += text.find("\"kind\": \"exact\"") != std::string::npos ? 1 : 0;
  }
  std::printf("gen_conformance: wrote %zu cases (%d exact, %zu valid-or-error) to %s\n", files.size(), exact,
              files.size() - exact, dir.c_str());
  return 0;
}

}  // namespace
}  // namespace dcp::sched::conformance_gen

int main(int argc, char** argv) {
  try {
    return dcp::sched::conformance_gen::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gen_conformance: error: %s\n", e.what());
    return 1;
  }
}
