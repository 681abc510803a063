// Length sources and the global-batch sampler (definitions and invariants in dataset.h).
// Log-normal moments: E[X; a <= X <= b] = exp(mu + sigma^2/2) * (Phi(beta - sigma) -
// Phi(alpha - sigma)), alpha = (ln a - mu)/sigma, beta = (ln b - mu)/sigma (standard result).
#include "data/dataset.h"

#include "core/error.h"
#include "core/nvtx.h"
#include "data/lengths_file.h"
#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

namespace dcp::data {
namespace {

double phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Precomputed mixture pick probabilities (cumulative), recursively.
struct Prepared {
  std::vector<double> cum;
  std::vector<Prepared> children;
};

Prepared prepare(const LengthSource& s) {
  Prepared p;
  if (s.kind != SourceKind::mixture) return p;
  double acc = 0;
  for (size_t i = 0; i < s.components.size(); ++i) {
    acc += s.token_shares[i] / mean_tokens(s.components[i]);
    p.cum.push_back(acc);
    p.children.push_back(prepare(s.components[i]));
  }
  for (double& c : p.cum) c /= acc;
  return p;
}

int64_t draw(const LengthSource& s, Rng& rng, const Prepared& prep) {
  switch (s.kind) {
    case SourceKind::list:
      return s.lengths[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(s.lengths.size()) - 1))];
    case SourceKind::sequence:
      return (*s.pool)[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(s.pool->size()) - 1))];
    case SourceKind::lognormal: {
      const double hi = s.max_tokens > 0 ? static_cast<double>(s.max_tokens)
                                         : std::numeric_limits<double>::infinity();
      for (int tries = 0; tries < 1000000; ++tries) {
        // Truncated to an integer like Megatron's generate_lognormal_samples (np.clip, then
        // astype(int): 192cbc3554 megatron/training/datasets/sft_dataset.py:277-281); floor and
        // the clamp to integer bounds commute. (Until 2026-11-28 rounded: +0.5 token a sample.)
        const double x = std::floor(rng.lognormal(s.mu, s.sigma));
        if (s.clamp == ClampMode::clamp)
          return static_cast<int64_t>(std::clamp(x, static_cast<double>(s.min_tokens), hi));
        if (x >= static_cast<double>(s.min_tokens) && x <= hi) return static_cast<int64_t>(x);
      }
      throw InputError(s.name + ": truncated log-normal produced no value in [" +
                       std::to_string(s.min_tokens) + ", " + std::to_string(s.max_tokens) +
                       "] in 10^6 draws");
    }
    case SourceKind::quantiles: {
      const double u = rng.uniform();
      const auto& q = s.quantiles;
      size_t i = 1;
      while (i + 1 < q.size() && q[i].p <= u) ++i;
      const double span = q[i].p - q[i - 1].p;
      const double t = span > 0 ? std::clamp((u - q[i - 1].p) / span, 0.0, 1.0) : 1.0;
      const double lx = std::log(q[i - 1].tokens) + t * (std::log(q[i].tokens) - std::log(q[i - 1].tokens));
      return std::max<int64_t>(1, std::llround(std::exp(lx)));
    }
    case SourceKind::mixture: {
      const double u = rng.uniform();
      size_t i = 0;
      while (i + 1 < prep.cum.size() && prep.cum[i] <= u) ++i;
      return draw(s.components[i], rng, prep.children[i]);
    }
  }
  DCP_FAIL("unknown source kind");
}

std::string fmt(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace

LengthSource list_source(std::vector<int64_t> lengths, std::string name) {
  LengthSource s;
  s.kind = SourceKind::list;
  s.name = std::move(name);
  s.lengths = std::move(lengths);
  validate_source(s);
  return s;
}

LengthSource lengths_file_source(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return list_source(read_lengths_file(path), slash == std::string::npos ? path : path.substr(slash + 1));
}

LengthSource lognormal_source(double mu, double sigma, int64_t min_tokens, int64_t max_tokens,
                              ClampMode clamp) {
  LengthSource s;
  s.kind = SourceKind::lognormal;
  s.mu = mu;
  s.sigma = sigma;
  s.min_tokens = min_tokens;
  s.max_tokens = max_tokens;
  s.clamp = clamp;
  s.name = "lognormal(mu=" + fmt(mu) + ",sigma=" + fmt(sigma) + "," + std::to_string(min_tokens) +
           ".." + std::to_string(max_tokens) + (clamp == ClampMode::clamp ? ",clamp)" : ",resample)");
  validate_source(s);
  return s;
}

LengthSource lognormal_source_from_mean(double mean, double sigma, int64_t min_tokens,
                                        int64_t max_tokens, ClampMode clamp) {
  DCP_REQUIRE(mean > 0, "lognormal: \"mean\"=", mean, " must be > 0");
  return lognormal_source(std::log(mean) - sigma * sigma / 2, sigma, min_tokens, max_tokens, clamp);
}

LengthSource quantile_source(std::vector<QuantilePoint> points, std::string name) {
  LengthSource s;
  s.kind = SourceKind::quantiles;
  s.name = std::move(name);
  s.quantiles = std::move(points);
  validate_source(s);
  return s;
}

LengthSource sequence_source(std::vector<int64_t> pool, int64_t first, int interleave, std::string name) {
  for (size_t i = 0; i < pool.size(); ++i)
    DCP_REQUIRE(pool[i] >= 1, name, ": document ", i, " has ", pool[i], " tokens, must be >= 1");
  LengthSource s;
  s.kind = SourceKind::sequence;
  s.name = std::move(name);
  s.pool = std::make_shared<const std::vector<int64_t>>(std::move(pool));
  s.first = first;
  s.interleave = interleave;
  validate_source(s);
  return s;
}

int64_t sequence_index(const LengthSource& s, int64_t global_batch, int64_t step, int64_t i) {
  DCP_CHECK(s.kind == SourceKind::sequence && s.pool && !s.pool->empty(), "sequence_index of a non-sequence source");
  DCP_REQUIRE(global_batch % s.interleave == 0, s.name, ": the global batch of ", global_batch,
              " samples is not a multiple of its ", s.interleave, " DP ranks (micro-batch size 1)");
  DCP_CHECK(i >= 0 && i < global_batch, "sequence_index: sample ", i, " of ", global_batch);
  const int64_t per_rank = global_batch / s.interleave;
  const int64_t n = static_cast<int64_t>(s.pool->size());
  // (first + step * G + j * dp + r) mod n, in steps that stay in range: |step| * G is at most
  // 2^31 * 2^18 (plan::kMaxBatchSamples), far below 2^63.
  const int64_t at = (s.first % n + (step % n) * (global_batch % n) % n + (i % per_rank) * s.interleave + i / per_rank) % n;
  return at < 0 ? at + n : at;
}

int mixture_depth(const LengthSource& s) {
  if (s.kind != SourceKind::mixture) return 0;
  int d = 0;
  for (const auto& c : s.components) d = std::max(d, mixture_depth(c));
  return d + 1;
}

LengthSource mixture_source(std::vector<LengthSource> components, std::vector<double> shares) {
  for (const auto& c : components)
    DCP_REQUIRE(mixture_depth(c) < kMaxMixtureDepth, "mixture: nested deeper than the limit of ",
                kMaxMixtureDepth, " levels");
  LengthSource s;
  s.kind = SourceKind::mixture;
  s.components = std::move(components);
  s.token_shares = std::move(shares);
  DCP_REQUIRE(!s.components.empty() && s.components.size() == s.token_shares.size(),
              "mixture: ", s.components.size(), " components but ", s.token_shares.size(),
              " token shares");
  const double total = std::accumulate(s.token_shares.begin(), s.token_shares.end(), 0.0);
  DCP_REQUIRE(total > 0, "mixture: token shares sum to ", total);
  s.name = "mixture(";
  for (size_t i = 0; i < s.components.size(); ++i) {
    s.token_shares[i] /= total;
    s.name += (i ? "," : "") + s.components[i].name + ":" + fmt(s.token_shares[i]);
  }
  s.name += ")";
  validate_source(s);
  return s;
}

void validate_source(const LengthSource& s) {
  switch (s.kind) {
    case SourceKind::list:
      DCP_REQUIRE(!s.lengths.empty(), s.name, ": no document lengths");
      for (size_t i = 0; i < s.lengths.size(); ++i)
        DCP_REQUIRE(s.lengths[i] >= 1, s.name, ": length[", i, "]=", s.lengths[i], " must be >= 1");
      return;
    case SourceKind::lognormal:
      DCP_REQUIRE(std::isfinite(s.mu), "lognormal: \"mu\"=", s.mu, " must be finite");
      DCP_REQUIRE(s.sigma > 0 && std::isfinite(s.sigma), "lognormal: \"sigma\"=", s.sigma,
                  " must be > 0");
      DCP_REQUIRE(s.min_tokens >= 1, "lognormal: \"min\"=", s.min_tokens, " must be >= 1");
      DCP_REQUIRE(s.max_tokens == 0 || s.max_tokens >= s.min_tokens, "lognormal: \"max\"=",
                  s.max_tokens, " is below \"min\"=", s.min_tokens);
      return;
    case SourceKind::quantiles: {
      const auto& q = s.quantiles;
      DCP_REQUIRE(q.size() >= 2, s.name, ": a quantile table needs >= 2 points, got ", q.size());
      DCP_REQUIRE(q.front().p == 0.0 && q.back().p == 1.0, s.name,
                  ": quantile p must start at 0 and end at 1 (got ", q.front().p, " .. ", q.back().p, ")");
      for (size_t i = 0; i < q.size(); ++i) {
        DCP_REQUIRE(q[i].tokens > 0, s.name, ": quantile[", i, "] tokens=", q[i].tokens, " must be > 0");
        if (i > 0)
          DCP_REQUIRE(q[i].p > q[i - 1].p && q[i].tokens >= q[i - 1].tokens, s.name, ": quantile[", i,
                      "] (p=", q[i].p, ", tokens=", q[i].tokens, ") is not above the previous point");
      }
      return;
    }
    case SourceKind::sequence:
      // The documents were checked (>= 1) when the pool was made (sequence_source): it is const.
      DCP_REQUIRE(s.pool && !s.pool->empty(), s.name, ": no documents in the pool");
      DCP_REQUIRE(s.first >= 0, s.name, ": first document ", s.first, " must be >= 0");
      DCP_REQUIRE(s.interleave >= 1, s.name, ": interleave ", s.interleave, " must be >= 1");
      return;
    case SourceKind::mixture:
      DCP_REQUIRE(!s.components.empty() && s.components.size() == s.token_shares.size(),
                  "mixture: components and token shares differ in size");
      for (size_t i = 0; i < s.components.size(); ++i) {
        DCP_REQUIRE(s.components[i].kind != SourceKind::sequence, "mixture: component ", i,
                    " is an ordered sequence of documents, which a mixture cannot draw from in order");
        DCP_REQUIRE(s.token_shares[i] >= 0, "mixture: token share[", i, "]=", s.token_shares[i],
                    " must be >= 0");
        validate_source(s.components[i]);
      }
      return;
  }
}

double mean_tokens(const LengthSource& s) {
  switch (s.kind) {
    case SourceKind::list:
      return std::accumulate(s.lengths.begin(), s.lengths.end(), 0.0) / static_cast<double>(s.lengths.size());
    case SourceKind::sequence:
      return std::accumulate(s.pool->begin(), s.pool->end(), 0.0) / static_cast<double>(s.pool->size());
    case SourceKind::lognormal: {
      const double a = static_cast<double>(s.min_tokens);
      const double alpha = (std::log(a) - s.mu) / s.sigma;
      const double beta = s.max_tokens > 0 ? (std::log(static_cast<double>(s.max_tokens)) - s.mu) / s.sigma
                                           : std::numeric_limits<double>::infinity();
      const double inside = std::exp(s.mu + s.sigma * s.sigma / 2) * (phi(beta - s.sigma) - phi(alpha - s.sigma));
      if (s.clamp == ClampMode::resample) return inside / (phi(beta) - phi(alpha));
      const double upper = s.max_tokens > 0 ? static_cast<double>(s.max_tokens) * (1 - phi(beta)) : 0.0;
      return a * phi(alpha) + upper + inside;
    }
    case SourceKind::quantiles: {
      constexpr int kSteps = 4096;
      double acc = 0;
      const auto& q = s.quantiles;
      size_t i = 1;
      for (int k = 0; k < kSteps; ++k) {
        const double u = (k + 0.5) / kSteps;
        while (i + 1 < q.size() && q[i].p <= u) ++i;
        const double t = (u - q[i - 1].p) / (q[i].p - q[i - 1].p);
        acc += std::exp(std::log(q[i - 1].tokens) + t * (std::log(q[i].tokens) - std::log(q[i - 1].tokens)));
      }
      return acc / kSteps;
    }
    case SourceKind::mixture: {
      // Documents: P(i) ~ share_i / mean_i, so E[L] = 1 / sum_i(share_i / mean_i).
      double inv = 0;
      for (size_t i = 0; i < s.components.size(); ++i) inv += s.token_shares[i] / mean_tokens(s.components[i]);
      return 1.0 / inv;
    }
  }
  DCP_FAIL("unknown source kind");
}

int64_t draw_length(const LengthSource& source, Rng& rng) { return draw(source, rng, prepare(source)); }

void validate_sampler(const SamplerConfig& c) {
  DCP_REQUIRE(c.global_batch >= 1, "\"global_batch\"=", c.global_batch, " must be >= 1");
  DCP_REQUIRE(c.global_batch <= plan::kMaxBatchSamples, "\"global_batch\"=", c.global_batch,
              " is above the limit of ", plan::kMaxBatchSamples, " samples per global batch");
  DCP_REQUIRE(c.max_seqlen <= kMaxSampleTokens, "\"max_seqlen\"=", c.max_seqlen, " is above the limit of ",
              kMaxSampleTokens, " tokens");
  DCP_REQUIRE(c.pad_multiple <= kMaxPadMultiple, "\"pad_multiple\"=", c.pad_multiple,
              " is above the limit of ", kMaxPadMultiple);
  DCP_REQUIRE(c.max_seqlen >= 0, "\"max_seqlen\"=", c.max_seqlen, " must be >= 0");
  DCP_REQUIRE(c.min_seqlen >= 1, "\"min_seqlen\"=", c.min_seqlen, " must be >= 1");
  DCP_REQUIRE(c.max_seqlen == 0 || c.min_seqlen <= c.max_seqlen, "\"min_seqlen\"=", c.min_seqlen,
              " is above \"max_seqlen\"=", c.max_seqlen);
  DCP_REQUIRE(c.pad_multiple >= 1, "\"pad_multiple\"=", c.pad_multiple, " must be >= 1");
}

std::vector<int64_t> split_document(int64_t length, int64_t max_seqlen) {
  DCP_CHECK(length >= 1, "document length ", length);
  if (max_seqlen <= 0 || length <= max_seqlen) return {length};
  DCP_REQUIRE(length / max_seqlen <= plan::kMaxBatchSamples, "document of ", length, " tokens splits into ",
              length / max_seqlen, " chunks of ", max_seqlen, ", more than the limit of ", plan::kMaxBatchSamples);
  std::vector<int64_t> out(static_cast<size_t>(length / max_seqlen), max_seqlen);
  if (length % max_seqlen) out.push_back(length % max_seqlen);
  return out;
}

int64_t pad_length(int64_t length, int64_t min_seqlen, int64_t multiple) {
  const int64_t l = std::max(length, min_seqlen);
  return (l + multiple - 1) / multiple * multiple;
}

SampledBatch sample_global_batch(const LengthSource& source, const SamplerConfig& c, int64_t step) {
  DCP_NVTX_RANGE();
  validate_sampler(c);
  validate_source(source);
  SampledBatch out;
  const auto g = static_cast<size_t>(c.global_batch);
  if (source.kind == SourceKind::sequence) {
    // In order, one sample per document (dataset.h): a document the rules would split, drop or
    // leave out of the batch would shift every later window, which Megatron's sampler never does.
    out.batch.lengths.reserve(g);
    out.real_lengths.reserve(g);
    for (int64_t i = 0; i < c.global_batch; ++i) {
      const int64_t at = sequence_index(source, c.global_batch, step, i);
      const int64_t len = (*source.pool)[static_cast<size_t>(at)];
      DCP_REQUIRE(c.max_seqlen == 0 || len <= c.max_seqlen, source.name, ": document ", at, " (step ", step,
                  ", sample ", i, ") has ", len, " tokens, above max_seqlen=", c.max_seqlen,
                  "; an ordered source replays one sample per document and cannot split or drop it");
      DCP_REQUIRE(len >= c.min_seqlen || c.short_policy == ShortPolicy::pad, source.name, ": document ", at,
                  " (step ", step, ", sample ", i, ") has ", len, " tokens, below min_seqlen=", c.min_seqlen,
                  "; an ordered source replays one sample per document and cannot drop it (short: pad)");
      const int64_t padded = pad_length(len, c.min_seqlen, c.pad_multiple);
      out.real_lengths.push_back(len);
      out.batch.lengths.push_back(padded);
      out.padding_tokens += padded - len;
    }
    out.documents_drawn = c.global_batch;
    return out;
  }
  const Prepared prep = prepare(source);
  Rng rng(hash_u64(c.seed, static_cast<uint64_t>(step)));
  out.batch.lengths.reserve(g);
  out.real_lengths.reserve(g);
  const int64_t max_draws = 1000000 + 1000 * c.global_batch;
  int64_t dropped_long = 0;  // by drop_long (the rest of samples_dropped: shorter than min_seqlen)
  while (out.real_lengths.size() < g) {
    DCP_REQUIRE(out.documents_drawn < max_draws, source.name, ": only ", out.real_lengths.size(), " of ",
                c.global_batch, " samples after ", out.documents_drawn, " documents (",
                out.samples_dropped - dropped_long, " dropped as shorter than min_seqlen=", c.min_seqlen, ", ",
                dropped_long, " as longer than max_seqlen=", c.max_seqlen, c.drop_long ? " with long: drop)" : ")");
    const int64_t len = draw(source, rng, prep);
    ++out.documents_drawn;
    if (c.drop_long && c.max_seqlen > 0 && len > c.max_seqlen) {
      ++out.samples_dropped;
      ++dropped_long;
      continue;
    }
    // The chunks of split_document(len, max_seqlen), counted, not built: a 10^12-token document
    // with max_seqlen 1 must cost only the chunks the batch takes (the rest are counted as
    // discarded). Full chunks (max_seqlen >= min_seqlen) are never dropped as short.
    const int64_t n_full = (c.max_seqlen > 0 && len > c.max_seqlen) ? len / c.max_seqlen : 0;
    const int64_t rest = n_full > 0 ? len % c.max_seqlen : len;
    const int64_t n_pieces = n_full + (rest > 0 ? 1 : 0);
    if (n_pieces > 1) ++out.documents_split;
    for (int64_t k = 0; k < n_pieces; ++k) {
      if (out.real_lengths.size() == g) {
        out.chunks_discarded += n_pieces - k;
        break;
      }
      const int64_t piece = k < n_full ? c.max_seqlen : rest;
      if (piece < c.min_seqlen && c.short_policy == ShortPolicy::drop) {
        ++out.samples_dropped;
        continue;
      }
      DCP_REQUIRE(piece <= kMaxSampleTokens, source.name, ": a sample of ", piece,
                  " tokens is over the limit of ", kMaxSampleTokens, " (set max_seqlen to split documents)");
      const int64_t padded = pad_length(piece, c.min_seqlen, c.pad_multiple);
      out.real_lengths.push_back(piece);
      out.batch.lengths.push_back(padded);
      out.padding_tokens += padded - piece;
    }
  }
  return out;
}

}  // namespace dcp::data
