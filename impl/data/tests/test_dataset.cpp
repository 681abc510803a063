// Tests of length sources (moments against closed forms) and the global-batch sampler
// (splitting, dropping, padding, determinism).
#include "core/error.h"
#include "data/dataset.h"
#include "data/numpy_legacy.h"
#include "plan/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace dcp::data {
namespace {

double sample_mean(const LengthSource& s, int n, uint64_t seed) {
  Rng rng(seed);
  double acc = 0;
  for (int i = 0; i < n; ++i) acc += static_cast<double>(draw_length(s, rng));
  return acc / n;
}

TEST(LengthSource, LognormalFromMeanMatchesItsMoments) {
  // Unbounded above, min 1: the clamp barely matters; mean must be ~1024 and the median
  // exp(mu) = 1024 * exp(-sigma^2/2).
  const auto s = lognormal_source_from_mean(1024, 0.5, 1, 0);
  EXPECT_NEAR(s.mu, std::log(1024.0) - 0.125, 1e-12);
  EXPECT_NEAR(mean_tokens(s), 1024, 1.0);
  EXPECT_NEAR(sample_mean(s, 200000, 7), 1024, 1024 * 0.01);
  Rng rng(3);
  std::vector<int64_t> v(100001);
  for (auto& x : v) x = draw_length(s, rng);
  std::nth_element(v.begin(), v.begin() + 50000, v.end());
  EXPECT_NEAR(static_cast<double>(v[50000]), 1024 * std::exp(-0.125), 10);
}

TEST(LengthSource, ClampAndResampleMeansMatchClosedForm) {
  // Megatron's DCP example: lognormal 128..8192, mean 1024, sigma 1.5 (heavy clamping).
  const auto clamp = lognormal_source_from_mean(1024, 1.5, 128, 8192, ClampMode::clamp);
  const auto trunc = lognormal_source_from_mean(1024, 1.5, 128, 8192, ClampMode::resample);
  const double mc = mean_tokens(clamp), mt = mean_tokens(trunc);
  EXPECT_LT(mc, 1024);  // the tail above 8192 is cut
  EXPECT_NE(mc, mt);
  EXPECT_NEAR(sample_mean(clamp, 200000, 11), mc, mc * 0.01);
  EXPECT_NEAR(sample_mean(trunc, 200000, 12), mt, mt * 0.01);
  Rng rng(5);
  int at_min = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t l = draw_length(clamp, rng);
    ASSERT_GE(l, 128);
    ASSERT_LE(l, 8192);
    at_min += l == 128;
  }
  EXPECT_GT(at_min, 500);  // P(X < 128) is ~ 12% for these parameters
}

TEST(LengthSource, QuantileTableInterpolatesInLogSpace) {
  const auto s = quantile_source({{0, 100}, {0.5, 1000}, {1, 10000}}, "q");
  // Mean of exp(uniform(ln 100, ln 10000)) = (10000 - 100) / ln(100).
  EXPECT_NEAR(mean_tokens(s), 9900 / std::log(100.0), 1.0);
  EXPECT_NEAR(sample_mean(s, 200000, 9), mean_tokens(s), mean_tokens(s) * 0.01);
  EXPECT_THROW(quantile_source({{0.1, 100}, {1, 200}}, "bad"), InputError);
  EXPECT_THROW(quantile_source({{0, 300}, {1, 200}}, "bad"), InputError);
}

TEST(LengthSource, MixtureHonoursTokenShares) {
  // Short (100) and long (10000) documents with half of the tokens each: one long document
  // per 100 short ones.
  const auto s = mixture_source({list_source({100}, "short"), list_source({10000}, "long")}, {1, 1});
  EXPECT_NEAR(mean_tokens(s), 1.0 / (0.5 / 100 + 0.5 / 10000), 1e-9);
  Rng rng(13);
  double short_tokens = 0, long_tokens = 0;
  for (int i = 0; i < 400000; ++i) {
    const int64_t l = draw_length(s, rng);
    (l == 100 ? short_tokens : long_tokens) += static_cast<double>(l);
  }
  EXPECT_NEAR(short_tokens / (short_tokens + long_tokens), 0.5, 0.02);
  EXPECT_THROW(mixture_source({list_source({1}, "a")}, {1, 2}), InputError);
}

TEST(Sampler, SplitsLongDocuments) {
  EXPECT_EQ(split_document(10, 4), (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(split_document(8, 4), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(split_document(3, 4), (std::vector<int64_t>{3}));
  EXPECT_EQ(split_document(300000, 0), (std::vector<int64_t>{300000}));
  SamplerConfig c;
  c.global_batch = 7;
  c.max_seqlen = 4;
  const auto b = sample_global_batch(list_source({10}, "ten"), c, 0);
  // 10 -> 4,4,2 per document: 3 documents give 9 pieces, 2 discarded.
  EXPECT_EQ(b.real_lengths, (std::vector<int64_t>{4, 4, 2, 4, 4, 2, 4}));
  EXPECT_EQ(b.documents_drawn, 3);
  EXPECT_EQ(b.documents_split, 3);
  EXPECT_EQ(b.chunks_discarded, 2);
}

TEST(Sampler, DropsOrPadsShortSamples) {
  SamplerConfig c;
  c.global_batch = 1000;
  c.min_seqlen = 256;
  const auto src = list_source({100, 300}, "two");
  const auto dropped = sample_global_batch(src, c, 0);
  EXPECT_TRUE(std::all_of(dropped.real_lengths.begin(), dropped.real_lengths.end(),
                          [](int64_t l) { return l == 300; }));
  EXPECT_GT(dropped.samples_dropped, 300);
  EXPECT_EQ(dropped.padding_tokens, 0);
  c.short_policy = ShortPolicy::pad;
  const auto padded = sample_global_batch(src, c, 0);
  EXPECT_EQ(padded.samples_dropped, 0);
  for (size_t i = 0; i < padded.real_lengths.size(); ++i) {
    EXPECT_EQ(padded.batch.lengths[i], padded.real_lengths[i] == 100 ? 256 : 300);
  }
  EXPECT_GT(padded.padding_tokens, 0);
  // Every document below min_seqlen and dropped: a clear error, not a hang.
  c.short_policy = ShortPolicy::drop;
  c.global_batch = 1;
  EXPECT_THROW(sample_global_batch(list_source({10}, "tiny"), c, 0), InputError);
  // The message says what dropped them: min_seqlen here, long: drop below (it blamed min_seqlen
  // for both).
  const auto message = [](const LengthSource& src, const SamplerConfig& cfg) -> std::string {
    try {
      sample_global_batch(src, cfg, 0);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(sampled)";
  };
  EXPECT_NE(message(list_source({10}, "tiny"), c).find("1001000 dropped as shorter than min_seqlen=256, 0 as longer"),
            std::string::npos)
      << message(list_source({10}, "tiny"), c);
  c.min_seqlen = 1;
  c.max_seqlen = 8192;
  c.drop_long = true;
  EXPECT_NE(message(list_source({100000}, "long"), c)
                .find("0 dropped as shorter than min_seqlen=1, 1001000 as longer than max_seqlen=8192 with long: drop"),
            std::string::npos)
      << message(list_source({100000}, "long"), c);
}

TEST(Sampler, PadsToAMultiple) {
  EXPECT_EQ(pad_length(1000, 1, 16), 1008);
  EXPECT_EQ(pad_length(1008, 1, 16), 1008);
  EXPECT_EQ(pad_length(5, 256, 16), 256);
  SamplerConfig c;
  c.global_batch = 500;
  c.pad_multiple = 2 * 8 * 8;  // Megatron: 2 * dp * cp for dynamic CP
  const auto b = sample_global_batch(lognormal_source_from_mean(1500, 1.2, 1, 100000), c, 4);
  int64_t pad = 0;
  for (size_t i = 0; i < b.real_lengths.size(); ++i) {
    ASSERT_EQ(b.batch.lengths[i] % 128, 0);
    ASSERT_GE(b.batch.lengths[i], b.real_lengths[i]);
    ASSERT_LT(b.batch.lengths[i] - b.real_lengths[i], 128);
    pad += b.batch.lengths[i] - b.real_lengths[i];
  }
  EXPECT_EQ(pad, b.padding_tokens);
}

TEST(Sampler, DeterministicPerSeedAndStep) {
  SamplerConfig c;
  c.global_batch = 2048;
  c.max_seqlen = 131072;
  c.min_seqlen = 256;
  c.seed = 99;
  const auto src = lognormal_source_from_mean(16384, 1.1, 1, 0);
  const auto a = sample_global_batch(src, c, 3);
  const auto b = sample_global_batch(src, c, 3);
  EXPECT_EQ(a.batch.lengths, b.batch.lengths);
  EXPECT_EQ(a.batch.lengths.size(), 2048u);
  EXPECT_NE(sample_global_batch(src, c, 4).batch.lengths, a.batch.lengths);
  c.seed = 100;
  EXPECT_NE(sample_global_batch(src, c, 3).batch.lengths, a.batch.lengths);
  EXPECT_LE(*std::max_element(a.batch.lengths.begin(), a.batch.lengths.end()), 131072);
  EXPECT_GE(*std::min_element(a.batch.lengths.begin(), a.batch.lengths.end()), 256);
}

TEST(Sampler, RealLengthsFile) {
  const std::string here = __FILE__;
  const std::string root = here.substr(0, here.find("impl/data/tests"));
  // The project's copy of the shared length file (scenarios/data, byte-identical to
  // ../shared/data/lengths/sotu.txt, which a clone elsewhere does not have).
  const std::string path = root + "scenarios/data/sotu.txt";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) GTEST_SKIP() << "no " << path;
  std::fclose(f);
  const auto src = lengths_file_source(path);
  EXPECT_EQ(src.name, "sotu.txt");
  EXPECT_EQ(src.lengths.size(), 233u);
  EXPECT_NEAR(mean_tokens(src), 8951, 1.0);  // README: mean 8,951
  SamplerConfig c;
  c.global_batch = 64;
  c.max_seqlen = 8192;
  const auto b = sample_global_batch(src, c, 0);
  EXPECT_LE(*std::max_element(b.real_lengths.begin(), b.real_lengths.end()), 8192);
  EXPECT_GT(b.documents_split, 0);
}

TEST(Sampler, ValidatesConfig) {
  SamplerConfig c;
  c.global_batch = 0;
  EXPECT_THROW(validate_sampler(c), InputError);
  c.global_batch = 1;
  c.max_seqlen = 100;
  c.min_seqlen = 200;
  EXPECT_THROW(validate_sampler(c), InputError);
  EXPECT_THROW(lognormal_source(1, -1, 1, 10), InputError);
  EXPECT_THROW(lognormal_source(1, 1, 100, 10), InputError);
}

}  // namespace
}  // namespace dcp::data

namespace dcp::data {
namespace {

// Issue 11: a 10^12-token document with max_seqlen 1 used to allocate 10^12 chunks; the sampler
// now counts them and builds only those the batch takes.
TEST(Sampler, HugeDocumentIsCountedNotBuilt) {
  SamplerConfig c;
  c.global_batch = 64;
  c.max_seqlen = 1;
  c.seed = 3;
  const auto sb = sample_global_batch(list_source({1000000000000}, "huge"), c, 0);
  EXPECT_EQ(sb.real_lengths, std::vector<int64_t>(64, 1));
  EXPECT_EQ(sb.documents_drawn, 1);
  EXPECT_EQ(sb.documents_split, 1);
  EXPECT_EQ(sb.chunks_discarded, 1000000000000 - 64);
  // Same counts as building the chunks, on seeded random documents and awkward sizes.
  Rng rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> docs;
    for (int i = 0; i < 20; ++i) docs.push_back(rng.uniform_int(1, 3000));
    SamplerConfig k;
    k.global_batch = rng.uniform_int(1, 97);
    k.max_seqlen = rng.uniform_int(1, 2048);
    k.min_seqlen = rng.uniform_int(1, k.max_seqlen);
    k.seed = static_cast<uint64_t>(trial);
    const auto got = sample_global_batch(list_source(docs, "r"), k, trial);
    // Reference: draw the same documents (same stream) and split them with split_document.
    Rng ref_rng(hash_u64(k.seed, static_cast<uint64_t>(trial)));
    std::vector<int64_t> want;
    int64_t discarded = 0, dropped = 0;
    for (int64_t d = 0; d < got.documents_drawn; ++d) {
      const int64_t len = draw_length(list_source(docs, "r"), ref_rng);
      for (int64_t piece : split_document(len, k.max_seqlen)) {
        if (static_cast<int64_t>(want.size()) == k.global_batch) {
          ++discarded;
        } else if (piece < k.min_seqlen) {
          ++dropped;
        } else {
          want.push_back(piece);
        }
      }
    }
    EXPECT_EQ(got.real_lengths, want) << trial;
    EXPECT_EQ(got.chunks_discarded, discarded) << trial;
    EXPECT_EQ(got.samples_dropped, dropped) << trial;
  }
}

TEST(Sampler, SizesAreRefusedBeforeAnythingIsDrawn) {
  SamplerConfig c;
  c.global_batch = plan::kMaxBatchSamples + 1;
  try {
    sample_global_batch(list_source({5}, "x"), c, 0);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is above the limit of 262144 samples per global batch"), std::string::npos)
        << e.what();
  }
  c.global_batch = 4;
  c.pad_multiple = kMaxPadMultiple + 1;
  EXPECT_THROW(validate_sampler(c), InputError);
  EXPECT_THROW(split_document(int64_t{1} << 40, 1), InputError);  // 2^40 chunks: never built
  EXPECT_EQ(split_document(10, 3), (std::vector<int64_t>{3, 3, 3, 1}));
}

TEST(LengthSource, MixtureNestingIsLimited) {
  LengthSource s = lognormal_source_from_mean(100, 1, 1, 0);
  for (int level = 1; level <= kMaxMixtureDepth; ++level) {
    s = mixture_source({s}, {1.0});
    EXPECT_EQ(mixture_depth(s), level);
  }
  try {
    mixture_source({s}, {1.0});
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than the limit of 8 levels"), std::string::npos) << e.what();
  }
}

// NumPy's legacy stream (numpy_legacy.h) against NumPy's own outputs for np.random.seed(0), which
// are widely published (np.random.random() = 0.5488135039273248; np.random.randn(4) = 1.76405235,
// 0.40015721, 0.97873798, 2.2408932) and which an independent replica (Python's random.Random,
// the same MT19937 and 53-bit double, with the polar method) reproduces to the last digit.
TEST(NumpyLegacy, ReproducesNumpySeedZero) {
  NumpyLegacyRandom a(0);
  EXPECT_EQ(a.random(), 0.5488135039273248);
  NumpyLegacyRandom b(0);
  EXPECT_DOUBLE_EQ(b.gauss(), 1.764052345967664);
  EXPECT_DOUBLE_EQ(b.gauss(), 0.4001572083672233);  // the cached second value of the pair
  EXPECT_DOUBLE_EQ(b.gauss(), 0.9787379841057392);
  EXPECT_DOUBLE_EQ(b.gauss(), 2.240893199201458);
  NumpyLegacyRandom c(0);
  EXPECT_DOUBLE_EQ(c.lognormal(0.5, 2.0), std::exp(0.5 + 2.0 * 1.764052345967664));
}

// Megatron's mock pool of benchmark_dcp.sh (seed 0, mean 1024, sigma 1.5, [128, 8192]): its first
// 20 lengths and the sums over the 990000 training samples, from the independent Python replica
// above (the values Megatron's MockSFTLowLevelDataset holds, given NumPy's stream).
TEST(NumpyLegacy, MegatronMockPool) {
  const std::vector<int64_t> first20 = {4687, 605, 1443, 8192, 5474, 128, 1382, 264, 284, 615,
                                        412,  2945, 1041, 399, 646, 548, 3126, 244, 531, 128};
  EXPECT_EQ(megatron_mock_lognormal_lengths(0, 20, 1024, 1.5, 128, 8192), first20);
  const auto pool = megatron_mock_lognormal_lengths(0, 990000, 1024, 1.5, 128, 8192);
  int64_t sum = 0, sum_sq = 0;
  for (int64_t l : pool) {
    sum += l;
    sum_sq += l * l;
  }
  EXPECT_EQ(sum, 897708145);
  EXPECT_EQ(sum_sq, 2999504675413);
  EXPECT_EQ(*std::min_element(pool.begin(), pool.end()), 128);
  EXPECT_EQ(*std::max_element(pool.begin(), pool.end()), 8192);
  EXPECT_THROW(megatron_mock_lognormal_lengths(0, 1, 1024, 1.5, 200, 100), InputError);
}

// A sequence source reads its pool in order: step k, sample i = r * (G / dp) + j is document
// first + k * G + j * dp + r (Megatron's sequential sampler over dp ranks, global ids rank by
// rank), wrapping round the pool, negative steps before `first`.
TEST(Sampler, SequenceReadsThePoolInMegatronsOrder) {
  std::vector<int64_t> pool(40);
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = 100 + static_cast<int64_t>(i);  // length = 100 + index
  const LengthSource src = sequence_source(pool, 8, 2, "seq");
  SamplerConfig c;
  c.global_batch = 6;
  c.pad_multiple = 4;
  c.seed = 99;  // not used
  // Step 0 from document 8: rank 0 takes 8, 10, 12; rank 1 takes 9, 11, 13.
  const SampledBatch b0 = sample_global_batch(src, c, 0);
  EXPECT_EQ(b0.real_lengths, (std::vector<int64_t>{108, 110, 112, 109, 111, 113}));
  EXPECT_EQ(b0.batch.lengths, (std::vector<int64_t>{108, 112, 112, 112, 112, 116}));
  EXPECT_EQ(b0.padding_tokens, 0 + 2 + 0 + 3 + 1 + 3);
  EXPECT_EQ(b0.documents_drawn, 6);
  c.seed = 1;
  EXPECT_EQ(sample_global_batch(src, c, 0).real_lengths, b0.real_lengths);
  // Step 1 from 14; step 5 from 38 wraps: 38, 0, 2 / 39, 1, 3; step -2 from 8 - 12 = -4 = 36.
  EXPECT_EQ(sample_global_batch(src, c, 1).real_lengths, (std::vector<int64_t>{114, 116, 118, 115, 117, 119}));
  EXPECT_EQ(sample_global_batch(src, c, 5).real_lengths, (std::vector<int64_t>{138, 100, 102, 139, 101, 103}));
  EXPECT_EQ(sample_global_batch(src, c, -2).real_lengths, (std::vector<int64_t>{136, 138, 100, 137, 139, 101}));
  // One sample per document: a document above max_seqlen or below min_seqlen (drop) is refused,
  // naming it; padding short ones is allowed.
  c.max_seqlen = 111;
  EXPECT_THROW(sample_global_batch(src, c, 0), InputError);
  c.max_seqlen = 0;
  c.min_seqlen = 110;
  EXPECT_THROW(sample_global_batch(src, c, 0), InputError);
  c.short_policy = ShortPolicy::pad;
  EXPECT_EQ(sample_global_batch(src, c, 0).batch.lengths, (std::vector<int64_t>{112, 112, 112, 112, 112, 116}));
  // A global batch the DP ranks do not divide; a pool a mixture cannot draw from in order; bad
  // pools.
  c.global_batch = 5;
  EXPECT_THROW(sample_global_batch(src, c, 0), InputError);
  EXPECT_THROW(mixture_source({src, list_source({5}, "l")}, {0.5, 0.5}), InputError);
  EXPECT_THROW(sequence_source({}, 0, 1, "empty"), InputError);
  EXPECT_THROW(sequence_source({3, 0}, 0, 1, "zero"), InputError);
  EXPECT_THROW(sequence_source({3}, -1, 1, "neg"), InputError);
  EXPECT_THROW(sequence_source({3}, 0, 0, "dp0"), InputError);
  EXPECT_DOUBLE_EQ(mean_tokens(src), 119.5);
}

}  // namespace
}  // namespace dcp::data
