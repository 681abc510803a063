// Length sources (where document lengths come from) and the seeded global-batch sampler.
//
// Sources (plain struct LengthSource, built by the *_source functions):
//   * list/file: documents drawn uniformly with replacement from a list of real lengths
//     (read_lengths_file: text, JSON or Megatron .idx);
//   * lognormal: floor(exp(mu + sigma*Z)) (Megatron's astype(int)), clamped to [min_tokens, max_tokens]
//     (ClampMode::clamp, values outside pile up at the bounds) or redrawn until inside
//     (ClampMode::resample, a truncated log-normal). Two parameterisations: mu/sigma of the
//     underlying normal, or the mean of the (unclamped) log-normal: mu = ln(mean) - sigma^2/2
//     (shared/data/lengths/README.md);
//   * quantiles: an empirical inverse CDF given as (p, tokens) points, p ascending from 0 to 1,
//     interpolated linearly in log(tokens) between points;
//   * mixture by token share: component i supplies share s_i of the *tokens*, so it is drawn per
//     document with probability proportional to s_i / mean_i (mean_tokens below);
//   * sequence: an ordered pool of documents read in order, not drawn: step k's sample i is the
//     pool's document first + k * global_batch + j * interleave + r (modulo the pool's size),
//     with r = i / (global_batch / interleave), j = i % (global_batch / interleave). That is the
//     order in which Megatron's sequential sampler (MegatronPretrainingSampler, --dataloader-type
//     single, micro-batch size 1) hands iteration k's samples to `interleave` = DP ranks, each
//     fetching its micro-batches in turn, and in which its packing schedulers number them (global
//     ids rank by rank: data_schedule_utils.py get_batch_and_global_seqlens, 192cbc3554). The
//     seed is not used; a negative step reads the windows before `first` (wrapping round the pool,
//     as Megatron's idx % len(indices) does). Every document must give exactly one sample (none
//     split, dropped or discarded): InputError naming the document otherwise. Mixtures cannot hold
//     one.
// Sampler: step `step` of seed `seed` uses its own stream Rng(hash_u64(seed, step)), so batches
// are deterministic and independent of which steps were drawn before. Documents longer than
// max_seqlen become floor(L / max_seqlen) chunks of max_seqlen plus the rest (if > 0); chunks
// that do not fit in the batch are discarded. Samples shorter than min_seqlen are dropped or
// padded to min_seqlen (ShortPolicy). Every sample is then optionally padded up to a multiple of
// pad_multiple (Megatron pads to 2*dp*cp for dynamic CP). `lengths` hold the padded lengths
// (what planners and the time model see); `real_lengths` the unpadded ones (useful FLOPs).
#pragma once

#include "core/rng.h"
#include "plan/plan.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dcp::data {

enum class SourceKind { list, lognormal, quantiles, mixture, sequence };

// Limits (README "Input limits and errors"): mixtures nest at most kMaxMixtureDepth levels (the mixture
// code recurses once per level); a sample is at most kMaxSampleTokens tokens (2^40, plan's
// kMaxTokensPerRank: sums of a whole batch stay far below 2^63); pad_multiple at most 2^20.
// The global batch is at most plan::kMaxBatchSamples samples, checked before anything is drawn.
inline constexpr int kMaxMixtureDepth = 8;
inline constexpr int64_t kMaxSampleTokens = int64_t{1} << 40;
inline constexpr int64_t kMaxPadMultiple = int64_t{1} << 20;
enum class ClampMode { clamp, resample };

struct QuantilePoint {
  double p = 0;       // cumulative probability in [0, 1]
  double tokens = 0;  // length at that probability (> 0)
};

struct LengthSource {
  SourceKind kind = SourceKind::list;
  std::string name;                 // for labels ("go.txt", "lognormal(mu=6.2,sigma=1.5)")
  std::vector<int64_t> lengths;     // list: the documents
  double mu = 0;                    // lognormal: parameters of ln(L)
  double sigma = 1;
  int64_t min_tokens = 1;           // lognormal: clamp range
  int64_t max_tokens = 0;           // 0 = unbounded
  ClampMode clamp = ClampMode::clamp;
  std::vector<QuantilePoint> quantiles;    // quantiles
  std::vector<LengthSource> components;    // mixture
  std::vector<double> token_shares;        // mixture, same size, normalised to sum 1
  std::shared_ptr<const std::vector<int64_t>> pool;  // sequence: the documents in order (shared:
                                                     // a pool of 10^6 is 8 MB, copies are cheap)
  int64_t first = 0;                // sequence: pool index of step 0's first document
  int interleave = 1;               // sequence: DP ranks of the sampler (1 = plain pool order)
};

LengthSource list_source(std::vector<int64_t> lengths_tokens, std::string name);
LengthSource lengths_file_source(const std::string& path);  // name = the file's base name
LengthSource lognormal_source(double mu, double sigma, int64_t min_tokens, int64_t max_tokens,
                              ClampMode clamp = ClampMode::clamp);
// mean_tokens is the mean of the unclamped log-normal (mu = ln(mean) - sigma^2/2).
LengthSource lognormal_source_from_mean(double mean_tokens, double sigma, int64_t min_tokens,
                                        int64_t max_tokens, ClampMode clamp = ClampMode::clamp);
LengthSource quantile_source(std::vector<QuantilePoint> points, std::string name);
// The documents of `pool` in order (SourceKind::sequence above); throws InputError if the pool is
// empty, a document is < 1 token, first < 0 or interleave < 1.
LengthSource sequence_source(std::vector<int64_t> pool, int64_t first, int interleave, std::string name);
// Pool index (in [0, pool size)) of sample i of step `step` of a sequence source with that global
// batch (which interleave must divide; InputError otherwise).
int64_t sequence_index(const LengthSource& source, int64_t global_batch, int64_t step, int64_t i);
// Throws InputError if a component nests kMaxMixtureDepth mixtures already.
LengthSource mixture_source(std::vector<LengthSource> components, std::vector<double> token_shares);
// Levels of mixture in `source` (0 for a plain source).
int mixture_depth(const LengthSource& source);

// Throws InputError naming the bad parameter.
void validate_source(const LengthSource& source);

// Expected document length (tokens) before splitting/dropping: exact for list; for lognormal the
// closed form of the continuous clamped or truncated distribution (the integer draw, floored, is
// about half a token below it); numeric (4096-point midpoint rule) for quantiles.
double mean_tokens(const LengthSource& source);

// One document length from the source (>= 1); a sequence source's pool is drawn from uniformly.
int64_t draw_length(const LengthSource& source, Rng& rng);

enum class ShortPolicy { drop, pad };

struct SamplerConfig {
  int64_t global_batch = 1;     // samples per step (after splitting)
  int64_t max_seqlen = 0;       // split documents longer than this (0 = never split)
  int64_t min_seqlen = 1;       // samples shorter than this are dropped or padded
  ShortPolicy short_policy = ShortPolicy::drop;
  int64_t pad_multiple = 1;     // round every sample up to a multiple of this
  uint64_t seed = 1234;
  bool drop_long = false;       // documents longer than max_seqlen are dropped, not split (the
                                // prototype's mock SFT dataset keeps only min <= L <= max)
};

void validate_sampler(const SamplerConfig& config);

struct SampledBatch {
  plan::Batch batch;                  // padded lengths, [global_batch]
  std::vector<int64_t> real_lengths;  // unpadded lengths, [global_batch]
  int64_t documents_drawn = 0;
  int64_t documents_split = 0;        // documents longer than max_seqlen
  int64_t samples_dropped = 0;        // shorter than min_seqlen with ShortPolicy::drop, or longer
                                      // than max_seqlen with drop_long
  int64_t chunks_discarded = 0;       // chunks of the last document that did not fit
  int64_t padding_tokens = 0;         // sum(lengths) - sum(real_lengths)
};

// Global batch number `step` (0, 1, ...). Throws InputError if the source cannot produce a
// sample (e.g. every document is below min_seqlen with ShortPolicy::drop after 10^6 draws).
SampledBatch sample_global_batch(const LengthSource& source, const SamplerConfig& config,
                                 int64_t step);

// Splitting and padding of one document, exposed for tests: the sample lengths (real) it yields
// (InputError if that is more than plan::kMaxBatchSamples chunks; the sampler counts, never builds).
std::vector<int64_t> split_document(int64_t length_tokens, int64_t max_seqlen);
int64_t pad_length(int64_t length_tokens, int64_t min_seqlen, int64_t pad_multiple);

}  // namespace dcp::data
