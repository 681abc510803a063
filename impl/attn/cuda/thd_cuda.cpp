// See thd_cuda.h: size checks, device copies, one launch each, every CUDA call checked.
#include "attn/cuda/thd_cuda.h"

#include <algorithm>

#include "attn/cuda/device_array.h"
#include "attn/cuda/thd_kernels.h"
#include "core/cuda_check.h"
#include "core/nvtx.h"

namespace dcp::attn {

using cuda::DeviceArray;

namespace {

// In range and, for the kernels that update acc[rows[i]] in place, unique (two threads updating
// one row would race).
void check_rows(std::span<const int64_t> rows, int64_t limit, bool unique) {
  for (int64_t r : rows) DCP_CHECK(r >= 0 && r < limit, "THD kernel: row index ", r, " outside [0, ", limit, ")");
  if (!unique) return;
  std::vector<int64_t> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  DCP_CHECK(dup == sorted.end(), "THD kernel: row index ", dup == sorted.end() ? 0 : *dup,
            " appears twice (in-place updates of one row would race)");
}

}  // namespace

template <typename T>
std::vector<T> thd_partition_cuda(std::span<const T> global, int64_t row_elems, const ThdBatch& b, int cp, int rank) {
  DCP_NVTX_RANGE();
  validate(b, cp);
  DCP_CHECK(rank >= 0 && rank < cp, "thd_partition_cuda: rank ", rank, " outside cp ", cp);
  DCP_CHECK(static_cast<int64_t>(global.size()) == b.total_tokens() * row_elems, "thd_partition_cuda: ",
            global.size(), " elements, expected ", b.total_tokens(), " x ", row_elems);
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
  validate(b, cp);
  DCP_CHECK(static_cast<int64_t>(shards.size()) == b.total_tokens() * row_elems, "thd_unpartition_cuda: ",
            shards.size(), " elements, expected ", b.total_tokens(), " x ", row_elems);
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
  DCP_CHECK(row_elems > 0 && src.size() % row_elems == 0, "thd_gather_rows_cuda: ", src.size(),
            " elements are not rows of ", row_elems);
  check_rows(rows, static_cast<int64_t>(src.size()) / row_elems, false);
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
  validate(s);
  const int64_t n_rows = static_cast<int64_t>(lse_step.size()) / s.heads;
  DCP_CHECK(static_cast<int64_t>(lse_step.size()) == n_rows * s.heads &&
                static_cast<int64_t>(out_step.size()) == n_rows * s.q_row(),
            "thd_lse_merge_cuda: step has ", out_step.size(), " / ", lse_step.size(), " elements");
  const int64_t acc_rows = static_cast<int64_t>(lse_acc.size()) / s.heads;
  DCP_CHECK(static_cast<int64_t>(lse_acc.size()) == acc_rows * s.heads &&
                static_cast<int64_t>(out_acc.size()) == acc_rows * s.q_row(),
            "thd_lse_merge_cuda: acc has ", out_acc.size(), " / ", lse_acc.size(), " elements");
  DCP_CHECK(rows.empty() ? n_rows <= acc_rows : static_cast<int64_t>(rows.size()) == n_rows,
            "thd_lse_merge_cuda: ", rows.size(), " row indices for ", n_rows, " step rows");
  check_rows(rows, acc_rows, true);
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
  DCP_CHECK(row_elems > 0 && step.size() % row_elems == 0 && acc.size() % row_elems == 0,
            "thd_add_rows_cuda: sizes ", step.size(), " / ", acc.size(), " are not rows of ", row_elems);
  const int64_t n_rows = static_cast<int64_t>(step.size()) / row_elems;
  const int64_t acc_rows = static_cast<int64_t>(acc.size()) / row_elems;
  DCP_CHECK(rows.empty() ? n_rows <= acc_rows : static_cast<int64_t>(rows.size()) == n_rows,
            "thd_add_rows_cuda: ", rows.size(), " row indices for ", n_rows, " step rows");
  check_rows(rows, acc_rows, true);
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
