// See flash_ring_cuda.h.
#include "attn/cuda/flash_ring_cuda.h"

#include "attn/cuda/flash_launch.h"
#include "attn/cuda/thd_kernels.h"
#include "attn/flash_emu.h"
#include "core/cuda_check.h"

namespace dcp::attn {

using cuda::DeviceArray;

namespace {
template <class T>
DeviceArray<T> gather_rows(const DeviceArray<T>& src, const std::vector<int64_t>& rows, int64_t row_elems) {
  for (int64_t r : rows)
    DCP_CHECK(r >= 0 && (r + 1) * row_elems <= static_cast<int64_t>(src.size()), "ring gather: row ", r, " outside ",
              src.size() / std::max<int64_t>(1, row_elems));
  DeviceArray<T> out(rows.size() * row_elems);
  if (rows.empty()) return out;
  DeviceArray<int64_t> idx{std::span<const int64_t>(rows)};
  DCP_CUDA_CHECK(cuda::thd_gather_rows(src.get(), out.get(), idx.get(), static_cast<int64_t>(rows.size()), sizeof(T),
                                       row_elems, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  return out;
}
}  // namespace

DeviceBatchPair::DeviceBatchPair(const ThdBatch& bq, const ThdBatch& bk)
    : cu_q(std::span<const int32_t>(bq.cu_seqlens)),
      cu_k(std::span<const int32_t>(bk.cu_seqlens)),
      start_q(std::span<const int32_t>(bq.cu_seqlens_padded)),
      start_k(std::span<const int32_t>(bk.cu_seqlens_padded)) {}

CudaFlashBackend::B16 CudaFlashBackend::upload(const std::vector<uint16_t>& x) const {
  return B16(std::span<const uint16_t>(x));
}
CudaFlashBackend::B32 CudaFlashBackend::upload(const std::vector<float>& x) const { return B32(std::span<const float>(x)); }
std::vector<uint16_t> CudaFlashBackend::download(const B16& x) const {
  std::vector<uint16_t> h(x.size());
  x.to_host(h);
  return h;
}
std::vector<float> CudaFlashBackend::download(const B32& x) const {
  std::vector<float> h(x.size());
  x.to_host(h);
  return h;
}

CudaFlashBackend::B16 CudaFlashBackend::copy(const B16& x) const {
  B16 y(x.size());
  if (x.size() > 0)
    DCP_CUDA_CHECK(cudaMemcpy(y.get(), x.get(), x.size() * sizeof(uint16_t), cudaMemcpyDeviceToDevice));
  return y;
}

CudaFlashBackend::B16 CudaFlashBackend::gather(const B16& src, const std::vector<int64_t>& rows, int64_t row_elems) const {
  return gather_rows(src, rows, row_elems);
}
CudaFlashBackend::B32 CudaFlashBackend::gather(const B32& src, const std::vector<int64_t>& rows, int64_t row_elems) const {
  return gather_rows(src, rows, row_elems);
}

CudaFlashBackend::B32 CudaFlashBackend::fill(size_t n, float v) const { return upload(std::vector<float>(n, v)); }

CudaFlashBackend::B16 CudaFlashBackend::round(const B32& x) const {
  B16 y(x.size());
  DCP_CUDA_CHECK(cuda::convert_from_f32(x.get(), y.get(), static_cast<int64_t>(x.size()), half == Half::bf16, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  return y;
}

void CudaFlashBackend::fwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k,
                           const B16& v, B16& out, B32& lse) const {
  const size_t nl = static_cast<size_t>(bq.total_tokens() * s.heads);
  out = B16(q.size());
  lse = B32(nl);
  flash::FwdParams p = flash_fwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), nl);
  const DeviceBatchPair arrays(bq, bk);
  out.poison();
  lse.poison();
  bind_fwd(p, arrays.arrays(), q.get(), k.get(), v.get(), out.get(), lse.get());
  DCP_CUDA_CHECK(flash::flash_fwd(p, half == Half::bf16, flash_fwd_grid(bq, fwd_tiles_m), nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaFlashBackend::bwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k,
                           const B16& v, const B16& out, const B32& lse, const B16& dout, B16& dq, B16& dk,
                           B16& dv) const {
  dq = B16(q.size());
  dk = B16(k.size());
  dv = B16(v.size());
  flash::BwdParams p = flash_bwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size(), dout.size(),
                                        dq.size(), dk.size(), dv.size());
  DeviceArray<float> delta(lse.size()), acc(q.size());
  const DeviceBatchPair arrays(bq, bk);
  dq.poison();
  dk.poison();
  dv.poison();
  bind_bwd(p, arrays.arrays(), q.get(), k.get(), v.get(), out.get(), lse.get(), dout.get(), delta.get(), acc.get(),
           dq.get(), dk.get(), dv.get());
  DCP_CUDA_CHECK(flash::flash_bwd(p, half == Half::bf16, flash_bwd_n_blocks(bk), nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaFlashBackend::merge(const AttnShape& s, const B16& out_step, const B32& lse_step, B32& out_acc, B32& lse_acc,
                             const std::vector<int64_t>& rows) const {
  const int64_t n = static_cast<int64_t>(lse_step.size()) / s.heads;
  B32 o(out_step.size());
  DCP_CUDA_CHECK(cuda::convert_to_f32(out_step.get(), o.get(), static_cast<int64_t>(o.size()), half == Half::bf16, nullptr));
  DeviceArray<int64_t> idx{std::span<const int64_t>(rows)};
  DCP_CUDA_CHECK(cuda::thd_lse_merge(o.get(), lse_step.get(), out_acc.get(), lse_acc.get(), rows.empty() ? nullptr : idx.get(),
                                     n, s.heads, s.head_dim, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
}

void CudaFlashBackend::add(const B16& step, B32& acc, const std::vector<int64_t>& rows, int64_t row_elems) const {
  const int64_t n = rows.empty() ? static_cast<int64_t>(step.size()) / row_elems : static_cast<int64_t>(rows.size());
  B32 f(step.size());
  DCP_CUDA_CHECK(cuda::convert_to_f32(step.get(), f.get(), static_cast<int64_t>(f.size()), half == Half::bf16, nullptr));
  DeviceArray<int64_t> idx{std::span<const int64_t>(rows)};
  DCP_CUDA_CHECK(cuda::thd_add_rows(f.get(), acc.get(), rows.empty() ? nullptr : idx.get(), n, row_elems, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace dcp::attn
