// `dcpbench conform`: runs a scheduler on every conformance case of scenarios/conformance/ and
// reports pass or fail per case (DESIGN.md "Other commands"; protocol in conform.h and
// scenarios/conformance/README.md).
//   dcpbench conform (--planner NAME | --planner-cmd "CMD") [--cases DIR] [--reference REF]
//                    [--timeout S] [--filter TEXT] [--all] [--out R.json]
// Prints a fixed-width table (the failing cases, every case with --all, then one line per case
// family) and writes the report (schema dcpbench.conform.v1) atomically to --out. Exit code 0
// when every case passes, 1 when one fails, 2 for bad input (one line on stderr).
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/text.h"
#include "harness/commands.h"
#include "harness/conform.h"
#include "harness/registry.h"
#include "harness/results.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

namespace dcp::harness {

namespace {

using nlohmann::json;
using plan::conformance::Case;
using plan::conformance::Outcome;

struct ConformArgs {
  std::string planner;
  std::string planner_cmd;
  std::string cases = std::string(DCP_SOURCE_DIR) + "/scenarios/conformance";
  std::string reference = "megatron-dev";
  double timeout_s = 10;
  std::string filter;
  bool all = false;
  std::string out;
  bool out_given = false;
};

struct Row {
  const Case* c = nullptr;
  Outcome::Kind outcome = Outcome::kBadOutput;
  bool pass = false;
  std::string reason;
  double ms = 0;
};

// "gen-vpp-012" -> "gen-vpp"; "s7b-fill-..." -> "s7"; "s8-..." -> "s8".
std::string family(const std::string& name) {
  if (name.rfind("gen-", 0) == 0) {
    const size_t dash = name.rfind('-');
    return name.substr(0, dash);
  }
  if (name.size() >= 2 && name[0] == 's' && (name[1] == '7' || name[1] == '8')) return name.substr(0, 2);
  return "other";
}

const char* expect_text(const Case& c) {
  if (c.exact) return "exact";
  switch (c.must) {
    case plan::conformance::Must::kPlan: return "plan";
    case plan::conformance::Must::kError: return "error";
    case plan::conformance::Must::kPlanOrError: return "plan|error";
  }
  return "?";
}

std::string fit(const std::string& s, size_t width) {
  if (s.size() <= width) return s + std::string(width - s.size(), ' ');
  return s.substr(0, width - 1) + "~";
}

void print_row(std::FILE* t, const Row& r) {
  std::fprintf(t, "%s %s %s %s %9.2f  %s\n", fit(r.c->name, 44).c_str(), fit(expect_text(*r.c), 10).c_str(),
              fit(plan::conformance::outcome_name(r.outcome), 10).c_str(), r.pass ? "pass" : "FAIL", r.ms,
              r.reason.c_str());
}

int run_conform(const ConformArgs& a, const std::string& command_line) {
  DCP_REQUIRE(a.planner.empty() != a.planner_cmd.empty(), "give exactly one of --planner NAME and --planner-cmd \"CMD\"");
  DCP_REQUIRE(a.timeout_s > 0 && a.timeout_s <= 3600, "--timeout ", a.timeout_s, " must be in (0, 3600] seconds");
  DCP_REQUIRE(a.reference == "megatron-dev" || a.reference == "megatron-pr2000" || a.reference == "none",
              "--reference ", a.reference, " is not one of megatron-dev, megatron-pr2000, none");
  if (a.out_given) {  // core/files.h policy, before any case runs
    check_output_path(a.out);
    check_output_not_in_folder(a.out, a.cases, "the cases folder");
  }
  std::unique_ptr<plan::Planner> planner;
  if (!a.planner.empty()) planner = builtin_planners().make(a.planner);  // InputError names the known ones
  const std::vector<Case> cases = plan::conformance::read_cases(a.cases);
  std::vector<const Case*> selected;
  for (const Case& c : cases) {
    bool match = a.filter.empty() || c.name.find(a.filter) != std::string::npos;
    for (const auto& t : c.tags) match = match || t == a.filter;
    if (match) selected.push_back(&c);
  }
  DCP_REQUIRE(!selected.empty(), "--filter ", a.filter, " matches no case name or tag in ", a.cases);
  const std::string reference = a.reference == "none" ? "" : a.reference;
  const std::string who = planner ? a.planner : a.planner_cmd;
  if (a.out_given) probe_output_folder(a.out);  // last: bad input above leaves the folder untouched

  bool leaked = false;
  std::vector<Row> rows;
  const auto t0 = std::chrono::steady_clock::now();
  // Progress on stderr at most every 10 s (a scheduler that hangs costs the whole --timeout per
  // case: 447 cases at the default 10 s are 75 minutes).
  auto last_note = t0;
  int failed_so_far = 0;
  for (const Case* c : selected) {
    const auto s = std::chrono::steady_clock::now();
    if (s - last_note >= std::chrono::seconds(10)) {
      std::fprintf(stderr, "dcpbench conform: %zu of %zu cases done (%d failed) after %.0f s; next: %s\n", rows.size(),
                   selected.size(), failed_so_far, std::chrono::duration<double>(s - t0).count(),
                   quote(c->name, 60).c_str());
      last_note = s;
    }
    const Outcome o = planner ? run_builtin(*planner, *c, a.timeout_s, &leaked) : run_external(a.planner_cmd, *c, a.timeout_s);
    Row r;
    r.c = c;
    r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
    r.outcome = o.kind;
    const auto v = plan::conformance::judge(*c, o, reference);
    r.pass = v.pass;
    // A scheduler's own words (its error line, the start of its stdout) are in the reason: one line
    // of at most ~300 characters with control bytes escaped, for the table and the report alike (an
    // ESC sequence had cleared the terminal, a 5 MB error line became a 5 MB row; helper-77).
    r.reason = one_line(v.reason);
    failed_so_far += v.pass ? 0 : 1;
    rows.push_back(std::move(r));
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int failed = 0;
  std::map<std::string, std::pair<int, int>> by_family;  // family -> (cases, failed)
  for (const Row& r : rows) {
    failed += r.pass ? 0 : 1;
    auto& f = by_family[family(r.c->name)];
    ++f.first;
    f.second += r.pass ? 0 : 1;
  }
  // The table goes to stdout, or to stderr when the report does (--out -), so stdout stays JSON.
  std::FILE* t = a.out_given && a.out == "-" ? stderr : stdout;
  std::fprintf(t, "dcpbench conform: %s on %zu cases from %s (exact plans of %s, timeout %g s per case)\n\n",
              who.c_str(), rows.size(), a.cases.c_str(), reference.empty() ? "none: validity only" : reference.c_str(),
              a.timeout_s);
  if (failed > 0 || a.all) {
    std::fprintf(t, "%s %s %s %s %9s  %s\n", fit("case", 44).c_str(), fit("expect", 10).c_str(), fit("outcome", 10).c_str(),
                "    ", "time", "reason");
    std::fprintf(t, "%s %s %s %s %9s  %s\n", fit("", 44).c_str(), fit("", 10).c_str(), fit("", 10).c_str(), "    ", "ms", "");
    for (const Row& r : rows)
      if (!r.pass || a.all) print_row(t, r);
    std::fprintf(t, "\n");
  }
  std::fprintf(t, "%-20s %7s %7s %7s\n", "family", "cases", "passed", "failed");
  for (const auto& [name, f] : by_family)
    std::fprintf(t, "%-20s %7d %7d %7d\n", name.c_str(), f.first, f.first - f.second, f.second);
  std::fprintf(t, "%-20s %7zu %7zu %7d\n", "total", rows.size(), rows.size() - failed, failed);
  std::fprintf(t, "\ndcpbench conform: %s: %zu passed, %d failed in %.2f s\n", failed ? "FAILED" : "PASSED",
              rows.size() - failed, failed, wall_s);

  if (a.out_given) {
    json rep;
    rep["schema"] = "dcpbench.conform.v1";
    rep["context"] = make_context("cpu", "none", "none", command_line);
    rep["scheduler"] = planner ? json{{"planner", a.planner}} : json{{"command", a.planner_cmd}};
    rep["reference"] = reference.empty() ? json(nullptr) : json(reference);
    rep["cases_dir"] = a.cases;
    rep["timeout_s"] = a.timeout_s;
    rep["total"] = rows.size();
    rep["passed"] = rows.size() - failed;
    rep["failed"] = failed;
    rep["wall_s"] = wall_s;
    json list = json::array();
    for (const Row& r : rows) {
      list.push_back({{"name", r.c->name},
                      {"expect", expect_text(*r.c)},
                      {"outcome", plan::conformance::outcome_name(r.outcome)},
                      {"pass", r.pass},
                      {"reason", r.reason},
                      {"ms", r.ms},
                      {"tags", r.c->tags},
                      {"origin", r.c->origin}});
    }
    rep["cases"] = list;
    write_json_atomic(a.out, rep);
  }
  const int code = failed ? 1 : 0;
  if (leaked) {
    // A planner thread never returned; it may hold the planner. End without running destructors.
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(code);
  }
  return code;
}

}  // namespace

void add_conform_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ConformArgs>();
  CLI::App* cmd = app.add_subcommand(
      "conform", "Run a scheduler on every conformance case (scenarios/conformance/); exit 1 if one fails");
  cmd->add_option("--planner", args->planner, "A built-in planner: " + builtin_planner_list());
  cmd->add_option("--planner-cmd", args->planner_cmd,
                  "An external scheduler: a shell command that reads one case (JSON) on stdin and prints one plan "
                  "(JSON) on stdout, or exits non-zero with one error line on stderr (scenarios/conformance/README.md)");
  cmd->add_option("--cases", args->cases, "Folder of case files (*.json)")->default_str("<source>/scenarios/conformance");
  cmd->add_option("--reference", args->reference,
                  "Whose exact plans the exact cases compare with: megatron-dev | megatron-pr2000 | none (validity only)")
      ->default_val("megatron-dev");
  cmd->add_option("--timeout", args->timeout_s, "Seconds per case; a scheduler still running then fails the case")
      ->default_val(10);
  cmd->add_option("--filter", args->filter, "Only the cases whose name contains TEXT or that carry the tag TEXT");
  cmd->add_flag("--all", args->all, "Print a row for every case, not only the failures");
  CLI::Option* out = cmd->add_option("--out", args->out,
                                     "Write the report (schema dcpbench.conform.v1) here, atomically (a regular file "
                                     "or a new path in an existing folder)");
  cmd->callback([args, &exit_code, out] {
    args->out_given = out->count() > 0;
    std::string line = "dcpbench conform";
    if (!args->planner.empty()) line += " --planner " + args->planner;
    if (!args->planner_cmd.empty()) line += " --planner-cmd '" + args->planner_cmd + "'";
    line += " --cases " + args->cases + " --reference " + args->reference;
    if (!args->filter.empty()) line += " --filter " + args->filter;
    exit_code = run_conform(*args, line);
  });
}

}  // namespace dcp::harness
