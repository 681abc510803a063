// Shared entry checks and the variant dispatch of cp_attn.h.
#include "attn/cp_attn.h"

#include "attn/attn_ref.h"
#include "core/nvtx.h"

namespace dcp::attn {

const char* cp_algo_name(CpAlgo a) {
  switch (a) {
    case CpAlgo::ring: return "ring";
    case CpAlgo::all_gather: return "all_gather";
  }
  return "?";
}

void check_cp_inputs(const comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                     size_t q, size_t k, size_t v, size_t out, size_t lse) {
  DCP_NVTX_RANGE();
  validate(s);
  validate(b, group.size());
  check_sizes(s, b.total_tokens() / group.size(), q, k, v, out, lse);
}

template <typename T>
CpAttnFwdFn<T> cp_attn_fwd_fn(CpAlgo a) {
  switch (a) {
    case CpAlgo::ring: return &ring_attn_fwd<T>;
    case CpAlgo::all_gather: return &allgather_attn_fwd<T>;
  }
  DCP_FAIL("unknown CP algorithm ", static_cast<int>(a));
}

template <typename T>
CpAttnBwdFn<T> cp_attn_bwd_fn(CpAlgo a) {
  switch (a) {
    case CpAlgo::ring: return &ring_attn_bwd<T>;
    case CpAlgo::all_gather: return &allgather_attn_bwd<T>;
  }
  DCP_FAIL("unknown CP algorithm ", static_cast<int>(a));
}

template CpAttnFwdFn<float> cp_attn_fwd_fn<float>(CpAlgo);
template CpAttnFwdFn<double> cp_attn_fwd_fn<double>(CpAlgo);
template CpAttnBwdFn<float> cp_attn_bwd_fn<float>(CpAlgo);
template CpAttnBwdFn<double> cp_attn_bwd_fn<double>(CpAlgo);

}  // namespace dcp::attn
