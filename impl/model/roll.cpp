// See roll.h.
#include "model/roll.h"

#include "core/error.h"

namespace dcp::model {

namespace {
constexpr int kTagToPrev = 21;  // first rows of my front chunks -> rank r-1
constexpr int kTagToNext = 22;  // first rows of my back chunks  -> rank r+1
}  // namespace

std::vector<int32_t> roll_left_packed_ref(const attn::ThdBatch& thd, std::span<const int32_t> x,
                                          int32_t fill) {
  DCP_CHECK(static_cast<int64_t>(x.size()) == thd.total_tokens(), "roll_left_packed_ref: ",
            x.size(), " rows, batch has ", thd.total_tokens());
  std::vector<int32_t> out(x.size());
  for (int j = 0; j < thd.batch(); ++j) {
    const int64_t b = thd.cu_seqlens_padded[j], e = thd.cu_seqlens_padded[j + 1];
    for (int64_t t = b; t < e; ++t) out[t] = t + 1 < e ? x[t + 1] : fill;
  }
  return out;
}

std::vector<int32_t> roll_left_packed(comm::Communicator& g, const attn::ThdBatch& thd,
                                      std::span<const int32_t> x, int32_t fill) {
  const int cp = g.size(), r = g.rank();
  attn::validate(thd, cp);
  DCP_CHECK(static_cast<int64_t>(x.size()) == thd.total_tokens() / cp, "roll_left_packed: ",
            x.size(), " local rows, expected ", thd.total_tokens() / cp);
  const int nseq = thd.batch();
  // Sequences with at least one row per chunk (zero-length padded sequences hold no rows).
  std::vector<int32_t> first_front(nseq, fill), first_back(nseq, fill);
  for (int j = 0; j < nseq; ++j) {
    const int64_t c = thd.padded_seqlen(j) / (2 * cp);
    if (c == 0) continue;
    const int64_t ls = thd.cu_seqlens_padded[j] / cp;
    first_front[j] = x[ls];
    first_back[j] = x[ls + c];
  }
  // from_next[j]: first row of rank r+1's front chunk; from_prev[j]: first row of rank r-1's back.
  std::vector<int32_t> from_next(nseq, fill), from_prev(nseq, fill);
  if (cp > 1) {
    std::vector<comm::RequestPtr> reqs;
    if (r + 1 < cp) reqs.push_back(g.irecv(std::span<int32_t>(from_next), r + 1, kTagToPrev));
    if (r > 0) reqs.push_back(g.irecv(std::span<int32_t>(from_prev), r - 1, kTagToNext));
    if (r > 0) reqs.push_back(g.isend(std::span<const int32_t>(first_front), r - 1, kTagToPrev));
    if (r + 1 < cp) reqs.push_back(g.isend(std::span<const int32_t>(first_back), r + 1, kTagToNext));
    comm::wait_all(reqs);
  }
  std::vector<int32_t> out(x.size());
  for (int j = 0; j < nseq; ++j) {
    const int64_t c = thd.padded_seqlen(j) / (2 * cp);
    if (c == 0) continue;
    const int64_t ls = thd.cu_seqlens_padded[j] / cp;
    for (int64_t i = 0; i + 1 < c; ++i) {
      out[ls + i] = x[ls + i + 1];
      out[ls + c + i] = x[ls + c + i + 1];
    }
    out[ls + c - 1] = r + 1 < cp ? from_next[j] : first_back[j];
    out[ls + 2 * c - 1] = r > 0 ? from_prev[j] : fill;
  }
  return out;
}

}  // namespace dcp::model
