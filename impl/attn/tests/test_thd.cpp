// THD layout and zigzag sharding: validation messages, TE's index formula against the chunk
// definition, shard/unshard round trips, per-rank real lengths, positions and next-token targets
// that never cross a sequence or padding boundary.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "attn/thd.h"

namespace dcp::attn {
namespace {

std::string error_of(const ThdBatch& b, int cp) {
  try {
    validate(b, cp);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Thd, ValidationNamesTheBadValue) {
  ThdBatch b{{0, 5, 3}, {0, 8, 16}};
  EXPECT_NE(error_of(b, 2).find("cu_seqlens is not increasing: cu_seqlens[2]=3 < cu_seqlens[1]=5"),
            std::string::npos)
      << error_of(b, 2);
  b = {{0, 5, 9}, {0, 8, 14}};
  EXPECT_NE(error_of(b, 2).find("padded length of sequence 1 is 6, not divisible by 2*cp=4"),
            std::string::npos)
      << error_of(b, 2);
  b = {{0, 9}, {0, 8}};
  EXPECT_NE(error_of(b, 1).find("sequence 0 has 9 real tokens but only 8 padded rows"),
            std::string::npos);
  b = {{0, 4}, {0, 8, 16}};
  EXPECT_NE(error_of(b, 1).find("both need batch + 1"), std::string::npos);
  b = {{0, 4, 8}, {0, 8, 16}};
  EXPECT_EQ(error_of(b, 4), "");
  const int32_t neg[] = {-1};
  EXPECT_THROW(make_thd_batch(neg, 1), InputError);
}

TEST(Thd, MakeBatchPadsToMultipleOf2CpNeverRoundsDown) {
  const int32_t lengths[] = {7, 1, 8, 0};
  const int32_t extra[] = {0, 4, 0, 4};
  const ThdBatch b = make_thd_batch(lengths, 2, extra);
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 7, 8, 16, 16}));
  EXPECT_EQ(b.cu_seqlens_padded, (std::vector<int32_t>{0, 8, 16, 24, 28}));
  EXPECT_EQ(b.seqlen(0), 7);  // TE #1930: not 6
}

TEST(Thd, TeIndexFormulaEqualsChunkDefinitionAndIsAPermutation) {
  for (int cp : {1, 2, 3, 4, 8}) {
    const int32_t lengths[] = {1, 2 * cp - 1, 2 * cp, 2 * cp + 1, 9 * cp + 2, 0};
    const int32_t extra[] = {0, 2 * cp, 0, 0, 4 * cp, 2 * cp};
    const ThdBatch b = make_thd_batch(lengths, cp, extra);
    std::vector<int> seen(b.total_tokens(), 0);
    for (int r = 0; r < cp; ++r) {
      const auto rows = zigzag_rows(b, cp, r);
      ASSERT_EQ(static_cast<int64_t>(rows.size()), b.total_tokens() / cp);
      for (size_t t = 0; t < rows.size(); ++t) {
        ASSERT_EQ(zigzag_global_row(b, cp, r, t), rows[t]) << "cp=" << cp << " r=" << r;
        ++seen[rows[t]];
      }
    }
    for (int64_t t = 0; t < b.total_tokens(); ++t) ASSERT_EQ(seen[t], 1) << "row " << t;
  }
}

TEST(Thd, Cp2ChunksOfOneSequence) {
  // One sequence of 8 rows at cp=2: chunks of 2; rank 0 holds chunks 0 and 3, rank 1 chunks 1, 2.
  const int32_t lengths[] = {8};
  const ThdBatch b = make_thd_batch(lengths, 2);
  EXPECT_EQ(zigzag_rows(b, 2, 0), (std::vector<int64_t>{0, 1, 6, 7}));
  EXPECT_EQ(zigzag_rows(b, 2, 1), (std::vector<int64_t>{2, 3, 4, 5}));
}

// The half rows of a rank's shard are exactly its front and back chunks: their global rows are
// chunk `rank` and chunk 2cp-1-rank of every sequence (zero-length and padded ones included).
TEST(Thd, HalfRowsAreTheFrontAndBackChunks) {
  for (int cp : {1, 2, 4}) {
    const int32_t lengths[] = {1, 2 * cp + 1, 0, 5 * cp};
    const int32_t extra[] = {0, 0, 2 * cp, 0};
    const ThdBatch b = make_thd_batch(lengths, cp, extra);
    const auto front = zigzag_half_rows(b, cp, 0), back = zigzag_half_rows(b, cp, 1);
    ASSERT_EQ(static_cast<int64_t>(front.size()), b.total_tokens() / (2 * cp));
    ASSERT_EQ(front.size(), back.size());
    for (int r = 0; r < cp; ++r) {
      const auto rows = zigzag_rows(b, cp, r);
      size_t i = 0;
      for (int j = 0; j < b.batch(); ++j) {
        const int64_t c = b.padded_seqlen(j) / (2 * cp);
        for (int64_t u = 0; u < c; ++u, ++i) {
          EXPECT_EQ(rows[front[i]], b.cu_seqlens_padded[j] + r * c + u) << "cp " << cp << " rank " << r;
          EXPECT_EQ(rows[back[i]], b.cu_seqlens_padded[j] + (2 * cp - 1 - r) * c + u) << "cp " << cp;
        }
      }
    }
  }
  const int32_t one[] = {8};
  EXPECT_EQ(zigzag_half_rows(make_thd_batch(one, 2), 2, 1), (std::vector<int64_t>{2, 3}));
}

TEST(Thd, ShardUnshardRoundTripAndMetadataSlices) {
  const int cp = 4;
  const int32_t lengths[] = {3, 17, 8, 1};
  const int32_t extra[] = {8, 0, 0, 16};
  const ThdBatch b = make_thd_batch(lengths, cp, extra);
  const int64_t width = 3;
  std::vector<int64_t> global(b.total_tokens() * width);
  std::iota(global.begin(), global.end(), 100);
  std::vector<int64_t> shards;
  const auto pos = thd_positions(b);
  const auto real = real_token_mask(b);
  for (int r = 0; r < cp; ++r) {
    const auto s = shard_rows(std::span<const int64_t>(global), width, b, cp, r);
    shards.insert(shards.end(), s.begin(), s.end());
    // Positions and real lengths on the rank agree with the global metadata.
    const auto lpos = zigzag_positions(b, cp, r);
    const auto lreal = shard_rows(std::span<const uint8_t>(real), 1, b, cp, r);
    const auto rows = zigzag_rows(b, cp, r);
    const auto rl = local_real_lengths(b, cp, r);
    int64_t t = 0;
    for (int j = 0; j < b.batch(); ++j) {
      const int64_t c = b.padded_seqlen(j) / (2 * cp);
      int32_t front = 0, back = 0;
      for (int64_t u = 0; u < 2 * c; ++u, ++t) {
        ASSERT_EQ(lpos[t], pos[rows[t]]);
        ASSERT_EQ(lreal[t] != 0, lpos[t] < b.seqlen(j));
        (u < c ? front : back) += lreal[t];
      }
      ASSERT_EQ(rl.front[j], front) << "r=" << r << " seq " << j;
      ASSERT_EQ(rl.back[j], back) << "r=" << r << " seq " << j;
    }
  }
  EXPECT_EQ(unshard_rows(std::span<const int64_t>(shards), width, b, cp), global);
}

TEST(Thd, NextTokenTargetsStayInsideEachSequence) {
  const int32_t lengths[] = {3, 1, 4};
  const ThdBatch b = make_thd_batch(lengths, 1);  // rows: [0..3) [4..6) [6..10), padding 3, 5
  std::vector<int32_t> tokens(b.total_tokens());
  std::iota(tokens.begin(), tokens.end(), 10);
  const auto t = next_token_targets(tokens, b);
  EXPECT_EQ(t.labels, (std::vector<int32_t>{11, 12, -100, -100, -100, -100, 17, 18, 19, -100}));
  EXPECT_EQ(t.loss_mask, (std::vector<uint8_t>{1, 1, 0, 0, 0, 0, 1, 1, 1, 0}));
}

}  // namespace
}  // namespace dcp::attn
