// See flash_cuda.h: the GPU backend of the ring (flash_ring_cuda.h) with host tensors in and out;
// its outputs are poisoned (NaN) on the device before each launch, so a row the kernel skips
// cannot pass a comparison.
#include "attn/cuda/flash_cuda.h"

#include "attn/cuda/flash_ring_cuda.h"
#include "attn/flash_emu.h"
#include "core/nvtx.h"

#include <algorithm>

namespace dcp::attn {

namespace {
template <class T>
void copy_out(const std::vector<T>& from, std::span<T> to) {
  DCP_CHECK(from.size() == to.size(), "flash attention: ", from.size(), " elements for an output of ", to.size());
  std::copy(from.begin(), from.end(), to.begin());
}
template <class T>
std::vector<T> vec(std::span<const T> x) {
  return std::vector<T>(x.begin(), x.end());
}
}  // namespace

void flash_fwd_cuda(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                    std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                    std::span<uint16_t> out, std::span<float> lse, int tiles_m) {
  DCP_NVTX_RANGE();
  flash_fwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size());  // sizes, before any copy
  CudaFlashBackend be;
  be.half = half;
  be.fwd_tiles_m = tiles_m;
  CudaFlashBackend::B16 o;
  CudaFlashBackend::B32 l;
  be.fwd(bq, bk, s, be.upload(vec(q)), be.upload(vec(k)), be.upload(vec(v)), o, l);
  copy_out(be.download(o), out);
  copy_out(be.download(l), lse);
}

void flash_bwd_cuda(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                    std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                    std::span<const uint16_t> out, std::span<const float> lse, std::span<const uint16_t> dout,
                    std::span<uint16_t> dq, std::span<uint16_t> dk, std::span<uint16_t> dv) {
  DCP_NVTX_RANGE();
  flash_bwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size(), dout.size(), dq.size(), dk.size(),
                   dv.size());  // sizes, before any copy
  CudaFlashBackend be;
  be.half = half;
  CudaFlashBackend::B16 gq, gk, gv;
  be.bwd(bq, bk, s, be.upload(vec(q)), be.upload(vec(k)), be.upload(vec(v)), be.upload(vec(out)), be.upload(vec(lse)),
         be.upload(vec(dout)), gq, gk, gv);
  copy_out(be.download(gq), dq);
  copy_out(be.download(gk), dk);
  copy_out(be.download(gv), dv);
}

}  // namespace dcp::attn
