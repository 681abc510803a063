// The measured run (see measured.h).
#include "harness/measured.h"

#include "core/error.h"
#include "core/text.h"
#include "cost/flops.h"

#ifdef DCP_HAVE_CUDA
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "exec/cuda/stage_runner.h"
#include "exec/stage_ops.h"
#endif

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

namespace dcp::harness {

void require_cuda_device(const std::string& what) {
#ifdef DCP_HAVE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    throw InputError(what + " needs a CUDA device, and none is visible on this machine");
#else
  throw InputError(what + " needs a CUDA build (nvcc at /usr/local/cuda, DCP_CUDA=AUTO|ON)");
#endif
}

std::string cuda_device_name() {
#ifdef DCP_HAVE_CUDA
  require_cuda_device("measuring");
  int dev = 0;
  DCP_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  DCP_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return prop.name;
#else
  require_cuda_device("measuring");
  return {};
#endif
}

void require_replayable(const Scenario& s, const cost::CostModel& cm) {
  DCP_REQUIRE(s.cluster.tp == 1, "the GPU replay runs TP1 ranks; ", s.file, " sets cluster.tp=", s.cluster.tp);
  const int64_t d = cm.model.head_dim_or_default();
  DCP_REQUIRE(d == 64 || d == 128, "the GPU replay needs head_dim 64 or 128 (the tensor-core kernels); model ",
              cm.model.name, " of ", s.file, " has ", d);
}

ShareMeasurer cuda_share_measurer() {
#ifdef DCP_HAVE_CUDA
  // One runner per model config (its buffers and cuBLASLt plans live between shares): keyed by every
  // field the replay's shapes depend on, not the name (inline models are all "custom").
  auto runners = std::make_shared<std::map<std::string, std::unique_ptr<exec::StageRunner>>>();
  return [runners](const sim::RankShare& share, const cost::CostModel& cm, int reps, const std::string& label) {
    const cost::ModelConfig& md = cm.model;
    const std::string key = md.name + "/" + std::to_string(md.layers) + "/" + std::to_string(md.hidden) + "/" +
                            std::to_string(md.ffn) + "/" + std::to_string(md.heads) + "/" + std::to_string(md.kv_heads) +
                            "/" + std::to_string(md.head_dim_or_default()) + "/" + std::to_string(md.vocab) + "/" +
                            (md.swiglu ? "swiglu" : "mlp") + (md.layernorm ? "/layernorm" : "/rmsnorm");
    auto& runner = (*runners)[key];
    if (!runner) runner = std::make_unique<exec::StageRunner>(cm.model, attn::Half::bf16);
    std::vector<ShareTiming> out;
    // Micro-batches with the same sequences at the same place of a group of the same size run the
    // same ops: measured once (bshd's and packing's often all are).
    std::map<std::tuple<std::vector<int64_t>, int, int>, ShareTiming> seen;
    for (const auto& m : share.microbatches) {
      const auto key = std::make_tuple(m.lengths, m.cp_size, m.cp_rank);
      auto it = seen.find(key);
      if (it == seen.end()) {
        const exec::StageWork w = exec::stage_ops(cm.model, m.lengths, m.cp_size, m.cp_rank, share.layers,
                                                  share.last_stage, cm.training.recompute_full);
        const std::string name = label + " mb " + std::to_string(m.microbatch) + " (cp " + std::to_string(m.cp_size) + ")";
        const exec::MeasuredMicrobatch t = runner->measure(w, reps, name);
        it = seen.emplace(key, ShareTiming{t.fwd_s, t.bwd_s, t.copy_fwd_s, t.copy_bwd_s}).first;
      }
      out.push_back(it->second);
    }
    return out;
  };
#else
  require_cuda_device("the GPU replay");
  return {};
#endif
}

namespace {

// Sum over the share's micro-batches of 1/k of the sum of f(real length) over its group's samples.
template <class F>
double per_rank_sum(const sim::RankShare& share, std::span<const int64_t> real_lengths, F f) {
  double total = 0;
  for (const auto& m : share.microbatches) {
    double group = 0;
    for (int id : m.samples) {
      DCP_CHECK(id >= 0 && static_cast<size_t>(id) < real_lengths.size(), "rank share: sample ", id,
                " outside the batch of ", real_lengths.size());
      group += f(static_cast<double>(real_lengths[static_cast<size_t>(id)]));
    }
    total += group / m.cp_size;
  }
  return total;
}

}  // namespace

double share_useful_flops(const cost::ModelConfig& model, const sim::RankShare& share,
                          std::span<const int64_t> real_lengths) {
  // Training = 3 x forward (cost/flops.cpp train_flops_coefficients), per layer and for the output
  // layer, so that over all layers and stages the sum is cost::useful_flops of the batch.
  const double layer_lin = 3.0 * cost::fwd_layer_gemm_flops_per_token(model);
  const double layer_sq = 3.0 * cost::fwd_layer_attn_flops_per_token_sq(model);
  const double head = 3.0 * cost::fwd_logits_flops_per_token(model);
  return per_rank_sum(share, real_lengths, [&](double l) {
    return share.layers * (layer_lin * l + layer_sq * l * l) + (share.last_stage ? head * l : 0.0);
  });
}

double share_real_tokens(const sim::RankShare& share, std::span<const int64_t> real_lengths) {
  return per_rank_sum(share, real_lengths, [](double l) { return l; });
}

namespace {

// The numbers of one replay that travel between the processes (summed: only the measuring process
// has non-zero ones).
// Per row: busy_s, fwd_s, bwd_s, ring_copy_s, measured (1 on the measuring process), then per
// micro-batch of the share its kTimesPerMicrobatch numbers ("microbatch_times", below).
constexpr size_t kPacked = 5;
constexpr size_t kTimesPerMicrobatch = 4;  // fwd_s, bwd_s, ring_copy_fwd_s, ring_copy_bwd_s

// Turns a simulated row carrying its "measured" object (with the gathered numbers) into a measured
// row (results.h "Measured rows").
void finish_row(ResultRow& row, const std::string& device) {
  nlohmann::json& m = row.measured;
  const double busy = m.value("busy_s", 0.0), copies = m.value("ring_copy_s", 0.0);
  const double t = busy - copies;
  DCP_CHECK(t > 0, "measured ", row.scenario, " / ", row.strategy, " step ", row.step, ": busy ", busy,
            " s minus ring copies ", copies, " s is not positive");
  const double useful = m.value("useful_flops", 0.0), tokens = m.value("tokens", 0.0);
  m["simulated_step_s"] = row.step_time_s;
  m["simulated_tflops_per_gpu"] = row.tflops_per_gpu;
  m["error"] = m.value("predicted_s", 0.0) / t - 1.0;
  row.source = "measured:" + device;
  row.step_time_s = t;
  row.tflops_per_gpu = useful / t / 1e12;
  row.tokens_per_s_per_gpu = tokens / t;
  row.microbatches = m.value("microbatches", 0);
  // Not measured by one GPU's replay (written as null, results.h); the simulated breakdown of the
  // step does not describe this time.
  row.balance = row.bubble_frac = row.comm_frac = row.plan_efficiency = 0;
  row.lower_bound_s = 0;
  row.compute_s = t;
  row.comm_s = row.overhead_s = row.bubble_s = row.imbalance_s = row.busiest_idle_s = 0;
  row.rank_busy_s.clear();
  row.speedup_vs_packing.reset();
}

}  // namespace

void check_measured_run(const std::vector<Scenario>& scenarios, const RunOptions& options,
                        const MeasureOptions& measure) {
  DCP_REQUIRE(!options.tune, "--tune is not measured: a measured run replays the published settings");
  DCP_REQUIRE(!options.sensitivity, "--sensitivity varies the simulator's parameters; a measured run has none");
  DCP_REQUIRE(measure.reps >= 1, "--reps ", measure.reps, " must be >= 1");
  for (const auto& s : scenarios) {
    const cost::CostModel cm = cost_model_of(s);
    require_replayable(s, cm);
    const int pool = cm.cluster.pool();
    if (measure.rank)
      DCP_REQUIRE(*measure.rank < pool, "--rank ", *measure.rank, " is outside the pool of ", pool,
                  " ranks (dp x cp) of ", s.file);
    if (measure.stage)
      DCP_REQUIRE(*measure.stage < s.cluster.pp, "--stage ", *measure.stage, " is outside the ", s.cluster.pp,
                  " pipeline stages of ", s.file);
  }
}

namespace {

// FNV-1a, for the processes' agreement on their rows and GPU (not a security hash).
uint64_t fnv1a(uint64_t h, const std::string& text) {
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

std::string share_fingerprint(const sim::RankShare& share, const cost::CostModel& cm) {
  const cost::ModelConfig& md = cm.model;
  std::string shape;
  for (const int64_t v : {int64_t{md.layers}, md.hidden, md.ffn, int64_t{md.heads}, int64_t{md.kv_heads},
                          md.head_dim_or_default(), md.vocab, int64_t{md.swiglu}, int64_t{md.tied_embeddings},
                          md.position_embeddings, int64_t{md.linear_bias}, int64_t{md.layernorm},
                          int64_t{cm.training.recompute_full}, int64_t{cm.cluster.pp}, int64_t{cm.cluster.vpp},
                          int64_t{share.layers}, int64_t{share.last_stage}})
    shape += std::to_string(v) + ",";
  uint64_t h = fnv1a(14695981039346656037ull, shape + "|");
  for (const auto& m : share.microbatches) {
    std::string text = std::to_string(m.microbatch) + ":" + std::to_string(m.first_rank) + "," +
                       std::to_string(m.cp_size) + "," + std::to_string(m.cp_rank) + ";";
    for (size_t i = 0; i < m.samples.size(); ++i)
      text += std::to_string(m.samples[i]) + "=" + std::to_string(m.lengths[i]) + " ";
    h = fnv1a(h, text + "|");
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

ResultsFile measure_scenarios(const std::vector<Scenario>& scenarios, RunOptions options,
                              const plan::PlannerRegistry& registry, const MeasureOptions& measure) {
  DCP_CHECK(static_cast<bool>(measure.measurer), "measure_scenarios: no measurer");
  check_measured_run(scenarios, options, measure);  // refused before any planning (exit 2, nothing written)
  const int me = measure.comm ? measure.comm->rank() : 0;
  const int procs = measure.comm ? measure.comm->size() : 1;
  // Every process must make the same rows (same scenarios, options, binary) and replay on the same
  // GPU type, or the sums below mix different rows: agree on a hash of them first.
  const auto agree = [&](int64_t value, const char* what) {
    if (procs <= 1) return;
    std::vector<int64_t> lo{value}, hi{value};
    measure.comm->all_reduce(std::span<int64_t>(lo), comm::ReduceOp::min);
    measure.comm->all_reduce(std::span<int64_t>(hi), comm::ReduceOp::max);
    DCP_REQUIRE(lo[0] == hi[0], "the ", procs, " processes disagree on ", what, " (process ", me, ": ", value,
                "); run the same dcpbench with the same arguments on GPUs of one type");
  };
  {
    uint64_t h = fnv1a(14695981039346656037ull, measure.device);
    for (const auto& s : scenarios) h = fnv1a(h, s.file + "|" + s.name + "|" + std::to_string(s.training.steps));
    h = fnv1a(h, std::to_string(options.steps.value_or(-1)) + "|" + std::to_string(measure.reps) + "|" +
                     std::to_string(measure.rank.value_or(-1)) + "|" + std::to_string(measure.stage.value_or(-1)));
    for (const auto& st : options.strategies) h = fnv1a(h, st);
    agree(static_cast<int64_t>(h >> 1), "the GPU type or the run's inputs");
  }
  // The run's ticker, made here rather than in run_scenarios so the replay lines below share its lock.
  std::optional<Heartbeat> heartbeat;
  if (options.progress && !options.heartbeat) options.heartbeat = &heartbeat.emplace(*options.progress);
  std::ostream* progress = measure.progress;
  size_t index = 0;  // rows with figures, in the order the runner makes them (the same on every process)
  options.on_row = [&](ResultRow& row, const RowSource& src) {
    const int owner = static_cast<int>(index++ % static_cast<size_t>(procs));
    const int pool = src.cm.cluster.pool();
    const int rank = measure.rank ? *measure.rank : sim::busiest_pool_rank(src.step);
    const int stage = measure.stage ? *measure.stage : sim::busiest_stage(src.step, rank, pool);
    const sim::RankShare share = sim::rank_share(src.plan, src.batch, src.cm, rank, stage);
    double predicted = 0, predicted_comm = 0;
    for (const auto& m : share.microbatches) {
      predicted += m.predicted.fwd_s + m.predicted.bwd_s - m.predicted.fwd_comm_s - m.predicted.bwd_comm_s;
      predicted_comm += m.predicted.fwd_comm_s + m.predicted.bwd_comm_s;
    }
    nlohmann::json m = {{"pool_rank", rank},
                        {"pp_stage", stage},
                        {"rank_chosen", measure.rank ? "--rank" : "busiest"},
                        {"stage_chosen", measure.stage ? "--stage" : "busiest of the rank"},
                        {"layers", share.layers},
                        {"last_stage", share.last_stage},
                        {"microbatches", static_cast<int>(share.microbatches.size())},
                        {"reps", measure.reps},
                        {"useful_flops", share_useful_flops(src.cm.model, share, src.real_lengths)},
                        // per GPU of the pipeline as the simulator counts tokens/s/GPU (each token passes
                        // every stage): the share's tokens over the stages
                        {"tokens", share_real_tokens(share, src.real_lengths) / src.cm.cluster.pp},
                        {"share", share_fingerprint(share, src.cm)},
                        {"predicted_s", predicted},
                        {"predicted_cp_comm_s", predicted_comm},
                        {"process", owner},
                        {"busy_s", 0.0},
                        {"fwd_s", 0.0},
                        {"bwd_s", 0.0},
                        {"ring_copy_s", 0.0}};
    // Each micro-batch's times, in the share's order, so that the error per micro-batch can be
    // computed later with any calibration on a machine without the GPU (`share --measured`).
    m["microbatch_times"] = nlohmann::json::array();
    for (size_t k = 0; k < share.microbatches.size(); ++k)
      m["microbatch_times"].push_back(std::vector<double>(kTimesPerMicrobatch, 0.0));
    if (owner == me) {
      const std::string label = row.scenario + " " + row.strategy + " step " + std::to_string(row.step);
      const std::vector<ShareTiming> t = measure.measurer(share, src.cm, measure.reps, label);
      DCP_CHECK(t.size() == share.microbatches.size(), "the measurer returned ", t.size(), " timings for ",
                share.microbatches.size(), " micro-batches");
      double fwd = 0, bwd = 0, copies = 0;
      for (size_t k = 0; k < t.size(); ++k) {
        const ShareTiming& x = t[k];
        fwd += x.fwd_s;
        bwd += x.bwd_s;
        copies += x.copy_fwd_s + x.copy_bwd_s;
        m["microbatch_times"][k] = {x.fwd_s, x.bwd_s, x.copy_fwd_s, x.copy_bwd_s};
      }
      m["busy_s"] = fwd + bwd;
      m["fwd_s"] = fwd;
      m["bwd_s"] = bwd;
      m["ring_copy_s"] = copies;
      if (progress) {
        // One write per line, under the ticker's lock when the ticker writes to the same stream
        // (process 0's stderr): its "still running" lines never land inside this one.
        const std::string line = "dcpbench run --backend cuda: " + label + ": rank " + std::to_string(rank) +
                                 " stage " + std::to_string(stage) + ", " + std::to_string(share.microbatches.size()) +
                                 " micro-batches: " + fmt("%.3f", 1e3 * (fwd + bwd - copies)) + " ms measured (+ " +
                                 fmt("%.3f", 1e3 * copies) + " ms ring copies), " + fmt("%.3f", 1e3 * predicted) +
                                 " ms predicted\n";
        if (options.heartbeat && options.progress == progress) {
          options.heartbeat->print(line);
        } else {
          progress->write(line.data(), static_cast<std::streamsize>(line.size()));
          progress->flush();
        }
      }
    }
    row.measured = std::move(m);
  };
  ResultsFile out = run_scenarios(scenarios, options, registry);
  // Gather: each measured number is non-zero on its measuring process only; one sum over all.
  std::vector<double> packed;
  for (const auto& r : out.rows) {
    if (r.measured.is_null()) continue;
    const bool mine = r.measured.value("process", -1) == me;
    for (const char* k : {"busy_s", "fwd_s", "bwd_s", "ring_copy_s"}) packed.push_back(r.measured.value(k, 0.0));
    packed.push_back(mine ? 1.0 : 0.0);
    for (const auto& times : r.measured.at("microbatch_times"))  // the same count on every process
      for (const auto& v : times) packed.push_back(v.get<double>());
  }
  agree(static_cast<int64_t>(packed.size()), "the number of replayed rows");
  if (measure.comm && procs > 1 && !packed.empty()) measure.comm->all_reduce(std::span<double>(packed));
  size_t i = 0;
  for (auto& r : out.rows) {
    if (r.measured.is_null()) {
      r.source = "measured:" + measure.device;  // invalid or oom: nothing replayed, no figures
      continue;
    }
    DCP_CHECK(packed[i + 4] == 1.0, "measured row ", r.scenario, " / ", r.strategy, " step ", r.step, " was measured ",
              packed[i + 4], " times over the processes");
    r.measured["busy_s"] = packed[i];
    r.measured["fwd_s"] = packed[i + 1];
    r.measured["bwd_s"] = packed[i + 2];
    r.measured["ring_copy_s"] = packed[i + 3];
    i += kPacked;
    for (auto& times : r.measured["microbatch_times"])
      for (auto& v : times) v = packed[i++];
    finish_row(r, measure.device);
  }
  fill_speedups(out.rows, 0);
  out.context["device"] = measure.device + (procs > 1 ? " x " + std::to_string(procs) + " processes" : "");
  return out;
}

}  // namespace dcp::harness
