// Convergence scenarios (scenarios/converge-*.json; keys in scenarios/SCHEMA.md "Convergence
// scenarios"): the model, the text the documents are cut from, the DP x CP pool, the training
// run, the strategies compared with the single-rank reference, and the scheduler edge cases
// trained as extra steps. Unknown keys and bad values are InputErrors naming file, key and value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/kernels.h"

namespace dcp::harness {

// Most main steps of a convergence run (training.steps, --steps): every step's batch is built up
// front and rank 0 keeps the reference's gradient of every step (452 KB per step on converge-moby,
// 1.13 MB in float32 with its parameters; bounded apart, converge.h kConvergeMaxReferenceGradBytes).
inline constexpr int kConvergeMaxSteps = 10000;

// One extra training step whose batch exercises a scheduler edge case (reference §7, §2.4); it
// starts from the initial model (converge.h).
struct ConvergeEdgeCase {
  std::string name;
  std::string why;                 // what the case exercises, for the output
  std::vector<int64_t> lengths;    // document lengths of the step's batch, cut from the text
  std::optional<int> vpp_group;    // micro-batch count multiple (VPP alignment splits)
};

struct ConvergeScenario {
  std::string file;
  std::string name;
  std::string description;
  model::ModelConfig model;
  // Documents: the chapters of text_dir, cut into runs of whole paragraphs (one paragraph up to a
  // whole chapter), split at max_seqlen tokens (bytes) like a pretraining data pipeline.
  std::string text_dir;
  std::string text_dir_as_written;
  int64_t max_seqlen = 512;
  double whole_chapter_share = 0.1;  // chance a chapter stays one document before the split
  int max_paragraphs = 8;            // otherwise runs of 1..max_paragraphs paragraphs (log-uniform)
  uint64_t data_seed = 1;
  // Pool: N = dp * cp ranks; cp is the static CP size of the static baselines.
  int dp = 1;
  int cp = 8;
  // Training.
  int steps = 50;
  int global_batch = 16;
  int64_t max_seqlen_per_rank = 64;
  model::AdamWHyper adam;
  std::string dtype = "f64";  // f64 | f32
  uint64_t batch_seed = 1;
  int repeat_steps = 0;       // steps of the bitwise repeat run of every strategy (0 = all)
  std::vector<std::string> strategies;
  std::vector<ConvergeEdgeCase> edge_cases;

  int pool() const { return dp * cp; }
};

ConvergeScenario load_converge_scenario(const std::string& path);

}  // namespace dcp::harness
