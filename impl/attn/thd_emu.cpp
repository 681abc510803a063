// See thd_emu.h.
#include "attn/thd_emu.h"

#include <algorithm>
#include <cstring>

#include "attn/flash/thd_elems.h"
#include "core/error.h"

namespace dcp::attn {

namespace thd_args {

void rows(std::span<const int64_t> rows, int64_t limit, bool unique) {
  for (int64_t r : rows) DCP_CHECK(r >= 0 && r < limit, "THD kernel: row index ", r, " outside [0, ", limit, ")");
  if (!unique) return;
  std::vector<int64_t> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  DCP_CHECK(dup == sorted.end(), "THD kernel: row index ", dup == sorted.end() ? 0 : *dup,
            " appears twice (in-place updates of one row would race)");
}

void partition(const char* who, size_t elems, int64_t row_elems, const ThdBatch& b, int cp, std::optional<int> rank) {
  validate(b, cp);
  DCP_CHECK(!rank || (*rank >= 0 && *rank < cp), who, ": rank ", rank.value_or(0), " outside cp ", cp);
  DCP_CHECK(row_elems >= 0 && static_cast<int64_t>(elems) == b.total_tokens() * row_elems, who, ": ", elems,
            " elements, expected ", b.total_tokens(), " x ", row_elems);
}

void gather(const char* who, size_t src_elems, std::span<const int64_t> idx, int64_t row_elems) {
  DCP_CHECK(row_elems > 0 && src_elems % row_elems == 0, who, ": ", src_elems, " elements are not rows of ",
            row_elems);
  rows(idx, static_cast<int64_t>(src_elems) / row_elems, false);
}

int64_t lse_merge(const char* who, const AttnShape& s, size_t out_step, size_t lse_step, size_t out_acc,
                  size_t lse_acc, std::span<const int64_t> idx) {
  validate(s);
  const int64_t n_rows = static_cast<int64_t>(lse_step) / s.heads;
  DCP_CHECK(static_cast<int64_t>(lse_step) == n_rows * s.heads && static_cast<int64_t>(out_step) == n_rows * s.q_row(),
            who, ": step has ", out_step, " / ", lse_step, " elements");
  const int64_t acc_rows = static_cast<int64_t>(lse_acc) / s.heads;
  DCP_CHECK(static_cast<int64_t>(lse_acc) == acc_rows * s.heads && static_cast<int64_t>(out_acc) == acc_rows * s.q_row(),
            who, ": acc has ", out_acc, " / ", lse_acc, " elements");
  DCP_CHECK(idx.empty() ? n_rows <= acc_rows : static_cast<int64_t>(idx.size()) == n_rows, who, ": ", idx.size(),
            " row indices for ", n_rows, " step rows");
  rows(idx, acc_rows, true);
  return n_rows;
}

int64_t add_rows(const char* who, size_t step, size_t acc, std::span<const int64_t> idx, int64_t row_elems) {
  DCP_CHECK(row_elems > 0 && step % row_elems == 0 && acc % row_elems == 0, who, ": sizes ", step, " / ", acc,
            " are not rows of ", row_elems);
  const int64_t n_rows = static_cast<int64_t>(step) / row_elems;
  const int64_t acc_rows = static_cast<int64_t>(acc) / row_elems;
  DCP_CHECK(idx.empty() ? n_rows <= acc_rows : static_cast<int64_t>(idx.size()) == n_rows, who, ": ", idx.size(),
            " row indices for ", n_rows, " step rows");
  rows(idx, acc_rows, true);
  return n_rows;
}

}  // namespace thd_args

namespace {

// NaN bytes in every output element before a "kernel" runs (DeviceArray::poison does the same on
// the GPU), so an element the kernel skips cannot match by accident.
template <typename T>
std::vector<T> poisoned(size_t n) {
  std::vector<T> v(n);
  if (n > 0) std::memset(v.data(), 0xff, n * sizeof(T));
  return v;
}

flash::ZigzagLayout layout(const ThdBatch& b, int cp, int rank) {
  return flash::ZigzagLayout{b.cu_seqlens_padded.data(), static_cast<int>(b.batch()), b.total_tokens(), cp, rank};
}

}  // namespace

template <typename T>
std::vector<T> thd_partition_emu(std::span<const T> global, int64_t row_elems, const ThdBatch& b, int cp, int rank) {
  thd_args::partition("thd_partition_emu", global.size(), row_elems, b, cp, rank);
  std::vector<T> local = poisoned<T>(global.size() / cp);
  const flash::ZigzagLayout z = layout(b, cp, rank);
  const int64_t n = flash::partition_elems(z, row_elems);
  if (b.batch() == 0) return local;
  for (int64_t i = 0; i < n; ++i) flash::partition_elem<T, false>(global.data(), local.data(), row_elems, z, i);
  return local;
}

template <typename T>
std::vector<T> thd_unpartition_emu(std::span<const T> shards, int64_t row_elems, const ThdBatch& b, int cp) {
  thd_args::partition("thd_unpartition_emu", shards.size(), row_elems, b, cp);
  std::vector<T> global = poisoned<T>(shards.size());  // every row must come from some rank's shard
  if (b.batch() == 0) return global;
  const size_t local = shards.size() / cp;
  for (int r = 0; r < cp; ++r) {
    const flash::ZigzagLayout z = layout(b, cp, r);
    const int64_t n = flash::partition_elems(z, row_elems);
    for (int64_t i = 0; i < n; ++i)
      flash::partition_elem<T, true>(shards.data() + r * local, global.data(), row_elems, z, i);
  }
  return global;
}

template <typename T>
std::vector<T> thd_gather_rows_emu(std::span<const T> src, std::span<const int64_t> rows, int64_t row_elems) {
  thd_args::gather("thd_gather_rows_emu", src.size(), rows, row_elems);
  std::vector<T> out = poisoned<T>(rows.size() * row_elems);
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i)
    flash::gather_elem(src.data(), out.data(), rows.data(), row_elems, i);
  return out;
}

void thd_lse_merge_emu(const AttnShape& s, std::span<const float> out_step, std::span<const float> lse_step,
                       std::span<float> out_acc, std::span<float> lse_acc, std::span<const int64_t> rows) {
  const int64_t n_rows = thd_args::lse_merge("thd_lse_merge_emu", s, out_step.size(), lse_step.size(),
                                             out_acc.size(), lse_acc.size(), rows);
  for (int64_t r = 0; r < n_rows * s.heads; ++r)
    flash::lse_merge_row(out_step.data(), lse_step.data(), out_acc.data(), lse_acc.data(),
                         rows.empty() ? nullptr : rows.data(), s.heads, s.head_dim, r);
}

void thd_add_rows_emu(std::span<const float> step, std::span<float> acc, std::span<const int64_t> rows,
                      int64_t row_elems) {
  const int64_t n_rows = thd_args::add_rows("thd_add_rows_emu", step.size(), acc.size(), rows, row_elems);
  for (int64_t i = 0; i < n_rows * row_elems; ++i)
    flash::add_rows_elem(step.data(), acc.data(), rows.empty() ? nullptr : rows.data(), row_elems, i);
}

#define DCP_THD_EMU(T)                                                                                    \
  template std::vector<T> thd_partition_emu<T>(std::span<const T>, int64_t, const ThdBatch&, int, int);  \
  template std::vector<T> thd_unpartition_emu<T>(std::span<const T>, int64_t, const ThdBatch&, int);     \
  template std::vector<T> thd_gather_rows_emu<T>(std::span<const T>, std::span<const int64_t>, int64_t);
DCP_THD_EMU(float)
DCP_THD_EMU(uint16_t)
#undef DCP_THD_EMU

}  // namespace dcp::attn
