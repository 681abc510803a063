// See flash_cuda.h. Output buffers are poisoned (NaN) on the device before the launch, so a row
// the kernel skips cannot pass a comparison.
#include "attn/cuda/flash_cuda.h"

#include "attn/cuda/device_array.h"
#include "attn/cuda/flash_launch.h"
#include "attn/flash_emu.h"
#include "core/cuda_check.h"
#include "core/nvtx.h"

namespace dcp::attn {

using cuda::DeviceArray;

void flash_fwd_cuda(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                    std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                    std::span<uint16_t> out, std::span<float> lse) {
  DCP_NVTX_RANGE();
  flash::FwdParams p = flash_fwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  const int m_blocks = flash_fwd_m_blocks(bq);
  if (m_blocks == 0) return;
  DeviceArray<uint16_t> dq(q), dk(k), dv(v), dout(out.size());
  DeviceArray<float> dlse(lse.size());
  DeviceArray<int32_t> cq(std::span<const int32_t>(bq.cu_seqlens)), ck(std::span<const int32_t>(bk.cu_seqlens)),
      sq(std::span<const int32_t>(bq.cu_seqlens_padded)), sk(std::span<const int32_t>(bk.cu_seqlens_padded));
  dout.poison();
  dlse.poison();
  p.q = dq.get();
  p.k = dk.get();
  p.v = dv.get();
  p.out = dout.get();
  p.lse = dlse.get();
  p.cu_seqlens_q = cq.get();
  p.cu_seqlens_k = ck.get();
  p.seqstart_q = sq.get();
  p.seqstart_k = sk.get();
  DCP_CUDA_CHECK(flash::flash_fwd(p, half == Half::bf16, m_blocks, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  dout.to_host(out);
  dlse.to_host(lse);
}

}  // namespace dcp::attn
