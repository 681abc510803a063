// `dcpbench check`: checks any plan file against the validity rules and the config (DESIGN.md
// "Other commands"), with the one validity check (plan/validate.h).
//   dcpbench check --plan PLAN.json --lengths FILE [--dp D --cp C --max-seqlen-per-rank M]
//                  [--min-cp K] [--vpp-group V] [--max-seqlen S]
// PLAN.json: a dcpbench.plan.v1 file (its own config is used; flags given must match it) or a
// plan in Megatron's format (a JSON list: per micro-batch, per rank, the sample ids, as
// get_groups_and_subsamples returns it; --dp, --cp and --max-seqlen-per-rank are then required).
// A plan.v1 file's "summary" and "pool", where present, must agree with its plan
// (plan::summary_violation). Prints one line. Exit 0: valid; 1: invalid, with the first
// violation; 2: bad input.
#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "data/lengths_file.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/conform.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/validate.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace dcp::harness {

namespace {

struct CheckArgs {
  std::string plan;
  std::string lengths;
  PlanConfigFlags config;
};

int invalid(const std::string& violation) {
  std::printf("dcpbench check: INVALID: %s\n", violation.c_str());
  return 1;
}

int run_check(const CheckArgs& a, const CLI::App& cmd) {
  const nlohmann::json j = read_json_file(a.plan);  // InputError names the file
  plan::Batch batch{data::read_sample_lengths_file(a.lengths, plan::kMaxTokensPerRank)};
  const plan::conformance::Outcome answer = read_plan_answer(j);
  if (answer.kind != plan::conformance::Outcome::kPlan)
    throw InputError(show_path(a.plan) + ": " + answer.message);

  plan::PlanConfig cfg;
  const bool megatron_format = answer.lists.has_value();
  if (megatron_format) {
    for (const char* flag : {"--dp", "--cp", "--max-seqlen-per-rank"})
      DCP_REQUIRE(cmd.count(flag), show_path(a.plan), " is a plan in Megatron's format: ", flag, " is required");
  } else {
    cfg = answer.plan->config;
  }
  apply_plan_config_flags(cmd, a.config, cfg);
  // The plan's own max_seqlen (not a flag given here) that a sample exceeds: the plan does not fit
  // this batch (exit 1), where check_config would blame a --max-seqlen never given (helper-76).
  if (!megatron_format && !cmd.count("--max-seqlen"))
    if (auto v = plan::longer_than_plan_max_seqlen(*answer.plan, batch)) return invalid(*v);
  plan::check_config(batch, cfg);  // a bad flag or length is bad input (exit 2), not an invalid plan

  plan::Plan p;
  if (megatron_format) {
    if (auto v = plan::rank_lists_violation(*answer.lists, cfg.pool())) return invalid(*v);
    p = plan::plan_from_megatron_format(*answer.lists, cfg);  // static where it can only be (helper-84)
  } else {
    p = *answer.plan;
    // A plan made with --max-seqlen records it (plan_json.h), and is checked against it, or against
    // the value asked for here, which must then agree. One without it (written before 2026-12-07, or
    // by another tool) is checked against the value asked for here, never refused for not carrying one.
    if (!p.config.max_seqlen) p.config.max_seqlen = cfg.max_seqlen;  // (plan_from_json read the key)
  }
  if (auto v = plan::find_violation(p, batch, cfg)) return invalid(*v);
  // A plan.v1 file's summary is what readers take its counts from (micro-batches, CP sizes,
  // tokens): one that contradicts the plan was accepted as valid.
  if (!megatron_format)
    if (auto v = plan::summary_violation(j, p, batch)) return invalid(*v);
  std::printf("dcpbench check: valid: %zu micro-batches, %lld samples, pool %d (dp %d x cp %d), M %lld\n",
              p.microbatches.size(), static_cast<long long>(batch.size()), cfg.pool(), cfg.dp, cfg.cp,
              static_cast<long long>(cfg.max_seqlen_per_rank));
  return 0;
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "Check a plan file against the validity rules and the config; exit 1 "
                                              "with the first violation");
  cmd->add_option("--plan", args->plan,
                  "Plan JSON: dcpbench.plan.v1, or Megatron's format (per micro-batch, per rank, the sample ids)")
      ->required();
  cmd->add_option("--lengths", args->lengths,
                  "Sample lengths: text (one integer per line), JSON array, or Megatron .idx")
      ->required();
  add_plan_config_flags(cmd, args->config, false, "(required for Megatron's format)");
  cmd->callback([args, cmd, &exit_code] { exit_code = run_check(*args, *cmd); });
}

}  // namespace dcp::harness
