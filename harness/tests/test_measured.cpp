// The measured run (harness/measured.h) without a GPU: its arithmetic, its rows and the split of
// the rows over processes, with a stand-in measurer that returns times derived from each micro-
// batch's prediction (the GPU replay itself is tested in exec/cuda/tests, label gpu).
//   - share_useful_flops / share_real_tokens over every pool rank and stage add up to the batch's
//     useful FLOPs (DESIGN.md) and tokens, for dynamic and static plans, with PP, VPP and padding;
//   - measured rows: source measured:<device>, step time = replayed busy time minus the ring's
//     copies, TFLOPS = the share's useful FLOPs over it, speedups from measured times, the
//     prediction error, null for what one GPU does not measure; the file validates and reads back;
//   - three processes (threads over the thread communicator) that split the rows give the rows of
//     one process, every row measured exactly once;
//   - what the replay cannot run is refused (exit 2) before any replay.
#include "core/error.h"
#include "comm/thread_comm.h"
#include "core/files.h"
#include "core/json_io.h"
#include "cost/hardware.h"
#include "cost/time_model.h"
#include "harness/evaluation.h"
#include "harness/gate.h"
#include "harness/commands.h"
#include "harness/measured.h"
#include "harness/registry.h"
#include "harness/report.h"
#include "harness/runner.h"
#include "harness/scenario.h"
#include "measured_cases.h"
#include "plan/validate.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

namespace dcp::harness {
namespace {

using nlohmann::json;

// Stand-in measurer: 1.5 x the predicted pass times + 20 us, and 10 us of ring copies per peer
// (so every row differs from its prediction in a known way). Counts its calls.
struct FakeMeasurer {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  ShareMeasurer fn() const {
    auto c = calls;
    return [c](const sim::RankShare& share, const cost::CostModel&, int reps, const std::string&) {
      EXPECT_GE(reps, 1);
      ++*c;
      std::vector<ShareTiming> out;
      for (const auto& m : share.microbatches) {
        ShareTiming t;
        t.copy_fwd_s = 1e-5 * (m.cp_size - 1);
        t.copy_bwd_s = 2e-5 * (m.cp_size - 1);
        t.fwd_s = 1.5 * m.predicted.fwd_s + 2e-5 + t.copy_fwd_s;
        t.bwd_s = 1.5 * m.predicted.bwd_s + t.copy_bwd_s;
        out.push_back(t);
      }
      return out;
    };
  }
};

TEST(Measured, ShareFlopsAndTokensOverAllRanksAndStagesAreTheBatchs) {
  const Scenario s = small_scenario();
  RunOptions opt;
  opt.steps = 1;
  const auto& registry = builtin_planners();
  PreparedScenario p = prepare_scenario(s, opt, registry);
  sample_batches(p);
  const auto& real = p.batches[0].real_lengths;
  const double useful = cost::useful_flops(p.cm.model, real);
  const double tokens = std::accumulate(real.begin(), real.end(), 0.0);
  for (const std::string strategy : {"packing", "bshd", "megatron-dev", "dcp"}) {
    const Setting setting = published_setting(s);
    const cost::CostModel cm = cost_model_at(p.cm, setting);
    const plan::PlanRequest req = plan_request_of(p, cm, strategy, plan_config_of(s, setting), 0, 0, registry);
    const plan::Plan plan = req.planner->plan(req.batch, req.config);
    plan::validate(plan, req.batch, req.config);
    double f = 0, t = 0;
    for (int rank = 0; rank < cm.cluster.pool(); ++rank)
      for (int stage = 0; stage < cm.cluster.pp; ++stage) {
        const sim::RankShare share = sim::rank_share(plan, req.batch, cm, rank, stage);
        const double sf = share_useful_flops(cm.model, share, real);
        EXPECT_GE(sf, 0) << strategy;
        f += sf;
        t += share_real_tokens(share, real);
      }
    // Every sample is in one group; each rank of it gets 1/k on each stage: summed over the pool
    // and the stages (the layers of every stage add up to the model's) it is the batch's.
    EXPECT_NEAR(f / useful, 1.0, 1e-12) << strategy;
    // Tokens: each sample counted once per stage.
    EXPECT_NEAR(t / (tokens * cm.cluster.pp), 1.0, 1e-12) << strategy;
  }
}

TEST(Measured, RowsAreMeasuredRowsOfTheSameRun) {
  const Scenario s = small_scenario();
  const auto& registry = builtin_planners();
  RunOptions opt;
  const ResultsFile simulated = run_scenarios({s}, opt, registry);
  FakeMeasurer fake;
  MeasureOptions m;
  m.measurer = fake.fn();
  m.device = "Fake GPU";
  m.reps = 2;
  const ResultsFile measured = measure_scenarios({s}, opt, registry, m);
  ASSERT_EQ(measured.rows.size(), simulated.rows.size());
  EXPECT_EQ(measured.context.value("device", ""), "Fake GPU");
  int with_figures = 0;
  for (size_t i = 0; i < measured.rows.size(); ++i) {
    const ResultRow& r = measured.rows[i];
    const ResultRow& sim_row = simulated.rows[i];
    ASSERT_EQ(r.strategy, sim_row.strategy);
    ASSERT_EQ(r.step, sim_row.step);
    EXPECT_EQ(r.source, "measured:Fake GPU");
    ASSERT_EQ(r.has_metrics(), sim_row.has_metrics()) << r.strategy;
    if (!r.has_metrics()) continue;
    ++with_figures;
    ASSERT_TRUE(r.measured.is_object());
    const json& x = r.measured;
    // The replayed share's busy time minus the copies is the row's time; the copies are apart.
    const double busy = x.at("busy_s").get<double>(), copies = x.at("ring_copy_s").get<double>();
    EXPECT_NEAR(x.at("fwd_s").get<double>() + x.at("bwd_s").get<double>(), busy, 1e-15);
    EXPECT_DOUBLE_EQ(r.step_time_s, busy - copies);
    EXPECT_DOUBLE_EQ(r.tflops_per_gpu, x.at("useful_flops").get<double>() / r.step_time_s / 1e12);
    EXPECT_DOUBLE_EQ(r.tokens_per_s_per_gpu, x.at("tokens").get<double>() / r.step_time_s);
    EXPECT_EQ(r.microbatches, x.at("microbatches").get<int>());
    // Each micro-batch's times as the replay returned them, in the share's order: they add up to
    // the row's totals.
    const json& times = x.at("microbatch_times");
    ASSERT_EQ(static_cast<int>(times.size()), r.microbatches);
    double fwd = 0, bwd = 0, copy = 0;
    for (const json& t : times) {
      ASSERT_EQ(t.size(), 4u);
      fwd += t[0].get<double>();
      bwd += t[1].get<double>();
      copy += t[2].get<double>() + t[3].get<double>();
      EXPECT_GT(t[0].get<double>(), t[2].get<double>());  // the fake's fwd holds its copies and more
    }
    EXPECT_NEAR(fwd, x.at("fwd_s").get<double>(), 1e-12);
    EXPECT_NEAR(bwd, x.at("bwd_s").get<double>(), 1e-12);
    EXPECT_NEAR(copy, copies, 1e-12);
    // The fake took 1.5 x the prediction (incl. the CP comm the simulator charges) + 20 us per
    // micro-batch: the error is the prediction like for like over that.
    const double pred = x.at("predicted_s").get<double>(), pcomm = x.at("predicted_cp_comm_s").get<double>();
    EXPECT_NEAR(r.step_time_s, 1.5 * (pred + pcomm) + 2e-5 * r.microbatches, 1e-12);
    EXPECT_NEAR(x.at("error").get<double>(), pred / r.step_time_s - 1, 1e-12);
    EXPECT_LT(x.at("error").get<double>(), -0.3);
    // The busiest rank and its busiest stage of the simulated step, and the simulated figures.
    EXPECT_EQ(x.at("rank_chosen"), "busiest");
    EXPECT_DOUBLE_EQ(x.at("simulated_step_s").get<double>(), sim_row.step_time_s);
    EXPECT_GT(sim_row.step_time_s, 0);
    if (r.strategy == "bshd" || r.strategy == "packing") {
      EXPECT_EQ(copies > 0, s.cluster.cp > 1) << r.strategy;  // static CP 2: every group has a peer
    }
  }
  EXPECT_EQ(with_figures, *fake.calls);
  EXPECT_GE(with_figures, 6);
  // Speedups come from the measured times of the same step.
  for (const ResultRow& r : measured.rows) {
    if (!r.has_metrics()) continue;
    const ResultRow* ref = nullptr;
    for (const ResultRow& q : measured.rows)
      if (q.strategy == "packing" && q.step == r.step && q.has_metrics()) ref = &q;
    ASSERT_NE(ref, nullptr);
    ASSERT_TRUE(r.speedup_vs_packing.has_value());
    EXPECT_DOUBLE_EQ(*r.speedup_vs_packing, ref->step_time_s / r.step_time_s);
  }
  // The file: null for what one GPU does not measure, valid, and it reads back.
  const json j = results_to_json(measured);
  EXPECT_TRUE(validate_results(j).empty()) << validate_results(j).front();
  bool saw = false;
  for (const json& row : j["rows"]) {
    if (row["step_time_s"].is_null()) continue;
    saw = true;
    for (const char* k : {"balance", "bubble_frac", "comm_frac", "plan_efficiency"}) EXPECT_TRUE(row[k].is_null()) << k;
    EXPECT_TRUE(row["measured"].is_object());
  }
  EXPECT_TRUE(saw);
  for (const json& a : j["aggregates"]) EXPECT_TRUE(a["plan_efficiency"].is_null() || !a.value("valid", false));
  const ResultRow back = row_from_json(j["rows"][0]);
  EXPECT_EQ(back.measured, measured.rows[0].measured);
  // A null "balance" in a simulated row is still an error.
  json bad = j;
  for (json& row : bad["rows"])
    if (!row["step_time_s"].is_null()) {
      row["source"] = "simulated:x@y";
      break;
    }
  EXPECT_FALSE(validate_results(bad).empty());
  for (const auto& edit : std::vector<std::function<void(json&)>>{
           [](json& t) { t[0][1] = -1.0; }, [](json& t) { t[0].erase(3); }, [](json& t) { t = 5; },
           [](json& t) { t[0][0] = "x"; }}) {
    json bad_times = j;
    for (json& row : bad_times["rows"])
      if (!row["step_time_s"].is_null()) {
        edit(row["measured"]["microbatch_times"]);
        break;
      }
    EXPECT_FALSE(validate_results(bad_times).empty()) << "accepted bad microbatch_times";
  }
  // The table says measured and prints no balance, bubble or bound for these rows.
  std::ostringstream table;
  print_table(table, measured);
  EXPECT_NE(table.str().find("every row was measured"), std::string::npos) << table.str();
  EXPECT_EQ(table.str().find("nothing here was measured"), std::string::npos);
  EXPECT_NE(table.str().find("predicted share"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("(error -"), std::string::npos) << table.str();  // the fake took 1.5x the prediction
}

// A stream whose every write is slow and split in two around a pause (a slow terminal or pipe):
// two threads that write without a common lock overlap whenever their writes meet, which one
// write per line to an ostringstream (too quick to be caught mid-write) practically never showed.
// Counts the writes that began while another was under way, and the ticker's lines.
class SlowStreamBuf : public std::streambuf {
 public:
  std::atomic<int> overlaps{0};
  std::atomic<int> ticker_writes{0};
  std::string text() {
    std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    if (writers_.fetch_add(1) > 0) ++overlaps;
    if (std::string_view(s, static_cast<size_t>(n)).find("still running") != std::string_view::npos) ++ticker_writes;
    append(s, n / 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    append(s + n / 2, n - n / 2);
    --writers_;
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }

 private:
  void append(const char* s, std::streamsize n) {
    std::lock_guard<std::mutex> lock(mutex_);  // (the text itself intact even when writes overlap)
    text_.append(s, static_cast<size_t>(n));
  }
  std::atomic<int> writers_{0};
  std::mutex mutex_;
  std::string text_;
};

// The replay's progress lines and the run's ticker share one stream and one lock: with a ticker
// every millisecond, no replay line is written while a ticker line is (or the reverse), every
// line is whole, and there is one replay line per measured row. Each replay waits for a ticker
// line to begin, so its own line comes while that one is still being written: without the
// common lock they overlap on nearly every row.
TEST(Measured, ReplayLinesAndTheTickerNeverShareALine) {
  const Scenario s = small_scenario();
  SlowStreamBuf buf;
  std::ostream out(&buf);
  FakeMeasurer fake;
  MeasureOptions m;
  // (30 s for all the waits together: a ticker that never prints fails the test below, not slowly)
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  m.measurer = [inner = fake.fn(), &buf, give_up](const sim::RankShare& share, const cost::CostModel& cm, int reps,
                                                  const std::string& label) {
    const int ticks = buf.ticker_writes.load();
    while (buf.ticker_writes.load() == ticks && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    return inner(share, cm, reps, label);
  };
  m.device = "Fake GPU";
  m.progress = &out;
  RunOptions opt;
  opt.progress = &out;
  {
    Heartbeat tick(out, std::chrono::milliseconds(1));
    opt.heartbeat = &tick;
    measure_scenarios({s}, opt, builtin_planners(), m);
  }
  EXPECT_EQ(buf.overlaps.load(), 0) << "writes that began while another was under way";
  std::istringstream lines(buf.text());
  int replays = 0, ticks = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("dcpbench run: still running (", 0) == 0) ++ticks;
    const size_t at = line.find("--backend cuda: ");
    if (at == std::string::npos) continue;
    EXPECT_EQ(line.rfind("dcpbench run --backend cuda: ", 0), 0u) << line;
    EXPECT_EQ(line.find("still running"), std::string::npos) << line;
    ++replays;
  }
  EXPECT_EQ(replays, *fake.calls);
  EXPECT_GE(replays, 6);
  EXPECT_GE(ticks, 1) << "no ticker line: nothing to share a line with";
}

// A measured file is not a simulated one: the gate refuses to compare them (a rank share's rate
// against a whole step's), in either direction, and evaluate refuses it.
TEST(Measured, GateAndEvaluateDoNotTakeMeasuredForSimulated) {
  const Scenario s = small_scenario(R"(["packing", "dcp"])", 1);
  const auto& registry = builtin_planners();
  const ResultsFile simulated = run_scenarios({s}, RunOptions{}, registry);
  FakeMeasurer fake;
  MeasureOptions m;
  m.measurer = fake.fn();
  m.device = "Fake GPU";
  const ResultsFile measured = measure_scenarios({s}, RunOptions{}, registry, m);
  for (const auto& [base, cur] : {std::pair{&simulated, &measured}, std::pair{&measured, &simulated}}) {
    const GateReport g = run_gate(*base, *cur, 0.02);
    ASSERT_EQ(g.findings.size(), 2u);
    for (const auto& f : g.findings) {
      EXPECT_TRUE(f.failed) << f.message;
      EXPECT_NE(f.message.find("not comparable"), std::string::npos) << f.message;
    }
  }
  // evaluate explains simulated steps: it refuses a measured file, naming it.
  try {
    require_simulated(measured, "m.json");
    ADD_FAILURE() << "a measured file passed require_simulated";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("m.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is measured"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_simulated(simulated, "s.json"));
  // Measured against measured compares.
  const GateReport same = run_gate(measured, measured, 0.02);
  for (const auto& f : same.findings) EXPECT_FALSE(f.failed) << f.message;
}

// The charts draw a measured file too (its null balance, bubble and bound included).
TEST(Measured, PlotScriptDrawsAMeasuredFile) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no /usr/bin/python3 with matplotlib (apt-get install python3-matplotlib)";
  namespace fs = std::filesystem;
  const fs::path script = fs::path(__FILE__).parent_path().parent_path() / "plot" / "plot_results.py";
  FakeMeasurer fake;
  MeasureOptions m;
  m.measurer = fake.fn();
  m.device = "Fake GPU";
  const ResultsFile f = measure_scenarios({small_scenario()}, RunOptions{}, builtin_planners(), m);
  const fs::path dir = fs::temp_directory_path() / ("dcp_measured_plot_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_results((dir / "m.json").string(), f);
  const std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + (dir / "m.json").string() + "' --out '" +
                          (dir / "charts").string() + "' >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  int pngs = 0;
  if (fs::exists(dir / "charts"))
    for (const auto& e : fs::directory_iterator(dir / "charts")) pngs += e.path().extension() == ".png";
  EXPECT_GE(pngs, 1);
  fs::remove_all(dir);
}

TEST(Measured, ProcessesSplitTheRowsAndAgree) {
  const Scenario s = small_scenario(R"(["packing", "megatron-dev", "dcp"])", 3);
  const auto& registry = builtin_planners();
  RunOptions opt;
  FakeMeasurer alone;
  MeasureOptions m;
  m.measurer = alone.fn();
  m.device = "Fake GPU";
  const ResultsFile one = measure_scenarios({s}, opt, registry, m);
  constexpr int kProcs = 3;
  std::vector<ResultsFile> files(kProcs);
  std::vector<int> calls(kProcs, 0);
  comm::run_threads(kProcs, [&](comm::Communicator& world) {
    FakeMeasurer mine;
    MeasureOptions mo;
    mo.measurer = mine.fn();
    mo.device = "Fake GPU";
    mo.comm = &world;
    files[static_cast<size_t>(world.rank())] = measure_scenarios({s}, opt, registry, mo);
    calls[static_cast<size_t>(world.rank())] = *mine.calls;
  });
  // Each row replayed once, over all processes; the work is split (no process did it all).
  EXPECT_EQ(std::accumulate(calls.begin(), calls.end(), 0), *alone.calls);
  for (int c : calls) EXPECT_LT(c, *alone.calls);
  for (const ResultsFile& f : files) {
    ASSERT_EQ(f.rows.size(), one.rows.size());
    for (size_t i = 0; i < f.rows.size(); ++i) {
      EXPECT_EQ(f.rows[i].has_metrics(), one.rows[i].has_metrics());
      if (!one.rows[i].has_metrics()) continue;
      EXPECT_EQ(f.rows[i].step_time_s, one.rows[i].step_time_s) << i;  // bitwise: the same numbers, summed with zeros
      EXPECT_EQ(f.rows[i].tflops_per_gpu, one.rows[i].tflops_per_gpu) << i;
      EXPECT_EQ(f.rows[i].measured.at("microbatch_times"), one.rows[i].measured.at("microbatch_times")) << i;
    }
    EXPECT_NE(f.context.value("device", "").find("x 3 processes"), std::string::npos);
  }
}

// Processes that would replay on different GPU types (or make different rows) stop before any
// replay, every one of them.
TEST(Measured, ProcessesThatDisagreeStopBeforeReplaying) {
  const Scenario s = small_scenario(R"(["packing"])", 1);
  std::atomic<int> calls{0};
  std::string message;
  try {
    comm::run_threads(2, [&](comm::Communicator& world) {
      FakeMeasurer mine;
      MeasureOptions mo;
      mo.measurer = mine.fn();
      mo.device = world.rank() == 0 ? "Fake GPU" : "Other GPU";
      mo.comm = &world;
      try {
        measure_scenarios({s}, RunOptions{}, builtin_planners(), mo);
      } catch (...) {
        calls += *mine.calls;
        throw;
      }
    });
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("disagree on the GPU type"), std::string::npos) << message;
  EXPECT_EQ(calls.load(), 0);
}

// `dcpbench share --measured`: a run's replayed times re-predicted with another calibration, no
// GPU. The share is planned as the run planned it (the calibration changes the prediction only),
// the times are the row's, and a share that is not the one measured, a missing row or another
// rank is refused (exit 2).
TEST(Measured, ShareMeasuredRepredictsTheRunsShareWithAnotherCalibration) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dcp_share_measured_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string scenario = (dir / "small.json").string();
  write_output(scenario, small_scenario_doc(R"(["packing", "dcp"])", 1).dump());
  const Scenario s = load_scenario(scenario);
  FakeMeasurer fake;
  MeasureOptions mo;
  mo.measurer = fake.fn();
  mo.device = "Fake GPU";
  RunOptions opt;
  opt.strategies = {"dcp"};
  const ResultsFile measured = measure_scenarios({s}, opt, builtin_planners(), mo);
  const std::string results = (dir / "measured.json").string();
  write_results(results, measured);
  const ResultRow* row = nullptr;
  for (const auto& r : measured.rows)
    if (r.strategy == "dcp" && r.has_metrics()) row = &r;
  ASSERT_NE(row, nullptr);
  // A calibration with twice the peak FLOP/s and half the host floor per layer: every pass
  // shorter (this small model's passes are host-bound).
  nlohmann::json doubled = cost::profile_to_json(cost::hardware_preset("h100-sxm"));
  doubled["name"] = "doubled";
  doubled["peak_flops_per_s"] = 2 * doubled["peak_flops_per_s"].get<double>();
  for (const char* k : {"host_layer_fwd_s", "host_layer_bwd_s"}) doubled[k] = 0.5 * doubled[k].get<double>();
  const std::string calibration = (dir / "doubled.json").string();
  write_output(calibration, doubled.dump());
  const auto share = [&](std::vector<std::string> args) {
    CLI::App app;
    int code = -1;
    add_share_command(app, code);
    args.insert(args.begin(), {"dcpbench", "share", scenario, "--strategy", "dcp", "--measured", results});
    std::vector<const char*> argv;
    for (const auto& x : args) argv.push_back(x.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return code;
  };
  const std::string same = (dir / "same.json").string(), other = (dir / "other.json").string();
  ASSERT_EQ(share({"--out", same}), 0);
  ASSERT_EQ(share({"--out", other, "--calibration", calibration}), 0);
  const nlohmann::json a = read_json_file(same), b = read_json_file(other);
  const nlohmann::json& times = row->measured.at("microbatch_times");
  ASSERT_EQ(a["microbatches"].size(), times.size());
  EXPECT_EQ(a["pool_rank"], row->measured["pool_rank"]);
  EXPECT_EQ(a["pp_stage"], row->measured["pp_stage"]);
  EXPECT_EQ(a["measured_from"], results);
  EXPECT_EQ(a["rank_chosen"], "busiest");  // as the run chose it
  EXPECT_EQ(a["measured_source"], "measured:Fake GPU");
  // The scenario's own calibration predicts what the run predicted: the same error.
  EXPECT_NEAR(a["rank_step_error"].get<double>(), row->measured["error"].get<double>(), 1e-12);
  double pa = 0, pb = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    const nlohmann::json &ma = a["microbatches"][i], &mb = b["microbatches"][i];
    EXPECT_EQ(ma["measured"]["fwd_s"], times[i][0]);
    EXPECT_EQ(ma["measured"]["bwd_s"], times[i][1]);
    EXPECT_EQ(mb["measured"]["fwd_s"], times[i][0]);
    // The same plan (the run's), predicted faster with the doubled peak.
    EXPECT_EQ(ma["samples"], mb["samples"]);
    EXPECT_EQ(ma["cp_size"], mb["cp_size"]);
    EXPECT_LT(mb["predicted"]["fwd_compute_s"].get<double>(), ma["predicted"]["fwd_compute_s"].get<double>());
    pa += ma["measured"]["predicted_no_comm_s"].get<double>();
    pb += mb["measured"]["predicted_no_comm_s"].get<double>();
  }
  EXPECT_LT(pb, pa);
  EXPECT_LT(b["rank_step_error"].get<double>(), a["rank_step_error"].get<double>());
  EXPECT_NE(b["planned_with"].get<std::string>().find("h100-sxm"), std::string::npos);
  EXPECT_NE(b["source"].get<std::string>().find("doubled"), std::string::npos);
  // The attention table of the prediction is named (it moves the numbers; the source label does
  // not say it): the scenario's, or --attention-backend's.
  EXPECT_EQ(a["attention_backend"], s.training.attention_backend);
  const std::string fa2 = (dir / "fa2.json").string();
  ASSERT_EQ(share({"--out", fa2, "--attention-backend", s.training.attention_backend == "fa2" ? "fa3" : "fa2"}), 0);
  const nlohmann::json c = read_json_file(fa2);
  EXPECT_EQ(c["attention_backend"], s.training.attention_backend == "fa2" ? "fa3" : "fa2");
  EXPECT_NE(c["microbatches"][0]["predicted"]["fwd_compute_s"], a["microbatches"][0]["predicted"]["fwd_compute_s"]);
  // Refused: a rank that is not the measured one, a strategy or step without a row, with --measure.
  const int other_rank = (row->measured["pool_rank"].get<int>() + 1) % 4;
  const auto refused = [&](std::vector<std::string> args, const std::string& says) {
    try {
      share(std::move(args));
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({"--rank", std::to_string(other_rank)}, "is not the pool_rank");
  refused({"--step", "1"}, "no measured row of scenario \"small\", strategy \"dcp\", step 1");
  refused({"--measure"}, "are exclusive");
  // The scenario changed since the run: other batches (another seed), or the same micro-batches
  // of a wider model (other work per micro-batch): another share.
  for (const auto& edit : std::vector<std::function<void(nlohmann::json&)>>{
           [](nlohmann::json& d) { d["training"]["seed"] = 6; },
           [](nlohmann::json& d) { d["model"]["ffn"] = 1024; }}) {
    nlohmann::json changed = small_scenario_doc(R"(["packing", "dcp"])", 1);
    edit(changed);
    write_output(scenario, changed.dump());
    refused({}, "measured another share");
  }
  write_output(scenario, small_scenario_doc(R"(["packing", "dcp"])", 1).dump());
  // A row without the fingerprint (or with a place that is not an integer) is refused, not misread.
  ResultsFile edited = measured;
  for (auto& r : edited.rows)
    if (r.strategy == "dcp" && r.has_metrics()) r.measured.erase("share");
  write_results(results, edited);
  refused({}, "has no share fingerprint");
  edited = measured;
  for (auto& r : edited.rows)
    if (r.strategy == "dcp" && r.has_metrics()) r.measured["pool_rank"] = "0";
  write_results(results, edited);
  refused({}, "measured.pool_rank is not a rank or stage number");
  fs::remove_all(dir);
}

TEST(Measured, WhatTheReplayCannotRunIsRefusedFirst) {
  const auto& registry = builtin_planners();
  FakeMeasurer fake;
  MeasureOptions m;
  m.measurer = fake.fn();
  m.device = "Fake GPU";
  RunOptions opt;
  const auto message = [&](const Scenario& s, const MeasureOptions& mo, const RunOptions& o) -> std::string {
    try {
      measure_scenarios({s}, o, registry, mo);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  // Head dim 16: the tensor-core kernels run 64 and 128.
  const Scenario tiny = small_scenario(R"(["packing"])", 1,
                                       R"({"name": "tiny", "layers": 4, "hidden": 64, "ffn": 128, "heads": 4,
                                           "kv_heads": 2, "vocab": 256})");
  EXPECT_NE(message(tiny, m, opt).find("head_dim 64 or 128"), std::string::npos) << message(tiny, m, opt);
  const Scenario s = small_scenario(R"(["packing"])", 1);
  MeasureOptions bad_rank = m;
  bad_rank.rank = 4;  // pool of 4
  EXPECT_NE(message(s, bad_rank, opt).find("--rank 4 is outside the pool of 4"), std::string::npos)
      << message(s, bad_rank, opt);
  MeasureOptions bad_stage = m;
  bad_stage.stage = 2;
  EXPECT_NE(message(s, bad_stage, opt).find("--stage 2 is outside the 2 pipeline stages"), std::string::npos);
  RunOptions tune = opt;
  tune.tune = true;
  EXPECT_NE(message(s, m, tune).find("--tune"), std::string::npos);
  EXPECT_EQ(*fake.calls, 0);  // nothing replayed
  // A chosen rank and stage are what is replayed.
  MeasureOptions chosen = m;
  chosen.rank = 3;
  chosen.stage = 1;
  const ResultsFile f = measure_scenarios({s}, opt, registry, chosen);
  ASSERT_TRUE(f.rows[0].has_metrics());
  EXPECT_EQ(f.rows[0].measured.at("pool_rank"), 3);
  EXPECT_EQ(f.rows[0].measured.at("pp_stage"), 1);
  EXPECT_EQ(f.rows[0].measured.at("rank_chosen"), "--rank");
  EXPECT_TRUE(f.rows[0].measured.at("last_stage").get<bool>());
}

}  // namespace
}  // namespace dcp::harness
