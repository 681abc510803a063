// The GPU backend of the ring over the tensor-core kernels (flash_ring.h): every virtual rank's
// tensors in device memory, a KV block's P2P transfer as a device-to-device copy, read-half by
// the THD gather kernel, the step corrections by TE's LSE merge and add-rows kernels in fp32
// (cuda/thd_kernels.h), the flash kernels per step (cuda/flash_launch.h). Synchronous on the
// default stream. Only built with CUDA; every call checked (dcp::Error).
#pragma once

#include <cstdint>
#include <vector>

#include "attn/attn_shape.h"
#include "attn/bf16_rule.h"
#include "attn/cuda/device_array.h"
#include "attn/flash_emu.h"
#include "attn/thd.h"

namespace dcp::attn {

// Device copies of the THD arrays of a (query, key) batch pair, for bind_fwd / bind_bwd.
struct DeviceBatchPair {
  cuda::DeviceArray<int32_t> cu_q, cu_k, start_q, start_k;
  DeviceBatchPair(const ThdBatch& bq, const ThdBatch& bk);
  FlashBatchArrays arrays() const { return {cu_q.get(), cu_k.get(), start_q.get(), start_k.get()}; }
};

struct CudaFlashBackend {
  using B16 = cuda::DeviceArray<uint16_t>;
  using B32 = cuda::DeviceArray<float>;
  Half half = Half::bf16;
  int fwd_tiles_m = flash::kFwdTilesM;  // the forward's m16 tiles per warp (flash_common.h)

  B16 upload(const std::vector<uint16_t>& x) const;
  B32 upload(const std::vector<float>& x) const;
  std::vector<uint16_t> download(const B16& x) const;
  std::vector<float> download(const B32& x) const;
  B16 copy(const B16& x) const;
  B16 gather(const B16& src, const std::vector<int64_t>& rows, int64_t row_elems) const;
  B32 gather(const B32& src, const std::vector<int64_t>& rows, int64_t row_elems) const;
  B32 fill(size_t n, float v) const;
  B16 round(const B32& x) const;
  void fwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k, const B16& v,
           B16& out, B32& lse) const;
  void bwd(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, const B16& q, const B16& k, const B16& v,
           const B16& out, const B32& lse, const B16& dout, B16& dq, B16& dk, B16& dv) const;
  void merge(const AttnShape& s, const B16& out_step, const B32& lse_step, B32& out_acc, B32& lse_acc,
             const std::vector<int64_t>& rows) const;
  void add(const B16& step, B32& acc, const std::vector<int64_t>& rows, int64_t row_elems) const;
};

}  // namespace dcp::attn
