// Host side of the CUDA attention forward: checks inputs as the reference does, copies to the
// device, launches attn_fwd_varlen, waits and copies back.
#include "attn/cuda/attn_cuda.h"

#include "attn/attn_ref.h"
#include "attn/cuda/attn_fwd_params.h"
#include "attn/cuda/device_array.h"
#include "core/cuda_check.h"
#include "core/nvtx.h"

namespace dcp::attn {

using cuda::DeviceArray;

void attn_fwd_cuda(const ThdBatch& b, const AttnShape& s, std::span<const float> q,
                   std::span<const float> k, std::span<const float> v, std::span<float> out,
                   std::span<float> lse) {
  DCP_NVTX_RANGE();
  validate(s);
  validate_layout(b);
  check_sizes(s, b.total_tokens(), q.size(), k.size(), v.size(), out.size(), lse.size());
  DCP_REQUIRE(s.head_dim <= 256, "attn_fwd_cuda: head_dim=", s.head_dim, " > 256 unsupported");
  if (b.batch() == 0 || b.total_tokens() == 0) return;
  DeviceArray<float> dq(q), dk(k), dv(v), dout(out.size()), dlse(lse.size());
  DeviceArray<int32_t> cu(std::span<const int32_t>(b.cu_seqlens)),
      cu_pad(std::span<const int32_t>(b.cu_seqlens_padded));
  cuda::AttnFwdParams p{dq.get(), dk.get(), dv.get(), dout.get(), dlse.get(), cu.get(),
                        cu_pad.get(), b.batch(), b.total_tokens(), s.heads, s.kv_heads,
                        s.head_dim, static_cast<float>(s.scale()), s.causal};
  DCP_CUDA_CHECK(cuda::attn_fwd_varlen(p, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  dout.to_host(out);
  dlse.to_host(lse);
}

}  // namespace dcp::attn
