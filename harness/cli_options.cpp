// See cli_options.h.
#include "harness/cli_options.h"

#include "core/text.h"
#include "plan/planner.h"

namespace dcp::harness {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::optional<std::string> list_error(const std::string& text, bool ints, int64_t lo, int64_t hi) {
  const std::vector<std::string> items = split_list(text);
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty())
      return quote(text) + " has an empty item (item " + std::to_string(i + 1) + " of " +
             std::to_string(items.size()) + "): give the values separated by single commas";
    if (ints)
      if (auto e = int_error(items[i], lo, hi)) return *e;
  }
  return std::nullopt;
}

CLI::Validator list_validator(bool ints, int64_t lo, int64_t hi) {
  return CLI::Validator(
      [ints, lo, hi](std::string& text) {
        const auto e = list_error(text, ints, lo, hi);
        return e ? *e : std::string();
      },
      "", ints ? "int_list" : "name_list");
}

CLI::Option* add_name_list_option(CLI::App* cmd, const std::string& flag, std::vector<std::string>& target,
                                  const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag, [&target](const std::string& text) { target = split_list(text); }, help)
      ->check(list_validator(false));
}

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
  add_int_option(cmd, "--max-seqlen", f.max_seqlen, 1, plan::kMaxTokensPerRank,
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
