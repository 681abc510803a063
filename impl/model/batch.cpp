// See batch.h.
#include "model/batch.h"

#include <limits>

#include "core/error.h"

namespace dcp::model {

MicroBatchInput make_microbatch_input(const std::vector<std::span<const int32_t>>& seqs,
                                      comm::Communicator& g, int64_t pad_to) {
  std::vector<int32_t> lengths;
  for (const auto& s : seqs) {
    DCP_CHECK(s.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "make_microbatch_input: a sequence of ", s.size(), " tokens");
    lengths.push_back(static_cast<int32_t>(s.size()));
  }
  MicroBatchInput in;
  in.psp = make_packed_seq_params(lengths, g.size(), &g, pad_to);
  const attn::ThdBatch thd = in.psp.thd();
  std::vector<int32_t> tokens(thd.total_tokens(), 0);
  for (size_t j = 0; j < seqs.size(); ++j)
    std::copy(seqs[j].begin(), seqs[j].end(), tokens.begin() + thd.cu_seqlens_padded[j]);
  const auto targets = attn::next_token_targets(tokens, thd, 0);
  const std::vector<int32_t> mask(targets.loss_mask.begin(), targets.loss_mask.end());
  const int cp = g.size(), r = g.rank();
  in.tokens = attn::shard_rows<int32_t>(tokens, 1, thd, cp, r);
  in.labels = attn::shard_rows<int32_t>(targets.labels, 1, thd, cp, r);
  in.loss_mask = attn::shard_rows<int32_t>(mask, 1, thd, cp, r);
  return in;
}

}  // namespace dcp::model
