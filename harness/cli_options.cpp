// See cli_options.h.
#include "harness/cli_options.h"

#include "plan/planner.h"

namespace dcp::harness {

void add_plan_config_flags(CLI::App* cmd, PlanConfigFlags& f, bool required, const std::string& optional_note) {
  const std::string note = required || optional_note.empty() ? "" : " " + optional_note;
  CLI::Option* dp = add_int_option(cmd, "--dp", f.dp, 1, plan::kMaxPool, "Data-parallel size D" + note);
  CLI::Option* cp = add_int_option(cmd, "--cp", f.cp, 1, plan::kMaxPool,
                                   "Static CP size C (dynamic planners use the pool N = D*C)" + note);
  CLI::Option* m = add_int_option(cmd, "--max-seqlen-per-rank", f.max_seqlen_per_rank, 1, plan::kMaxTokensPerRank,
                                  "Token budget per rank M" + note);
  if (required) {
    dp->required();
    cp->required();
    m->required();
  }
  add_int_option(cmd, "--min-cp", f.min_cp, 1, plan::kMaxPool, "Smallest dynamic CP group (power of two)")
      ->default_val(1);
  add_int_option(cmd, "--vpp-group", f.vpp_group, 1, plan::kMaxPool,
                 "Micro-batch count must be a multiple of V (interleaved VPP)");
  add_int_option(cmd, "--max-seqlen", f.max_seqlen, 1, plan::kMaxPool * plan::kMaxTokensPerRank,
                 "Maximum sample length (bshd pads every sample to it)");
}

void apply_plan_config_flags(const CLI::App& cmd, const PlanConfigFlags& f, plan::PlanConfig& cfg) {
  if (cmd.count("--dp")) cfg.dp = f.dp;
  if (cmd.count("--cp")) cfg.cp = f.cp;
  if (cmd.count("--max-seqlen-per-rank")) cfg.max_seqlen_per_rank = f.max_seqlen_per_rank;
  if (cmd.count("--min-cp")) cfg.min_cp = f.min_cp;
  if (cmd.count("--vpp-group")) cfg.vpp_group = f.vpp_group;
  if (cmd.count("--max-seqlen")) cfg.max_seqlen = f.max_seqlen;
}

}  // namespace dcp::harness
