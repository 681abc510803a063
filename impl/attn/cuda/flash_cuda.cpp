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

void flash_bwd_cuda(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                    std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                    std::span<const uint16_t> out, std::span<const float> lse, std::span<const uint16_t> dout,
                    std::span<uint16_t> dq, std::span<uint16_t> dk, std::span<uint16_t> dv) {
  DCP_NVTX_RANGE();
  flash::BwdParams p = flash_bwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size(), dout.size(),
                                        dq.size(), dk.size(), dv.size());
  DeviceArray<uint16_t> d_q(q), d_k(k), d_v(v), d_out(out), d_dout(dout), d_dq(dq.size()), d_dk(dk.size()),
      d_dv(dv.size());
  DeviceArray<float> d_lse(lse), d_delta(lse.size()), d_acc(dq.size());
  DeviceArray<int32_t> cq(std::span<const int32_t>(bq.cu_seqlens)), ck(std::span<const int32_t>(bk.cu_seqlens)),
      sq(std::span<const int32_t>(bq.cu_seqlens_padded)), sk(std::span<const int32_t>(bk.cu_seqlens_padded));
  d_dq.poison();
  d_dk.poison();
  d_dv.poison();
  d_delta.poison();
  p.q = d_q.get();
  p.k = d_k.get();
  p.v = d_v.get();
  p.out = d_out.get();
  p.dout = d_dout.get();
  p.lse = d_lse.get();
  p.delta = d_delta.get();
  p.dq_accum = d_acc.get();
  p.dq = d_dq.get();
  p.dk = d_dk.get();
  p.dv = d_dv.get();
  p.cu_seqlens_q = cq.get();
  p.cu_seqlens_k = ck.get();
  p.seqstart_q = sq.get();
  p.seqstart_k = sk.get();
  DCP_CUDA_CHECK(flash::flash_bwd(p, half == Half::bf16, flash_bwd_n_blocks(bk), nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  d_dq.to_host(dq);
  d_dk.to_host(dk);
  d_dv.to_host(dv);
}

}  // namespace dcp::attn
