// See thd_cuda.h: size checks (thd_args, shared with the host emulator thd_emu.h), device copies,
// one launch each, every CUDA call checked.
#include "attn/cuda/thd_cuda.h"

#include "attn/cuda/device_array.h"
#include "attn/cuda/thd_kernels.h"
#include "attn/thd_emu.h"
#include "core/cuda_check.h"
#include "core/nvtx.h"

namespace dcp::attn {

using cuda::DeviceArray;

template <typename T>
std::vector<T> thd_partition_cuda(std::span<const T> global, int64_t row_elems, const ThdBatch& b, int cp, int rank) {
  DCP_NVTX_RANGE();
  thd_args::partition("thd_partition_cuda", global.size(), row_elems, b, cp, rank);
  std::vector<T> local(global.size() / cp);
  if (local.empty()) return local;
  DeviceArray<T> src(global), dst(local.size());
  dst.poison();
  DeviceArray<int32_t> cu(std::span<const int32_t>(b.cu_seqlens_padded));
  const cuda::ZigzagLayout z{cu.get(), b.batch(), b.total_tokens(), cp, rank};
  DCP_CUDA_CHECK(cuda::thd_partition(src.get(), dst.get(), sizeof(T), row_elems, z, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  dst.to_host(local);
  return local;
}

template <typename T>
std::vector<T> thd_unpartition_cuda(std::span<const T> shards, int64_t row_elems, const ThdBatch& b, int cp) {
  DCP_NVTX_RANGE();
  thd_args::partition("thd_unpartition_cuda", shards.size(), row_elems, b, cp);
  std::vector<T> global(shards.size());
  if (global.empty()) return global;
  const size_t local = shards.size() / cp;
  DeviceArray<T> dst(global.size());
  dst.poison();  // every row must come from some rank's shard
  DeviceArray<int32_t> cu(std::span<const int32_t>(b.cu_seqlens_padded));
  for (int r = 0; r < cp; ++r) {
    DeviceArray<T> src(shards.subspan(r * local, local));
    const cuda::ZigzagLayout z{cu.get(), b.batch(), b.total_tokens(), cp, r};
    DCP_CUDA_CHECK(cuda::thd_unpartition(src.get(), dst.get(), sizeof(T), row_elems, z, nullptr));
    DCP_CUDA_CHECK(cudaDeviceSynchronize());
  }
  dst.to_host(global);
  return global;
}

template <typename T>
std::vector<T> thd_gather_rows_cuda(std::span<const T> src, std::span<const int64_t> rows, int64_t row_elems) {
  DCP_NVTX_RANGE();
  thd_args::gather("thd_gather_rows_cuda", src.size(), rows, row_elems);
  std::vector<T> out(rows.size() * row_elems);
  if (out.empty()) return out;
  DeviceArray<T> s(src), d(out.size());
  d.poison();
  DeviceArray<int64_t> r(rows);
  DCP_CUDA_CHECK(cuda::thd_gather_rows(s.get(), d.get(), r.get(), static_cast<int64_t>(rows.size()), sizeof(T),
                                       row_elems, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  d.to_host(out);
  return out;
}

void thd_lse_merge_cuda(const AttnShape& s, std::span<const float> out_step, std::span<const float> lse_step,
                        std::span<float> out_acc, std::span<float> lse_acc, std::span<const int64_t> rows) {
  DCP_NVTX_RANGE();
  const int64_t n_rows = thd_args::lse_merge("thd_lse_merge_cuda", s, out_step.size(), lse_step.size(),
                                             out_acc.size(), lse_acc.size(), rows);
  if (n_rows == 0) return;
  DeviceArray<float> os(out_step), ls(lse_step), oa{std::span<const float>(out_acc)}, la{std::span<const float>(lse_acc)};
  DeviceArray<int64_t> r(rows);
  DCP_CUDA_CHECK(cuda::thd_lse_merge(os.get(), ls.get(), oa.get(), la.get(), rows.empty() ? nullptr : r.get(), n_rows,
                                     s.heads, s.head_dim, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  oa.to_host(out_acc);
  la.to_host(lse_acc);
}

void thd_add_rows_cuda(std::span<const float> step, std::span<float> acc, std::span<const int64_t> rows,
                       int64_t row_elems) {
  DCP_NVTX_RANGE();
  const int64_t n_rows = thd_args::add_rows("thd_add_rows_cuda", step.size(), acc.size(), rows, row_elems);
  if (n_rows == 0) return;
  DeviceArray<float> st(step), ac{std::span<const float>(acc)};
  DeviceArray<int64_t> r(rows);
  DCP_CUDA_CHECK(cuda::thd_add_rows(st.get(), ac.get(), rows.empty() ? nullptr : r.get(), n_rows, row_elems, nullptr));
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  ac.to_host(acc);
}

#define DCP_THD_CUDA(T)                                                                                     \
  template std::vector<T> thd_partition_cuda<T>(std::span<const T>, int64_t, const ThdBatch&, int, int);   \
  template std::vector<T> thd_unpartition_cuda<T>(std::span<const T>, int64_t, const ThdBatch&, int);      \
  template std::vector<T> thd_gather_rows_cuda<T>(std::span<const T>, std::span<const int64_t>, int64_t);
DCP_THD_CUDA(float)
DCP_THD_CUDA(uint16_t)
#undef DCP_THD_CUDA

}  // namespace dcp::attn
