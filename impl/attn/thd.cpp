// THD validation and zigzag index maps; see thd.h for the layout and the TE formulas used.
#include "attn/thd.h"

#include <algorithm>

#include "core/nvtx.h"

namespace dcp::attn {

namespace {
// cp == 0: no divisibility requirement.
void validate_impl(const ThdBatch& b, int cp) {
  const auto& cu = b.cu_seqlens;
  const auto& cp_pad = b.cu_seqlens_padded;
  DCP_REQUIRE(!cp_pad.empty(), "THD: cu_seqlens_padded is empty (it needs batch + 1 entries)");
  DCP_REQUIRE(cu.size() == cp_pad.size(), "THD: cu_seqlens has ", cu.size(),
              " entries but cu_seqlens_padded has ", cp_pad.size(), " (both need batch + 1)");
  DCP_REQUIRE(cu[0] == 0 && cp_pad[0] == 0, "THD: cu_seqlens[0]=", cu[0],
              " and cu_seqlens_padded[0]=", cp_pad[0], " must both be 0");
  const int64_t step = 2 * static_cast<int64_t>(cp);
  for (size_t j = 0; j + 1 < cu.size(); ++j) {
    DCP_REQUIRE(cu[j + 1] >= cu[j], "THD: cu_seqlens is not increasing: cu_seqlens[", j + 1,
                "]=", cu[j + 1], " < cu_seqlens[", j, "]=", cu[j]);
    DCP_REQUIRE(cp_pad[j + 1] >= cp_pad[j], "THD: cu_seqlens_padded is not increasing: "
                "cu_seqlens_padded[", j + 1, "]=", cp_pad[j + 1], " < cu_seqlens_padded[", j,
                "]=", cp_pad[j]);
    const int64_t len = cu[j + 1] - cu[j];
    const int64_t padded = cp_pad[j + 1] - cp_pad[j];
    DCP_REQUIRE(len <= padded, "THD: sequence ", j, " has ", len,
                " real tokens but only ", padded, " padded rows");
    DCP_REQUIRE(cp == 0 || padded % step == 0, "THD: padded length of sequence ", j, " is ", padded,
                ", not divisible by 2*cp=", step, " (cu_seqlens_padded[", j, "]=", cp_pad[j],
                ", cu_seqlens_padded[", j + 1, "]=", cp_pad[j + 1], ")");
  }
}

}  // namespace

void validate(const ThdBatch& b, int cp) {
  DCP_NVTX_RANGE();
  DCP_REQUIRE(cp >= 1, "THD: cp must be >= 1, got ", cp);
  validate_impl(b, cp);
}

void validate_layout(const ThdBatch& b) {
  DCP_NVTX_RANGE();
  validate_impl(b, 0);
}

ThdBatch make_thd_batch(std::span<const int32_t> lengths, int cp,
                        std::span<const int32_t> extra_padding) {
  DCP_NVTX_RANGE();
  DCP_REQUIRE(cp >= 1, "THD: cp must be >= 1, got ", cp);
  DCP_REQUIRE(extra_padding.empty() || extra_padding.size() == lengths.size(),
              "THD: extra_padding has ", extra_padding.size(), " entries for ", lengths.size(),
              " sequences");
  ThdBatch b;
  b.cu_seqlens.push_back(0);
  b.cu_seqlens_padded.push_back(0);
  const int32_t step = 2 * cp;
  for (size_t j = 0; j < lengths.size(); ++j) {
    DCP_REQUIRE(lengths[j] >= 0, "THD: length of sequence ", j, " is negative: ", lengths[j]);
    const int32_t extra = extra_padding.empty() ? 0 : extra_padding[j];
    const int32_t padded = (lengths[j] + step - 1) / step * step + extra;
    b.cu_seqlens.push_back(b.cu_seqlens.back() + lengths[j]);
    b.cu_seqlens_padded.push_back(b.cu_seqlens_padded.back() + padded);
  }
  validate(b, cp);
  return b;
}

namespace {
// Local sequence that contains local row t (cs = cu_seqlens_padded / cp).
int local_seq_of(const ThdBatch& b, int cp, int64_t t) {
  // Last j with cs[j] <= t and a non-empty local range.
  const auto& pad = b.cu_seqlens_padded;
  auto it = std::upper_bound(pad.begin(), pad.end(), t,
                             [cp](int64_t v, int32_t e) { return v < e / cp; });
  return static_cast<int>(it - pad.begin()) - 1;
}
}  // namespace

int64_t zigzag_global_row(const ThdBatch& b, int cp, int rank, int64_t local_row) {
  DCP_NVTX_RANGE();
  DCP_CHECK(rank >= 0 && rank < cp, "zigzag: rank ", rank, " outside cp ", cp);
  DCP_CHECK(local_row >= 0 && local_row < b.total_tokens() / cp, "zigzag: local row ", local_row,
            " outside [0, ", b.total_tokens() / cp, ")");
  const int j = local_seq_of(b, cp, local_row);
  const int64_t cs_j = b.cu_seqlens_padded[j] / cp;
  const int64_t lp = b.cu_seqlens_padded[j + 1] / cp - cs_j;
  const int64_t u = local_row - cs_j;
  return u + cs_j * cp + (lp / 2) * (u < lp / 2 ? rank : 2 * cp - 2 - rank);
}

std::vector<int64_t> zigzag_half_rows(const ThdBatch& b, int cp, int half) {
  DCP_CHECK(cp >= 1 && (half == 0 || half == 1), "zigzag_half_rows: cp ", cp, ", half ", half);
  std::vector<int64_t> rows;
  rows.reserve(b.total_tokens() / (2 * cp));
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t local_start = b.cu_seqlens_padded[j] / cp;
    const int64_t c = b.padded_seqlen(j) / (2 * cp);
    for (int64_t u = 0; u < c; ++u) rows.push_back(local_start + half * c + u);
  }
  return rows;
}

std::vector<int64_t> zigzag_rows(const ThdBatch& b, int cp, int rank) {
  DCP_NVTX_RANGE();
  DCP_CHECK(rank >= 0 && rank < cp, "zigzag: rank ", rank, " outside cp ", cp);
  std::vector<int64_t> rows;
  rows.reserve(b.total_tokens() / cp);
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t start = b.cu_seqlens_padded[j];
    const int64_t c = b.padded_seqlen(j) / (2 * cp);
    for (int64_t u = 0; u < c; ++u) rows.push_back(start + rank * c + u);
    for (int64_t u = 0; u < c; ++u) rows.push_back(start + (2 * cp - 1 - rank) * c + u);
  }
  return rows;
}

std::vector<int32_t> zigzag_positions(const ThdBatch& b, int cp, int rank) {
  const auto pos = thd_positions(b);
  return shard_rows(std::span<const int32_t>(pos), 1, b, cp, rank);
}

LocalRealLengths local_real_lengths(const ThdBatch& b, int cp, int rank) {
  DCP_NVTX_RANGE();
  DCP_CHECK(rank >= 0 && rank < cp, "zigzag: rank ", rank, " outside cp ", cp);
  LocalRealLengths out;
  for (int j = 0; j < b.batch(); ++j) {
    const int32_t len = b.seqlen(j);
    const int32_t c = b.padded_seqlen(j) / (2 * cp);
    out.front.push_back(std::clamp(len - rank * c, 0, c));
    out.back.push_back(std::clamp(len - (2 * cp - 1 - rank) * c, 0, c));
  }
  return out;
}

std::vector<int32_t> thd_positions(const ThdBatch& b) {
  DCP_NVTX_RANGE();
  std::vector<int32_t> pos(b.total_tokens());
  for (int j = 0; j < b.batch(); ++j)
    for (int32_t u = 0; u < b.padded_seqlen(j); ++u) pos[b.cu_seqlens_padded[j] + u] = u;
  return pos;
}

std::vector<uint8_t> real_token_mask(const ThdBatch& b) {
  DCP_NVTX_RANGE();
  std::vector<uint8_t> m(b.total_tokens(), 0);
  for (int j = 0; j < b.batch(); ++j)
    for (int32_t u = 0; u < b.seqlen(j); ++u) m[b.cu_seqlens_padded[j] + u] = 1;
  return m;
}

NextTokenTargets next_token_targets(std::span<const int32_t> tokens, const ThdBatch& b,
                                    int32_t ignore_label) {
  DCP_NVTX_RANGE();
  DCP_CHECK(static_cast<int64_t>(tokens.size()) == b.total_tokens(), "next_token_targets: ",
            tokens.size(), " tokens for a batch of ", b.total_tokens(), " rows");
  NextTokenTargets out{std::vector<int32_t>(tokens.size(), ignore_label),
                       std::vector<uint8_t>(tokens.size(), 0)};
  for (int j = 0; j < b.batch(); ++j) {
    const int64_t start = b.cu_seqlens_padded[j];
    for (int64_t u = 0; u + 1 < b.seqlen(j); ++u) {
      out.labels[start + u] = tokens[start + u + 1];
      out.loss_mask[start + u] = 1;
    }
  }
  return out;
}

}  // namespace dcp::attn
