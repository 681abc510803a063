// --draws (see draws.h).
#include "harness/draws.h"

#include "core/error.h"
#include "core/text.h"
#include "harness/tune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

namespace dcp::harness {

using nlohmann::json;

double quantile_sorted(const std::vector<double>& sorted, double q) {
  DCP_CHECK(!sorted.empty(), "quantile of no values");
  const double h = (static_cast<double>(sorted.size()) - 1) * std::clamp(q, 0.0, 1.0);
  const size_t lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

json spread_of(const std::vector<std::optional<double>>& per_draw) {
  json values = json::array();
  std::vector<double> s;
  for (const auto& v : per_draw) {
    values.push_back(v ? json(*v) : json());
    if (v) s.push_back(*v);
  }
  json out = {{"values", values}};
  if (!per_draw.empty() && per_draw.front()) out["nominal"] = *per_draw.front();
  if (s.empty()) return out;
  std::sort(s.begin(), s.end());
  out["median"] = quantile_sorted(s, 0.5);
  out["p5"] = quantile_sorted(s, 0.05);
  out["p95"] = quantile_sorted(s, 0.95);
  out["min"] = s.front();
  out["max"] = s.back();
  return out;
}

namespace {

// One draw's figures at one choice of settings: per strategy its speedups (absent when it or the
// reference has an invalid or oom step), which strategies had such steps, and the ranking.
struct DrawFigures {
  std::map<std::string, double> speedup, trimmed;
  std::set<std::string> oom, invalid;
  std::vector<std::string> ranking;
  bool reference_without_numbers = false;  // an oom or invalid step, or no rows (not in the run)
};

DrawFigures figures_of(const std::vector<ResultRow>& rows, const std::vector<std::string>& strategies,
                       const std::string& reference) {
  DrawFigures f;
  bool reference_rows = false;
  for (const auto& r : rows) {
    if (!r.plan_valid) f.invalid.insert(r.strategy);
    else if (r.oom) f.oom.insert(r.strategy);
    reference_rows = reference_rows || r.strategy == reference;
  }
  f.reference_without_numbers = !reference_rows || f.oom.count(reference) || f.invalid.count(reference);
  // The speedups of the table's aggregates (summarize_speedups takes them from aggregate.h), so
  // draw 0 reproduces the table's: only where the strategy and the reference have numbers on
  // every step of the draw.
  SpeedupSummary sum = summarize_speedups(rows, strategies, reference);
  f.speedup = std::move(sum.speedup);
  f.trimmed = std::move(sum.trimmed);
  f.ranking = std::move(sum.ranking);
  return f;
}

json study_of(const std::vector<DrawFigures>& draws, const std::vector<std::string>& strategies) {
  json per = json::object();
  for (const auto& st : strategies) {
    std::vector<std::optional<double>> sp, tr;  // one entry per draw, in draw order
    int oom = 0, invalid = 0;
    for (const auto& d : draws) {
      const auto s = d.speedup.find(st);
      const auto t = d.trimmed.find(st);
      sp.push_back(s != d.speedup.end() ? std::optional<double>(s->second) : std::nullopt);
      tr.push_back(t != d.trimmed.end() ? std::optional<double>(t->second) : std::nullopt);
      oom += d.oom.count(st) ? 1 : 0;
      invalid += d.invalid.count(st) ? 1 : 0;
    }
    per[st] = {{"speedup", spread_of(sp)}, {"trimmed_speedup", spread_of(tr)}, {"oom_draws", oom},
               {"invalid_draws", invalid}};
  }
  // Draw 0's strategies with an oom or invalid step: in the ranking by name only (the table prints
  // them apart, as the sensitivity study's; helper-65), and the draws where the reference has no
  // numbers (which leave every strategy without a speedup there).
  json without = json::array();
  for (const auto& st : strategies)
    if (draws.front().oom.count(st) || draws.front().invalid.count(st)) without.push_back(st);
  int reference_without = 0;
  for (const auto& d : draws) reference_without += d.reference_without_numbers ? 1 : 0;
  int held = 0, first_held = 0;
  const auto& r0 = draws.front().ranking;
  // Draw 0's fastest, if it has numbers there (a ranking whose first has none ranks by name only).
  const bool first_has_numbers = !r0.empty() && std::find(without.begin(), without.end(), r0.front()) == without.end();
  for (const auto& d : draws) {
    held += d.ranking == r0 ? 1 : 0;
    first_held += first_has_numbers && !d.ranking.empty() && d.ranking.front() == r0.front() ? 1 : 0;
  }
  return {{"strategies", per},
          {"ranking", r0},
          {"without_numbers", without},
          {"ranking_held", held},
          {"first_held", first_held},
          {"reference_without_numbers_draws", reference_without},
          {"draws", static_cast<int>(draws.size())}};
}

std::vector<ResultRow> rows_at(const std::vector<ResultRow>& rows, const std::string& setting) {
  std::vector<ResultRow> out;
  for (const auto& r : rows)
    if (r.setting == setting) out.push_back(r);
  return out;
}

}  // namespace

json draw_study(const std::vector<std::vector<ResultRow>>& rows_per_draw, const std::vector<std::string>& strategies,
                const std::string& reference) {
  DCP_CHECK(!rows_per_draw.empty(), "draw_study of no draws");
  std::vector<DrawFigures> figures;
  for (const auto& rows : rows_per_draw) figures.push_back(figures_of(rows, strategies, reference));
  return study_of(figures, strategies);
}

json run_draws(const PreparedScenario& prepared, const RunOptions& options, const plan::PlannerRegistry& registry,
               const std::vector<ResultRow>& own_rows, const std::map<std::string, Setting>& tuned) {
  const Scenario& s = *prepared.scenario;
  const int k = options.draws;
  DCP_CHECK(k >= 2 && k <= kMaxDraws, "run_draws: draws = ", k);
  PreparedScenario p = prepared;  // its batches are redrawn below
  RunOptions quiet = options;
  quiet.detail = false;
  quiet.progress = nullptr;
  quiet.on_row = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<DrawFigures> published, at_tuned;
  published.push_back(figures_of(rows_at(own_rows, "published"), p.strategies, s.reference_strategy));
  if (!tuned.empty()) at_tuned.push_back(figures_of(rows_at(own_rows, "tuned"), p.strategies, s.reference_strategy));
  for (int d = 1; d < k; ++d) {
    // Step numbers stay ints: draws <= kMaxDraws and steps <= 100000 (scenario schema, --steps).
    DCP_CHECK(static_cast<int64_t>(d + 1) * p.steps <= std::numeric_limits<int>::max(), "draw ", d, " of ", p.steps,
              " steps");
    quiet.phase = "--draws: draw " + std::to_string(d + 1) + " of " + std::to_string(k);
    note_progress(quiet.heartbeat, s.name + ", " + quiet.phase + ", sampling the global batches");
    sample_batches(p, d * p.steps);
    std::vector<ResultRow> rows, trows;
    for (const auto& st : p.strategies) {
      auto r = run_strategy(p, p.cm, st, published_setting(s), "published", quiet, registry);
      rows.insert(rows.end(), r.begin(), r.end());
      if (auto it = tuned.find(st); it != tuned.end()) {
        auto t = run_strategy(p, p.cm, st, it->second, "tuned", quiet, registry);
        trows.insert(trows.end(), t.begin(), t.end());
      }
    }
    published.push_back(figures_of(rows, p.strategies, s.reference_strategy));
    if (!tuned.empty()) at_tuned.push_back(figures_of(trows, p.strategies, s.reference_strategy));
    if (d % 10 == 0 || d + 1 == k)
      progress_line(options, "dcpbench run --draws: " + s.name + ": draw " + std::to_string(d + 1) + " of " +
                                 std::to_string(k) + " (" +
                                 fmt("%.1f", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) +
                                 " s)");
  }
  json out = study_of(published, p.strategies);
  out["scenario"] = s.name;
  out["reference"] = s.reference_strategy;
  out["steps_per_draw"] = p.steps;
  if (!tuned.empty()) out["tuned"] = study_of(at_tuned, p.strategies);
  return out;
}

const json* draw_study_at(const json& scenario_element, const std::string& setting) {
  if (!scenario_element.is_object()) return nullptr;
  if (setting == "published") return &scenario_element;
  const auto it = scenario_element.find(setting);
  return it != scenario_element.end() && it->is_object() ? &*it : nullptr;
}

std::vector<std::optional<double>> draw_values(const json& study, const std::string& strategy, const char* which) {
  std::vector<std::optional<double>> out;
  const auto per = study.find("strategies");
  if (per == study.end() || !per->contains(strategy)) return out;
  const json& v = (*per)[strategy];
  if (!v.contains(which) || !v[which].contains("values")) return out;
  for (const auto& x : v[which]["values"]) out.push_back(x.is_number() ? std::optional<double>(x.get<double>()) : std::nullopt);
  return out;
}

json draws_section(int draws, const json& scenarios) {
  return {{"draws", draws},
          {"method", "draw d = steps [d*steps, (d+1)*steps) of the scenario's data stream; draw 0 = the run's own "
                     "rows; published setting, and with --tune each strategy's tuned setting held fixed; p5/p95 "
                     "by linear interpolation between order statistics"},
          {"scenarios", scenarios}};
}

}  // namespace dcp::harness
