// CLI11 helpers shared by the sub-commands.
//
// add_int_option: an integer flag whose text is checked by dcp::int_error (core/checked_int.h)
// *before* CLI11 converts it, so "-1" for an unsigned, "1e9", "0x10" or 2^63 is an error naming
// the flag and the value ("--seed: \"-1\" is below the minimum 0"), never a silently wrapped
// number. The range is appended to the help text.
// add_int_list_option / add_name_list_option: a comma-separated list flag ("--lengths 1,7,8").
// CLI11's own ->delimiter(',') drops empty items, so "1,,2" would silently read as 1,2; these
// refuse an empty item naming the flag and the text, and check every integer as add_int_option.
#pragma once

#include "core/checked_int.h"
#include "plan/plan.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcp::harness {

template <typename T>
CLI::Option* add_int_option(CLI::App* cmd, const std::string& flag, T& target, int64_t lo, int64_t hi,
                            const std::string& help) {
  const CLI::Validator range(
      [lo, hi](std::string& text) {
        const auto e = int_error(text, lo, hi);
        return e ? *e : std::string();
      },
      "", "int_range");
  return cmd->add_option(flag, target, help + " [" + std::to_string(lo) + ".." + std::to_string(hi) + "]")
      ->check(range);
}

// The first error of a comma-separated list (an empty item, or with `ints` int_error's text for
// the range [lo, hi]), naming the item's position; nullopt if every item is fine.
std::optional<std::string> list_error(const std::string& text, bool ints, int64_t lo = 0, int64_t hi = 0);
// Its items, split at every comma (empty items kept: list_error refuses them).
std::vector<std::string> split_list(const std::string& text);

// The CLI11 check of such a flag's text (list_error).
CLI::Validator list_validator(bool ints, int64_t lo = 0, int64_t hi = 0);

// The list replaces `target` (its default) when the flag is given; one occurrence.
template <typename T>
CLI::Option* add_int_list_option(CLI::App* cmd, const std::string& flag, std::vector<T>& target, int64_t lo,
                                 int64_t hi, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag,
          [&target, flag, lo, hi](const std::string& text) {
            target.clear();
            for (const std::string& item : split_list(text)) target.push_back(static_cast<T>(parse_int(item, lo, hi, flag)));
          },
          help + " [" + std::to_string(lo) + ".." + std::to_string(hi) + "]")
      ->check(list_validator(true, lo, hi));
}
CLI::Option* add_name_list_option(CLI::App* cmd, const std::string& flag, std::vector<std::string>& target,
                                  const std::string& help);

// The plan-config flags shared by `schedule` and `check` (--dp, --cp, --max-seqlen-per-rank,
// --min-cp, --vpp-group, --max-seqlen), one set of ranges and help texts for both.
struct PlanConfigFlags {
  int dp = 0;
  int cp = 0;
  int64_t max_seqlen_per_rank = 0;
  int min_cp = 1;
  int vpp_group = 0;
  int64_t max_seqlen = 0;
};

// Registers the flags; --dp, --cp and --max-seqlen-per-rank are required when `required`, else
// `optional_note` is appended to their help (e.g. "(required for Megatron's format)").
void add_plan_config_flags(CLI::App* cmd, PlanConfigFlags& f, bool required, const std::string& optional_note = "");

// Copies every flag given on the command line into cfg (flags not given leave cfg as it is).
void apply_plan_config_flags(const CLI::App& cmd, const PlanConfigFlags& f, plan::PlanConfig& cfg);

}  // namespace dcp::harness
