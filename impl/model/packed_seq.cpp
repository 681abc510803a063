// See packed_seq.h.
#include "model/packed_seq.h"

#include <algorithm>
#include <limits>

namespace dcp::model {

void PackedSeqParams::validate() const {
  DCP_CHECK(cp_size >= 1, "PackedSeqParams: cp_size ", cp_size);
  DCP_CHECK(cp_group != nullptr && cp_group->size() == cp_size, "PackedSeqParams: cp_size ",
            cp_size, " but the group has ", cp_group ? cp_group->size() : 0, " ranks");
  attn::validate(thd(), cp_size);
  int32_t m = 0;
  for (size_t j = 0; j + 1 < cu_seqlens_padded.size(); ++j)
    m = std::max(m, cu_seqlens_padded[j + 1] - cu_seqlens_padded[j]);
  DCP_CHECK(max_seqlen == m, "PackedSeqParams: max_seqlen ", max_seqlen,
            " but the longest padded sequence has ", m, " rows");
}

PackedSeqParams make_packed_seq_params(const std::vector<int32_t>& lengths, int cp_size,
                                       comm::Communicator* cp_group, int64_t pad_to) {
  DCP_CHECK(cp_size >= 1, "make_packed_seq_params: cp_size ", cp_size);
  PackedSeqParams p;
  p.cp_size = cp_size;
  p.cp_group = cp_group;
  p.cu_seqlens.push_back(0);
  p.cu_seqlens_padded.push_back(0);
  const int64_t mult = 2 * static_cast<int64_t>(cp_size);
  for (int32_t len : lengths) {
    DCP_CHECK(len >= 0, "make_packed_seq_params: negative length ", len);
    int64_t padded = std::max<int64_t>(len, pad_to);
    padded = (padded + mult - 1) / mult * mult;
    DCP_CHECK(p.cu_seqlens_padded.back() + padded <= std::numeric_limits<int32_t>::max(),
              "make_packed_seq_params: more than 2^31 rows");
    p.cu_seqlens.push_back(p.cu_seqlens.back() + len);
    p.cu_seqlens_padded.push_back(p.cu_seqlens_padded.back() + static_cast<int32_t>(padded));
    p.max_seqlen = std::max(p.max_seqlen, static_cast<int32_t>(padded));
  }
  return p;
}

}  // namespace dcp::model
