// The training data of a convergence run: real text cut into documents of varied length, and
// the global batch of every step (the same for every strategy).
//
// Tokens are bytes (vocab 256). Documents: each chapter file (sorted by name) is split into
// paragraphs at blank lines; with probability whole_chapter_share the chapter stays one
// document, otherwise it is cut into runs of k consecutive paragraphs, k log-uniform in
// [1, max_paragraphs] (floor(exp(u ln(max_paragraphs + 1))), u uniform: as many short runs per
// octave as long ones, so the plans see documents of every CP size);
// every document longer than max_seqlen is split into max_seqlen-token pieces, as a pretraining
// pipeline splits long documents; pieces of fewer than 2 tokens (no target) are dropped. All
// choices come from Rng(data_seed), so the corpus is the same on every rank and run.
// Step batches: global_batch documents drawn without replacement from Rng(hash(batch_seed, step)).
// Edge-case batches: consecutive runs of the corpus text cut to the requested lengths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "harness/converge_scenario.h"

namespace dcp::harness {

struct TextCorpus {
  std::vector<std::vector<int32_t>> documents;
  int64_t bytes = 0;      // text read
  int files = 0;
};

TextCorpus load_text_corpus(const ConvergeScenario& s);

// The batch of main step `step` (0-based).
exec::GlobalBatch step_batch(const TextCorpus& c, const ConvergeScenario& s, int step);

// The batch of an edge case: documents of exactly the given lengths, cut from the corpus text
// starting at document `offset` (so different cases see different text).
exec::GlobalBatch edge_batch(const TextCorpus& c, const std::vector<int64_t>& lengths, int offset);

}  // namespace dcp::harness
