// The checks of the THD ring helper kernels against the host functions they mirror, for any set
// of host entries with thd_cuda.h's signatures (a Backend: the CUDA entries in test_thd_cuda.cpp,
// the host emulator of the same kernel bodies in test_thd_emu.cpp): partition = shard_rows,
// un-partition = unshard_rows, read-half = the rows of zigzag_half_rows, LSE merge with output
// correction = lse_merge, gradient correction = row-wise add. The varlen table (length 1,
// block +-1, one long, many short, padding between and after, zero-length sequences, GQA d=128)
// at the given cp, every rank; inputs seeded, never zero; the entries fill every output buffer
// with NaN bytes before the kernel runs, so a row a kernel skips cannot match by accident.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/attn_tiles.h"
#include "attn/compare.h"
#include "attn/thd.h"
#include "attn_test_util.h"

namespace dcp::attn::testing {

inline std::vector<float> thd_check_floats(uint64_t seed, uint64_t tensor, int64_t n) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(input_value(seed, tensor, i));
  return x;
}

// bf16 storage: the top 16 bits of the float (what a bf16 tensor's bytes look like).
inline std::vector<uint16_t> thd_check_halves(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    h[i] = static_cast<uint16_t>(u >> 16);
  }
  return h;
}

template <class Backend>
void check_thd_partition_unpartition_read_half(int cp) {
  for (const VarlenCase& c : varlen_cases(cp)) {
    const ThdBatch b = case_batch(c, cp);
    const AttnShape s = case_shape(c);
    const int64_t row = s.kv_row();
    const std::vector<float> global = thd_check_floats(3, kK, b.total_tokens() * row);
    const std::vector<uint16_t> global16 = thd_check_halves(global);
    std::vector<float> shards;
    std::vector<uint16_t> shards16;
    // The rows of `x` listed in `rows`, host side.
    const auto pick = [row](const auto& x, const std::vector<int64_t>& rows) {
      std::remove_cvref_t<decltype(x)> out;
      for (int64_t lr : rows) out.insert(out.end(), x.begin() + lr * row, x.begin() + (lr + 1) * row);
      return out;
    };
    for (int r = 0; r < cp; ++r) {
      const auto want = shard_rows<float>(global, row, b, cp, r);
      const auto want16 = shard_rows<uint16_t>(global16, row, b, cp, r);
      EXPECT_EQ(Backend::template partition<float>(global, row, b, cp, r), want) << c.what << " cp " << cp << " rank " << r;
      EXPECT_EQ(Backend::template partition<uint16_t>(global16, row, b, cp, r), want16) << c.what << " (16-bit) rank " << r;
      shards.insert(shards.end(), want.begin(), want.end());
      shards16.insert(shards16.end(), want16.begin(), want16.end());
      // Read-half: the front and back chunks of the shard.
      for (int half : {0, 1}) {
        const auto rows = zigzag_half_rows(b, cp, half);
        EXPECT_EQ(Backend::template gather_rows<float>(want, rows, row), pick(want, rows)) << c.what << " half " << half;
        EXPECT_EQ(Backend::template gather_rows<uint16_t>(want16, rows, row), pick(want16, rows))
            << c.what << " (16-bit) half " << half;
      }
    }
    EXPECT_EQ(Backend::template unpartition<float>(shards, row, b, cp), global) << c.what << " cp " << cp;
    EXPECT_EQ(Backend::template unpartition<uint16_t>(shards16, row, b, cp), global16) << c.what << " (16-bit) cp " << cp;
  }
}

// The ring's output correction: a step's partial (out, lse) over all local rows, and a half
// step's over the back-half rows only (TE's only_second_half), merged into a running result
// that has untouched rows (lse -inf) and touched ones; the step has rows it did not touch too.
// Then the gradient correction: a half step's dK added into the back-half rows, a full step's
// everywhere.
template <class Backend>
void check_thd_lse_merge_and_gradient_correction(int cp) {
  for (const VarlenCase& c : varlen_cases(cp)) {
    const ThdBatch b = case_batch(c, cp);
    const AttnShape s = case_shape(c);
    const int64_t local = b.total_tokens() / cp;
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> out_acc = thd_check_floats(5, kQ, local * s.q_row()), lse_acc = thd_check_floats(5, kV, local * s.heads);
    for (size_t i = 0; i < lse_acc.size(); i += 3) lse_acc[i] = -inf;  // rows no step touched yet
    for (const bool half : {false, true}) {
      const std::vector<int64_t> rows = half ? zigzag_half_rows(b, cp, 1) : std::vector<int64_t>{};
      const int64_t n = half ? static_cast<int64_t>(rows.size()) : local;
      std::vector<float> out_step = thd_check_floats(7 + half, kDout, n * s.q_row()),
                         lse_step = thd_check_floats(7 + half, kK, n * s.heads);
      for (size_t i = 1; i < lse_step.size(); i += 4) lse_step[i] = -inf;  // rows this step did not touch
      // Host: expand the half step to full rows (untouched rows -inf), then lse_merge.
      std::vector<float> full_out(local * s.q_row(), 0.f), full_lse(local * s.heads, -inf);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = half ? rows[i] : i;
        std::copy(out_step.begin() + i * s.q_row(), out_step.begin() + (i + 1) * s.q_row(), full_out.begin() + r * s.q_row());
        std::copy(lse_step.begin() + i * s.heads, lse_step.begin() + (i + 1) * s.heads, full_lse.begin() + r * s.heads);
      }
      std::vector<float> want_out = out_acc, want_lse = lse_acc;
      lse_merge<float>(s, local, full_out.data(), full_lse.data(), want_out.data(), want_lse.data());
      Backend::lse_merge(s, out_step, lse_step, out_acc, lse_acc, rows);
      // expf/log1pf (device, or the C library's float functions) vs the host's std:: in the
      // template: a few ulps.
      const std::vector<double> wo(want_out.begin(), want_out.end()), wl(want_lse.begin(), want_lse.end());
      const auto co = compare_to_ref<float>(wo, out_acc);
      const auto cl = compare_to_ref<float>(wl, lse_acc);
      EXPECT_TRUE(co.within(1e-6)) << c.what << (half ? " half" : " full") << ": " << co.report("out");
      EXPECT_TRUE(cl.within(1e-6)) << c.what << (half ? " half" : " full") << ": " << cl.report("lse");
      out_acc = want_out, lse_acc = want_lse;  // the next step starts from the same state on both sides
    }
    std::vector<float> acc = thd_check_floats(9, kK, local * s.kv_row());
    for (const bool half : {true, false}) {
      const std::vector<int64_t> rows = half ? zigzag_half_rows(b, cp, 1) : std::vector<int64_t>{};
      const int64_t n = half ? static_cast<int64_t>(rows.size()) : local;
      const std::vector<float> step = thd_check_floats(11 + half, kV, n * s.kv_row());
      std::vector<float> want = acc;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < s.kv_row(); ++e) want[(half ? rows[i] : i) * s.kv_row() + e] += step[i * s.kv_row() + e];
      Backend::add_rows(step, acc, rows, s.kv_row());
      EXPECT_EQ(acc, want) << c.what << (half ? " half" : " full");
    }
  }
}

}  // namespace dcp::attn::testing

// A Backend for the checks above over the host entries thd_partition_<suffix>, ... (cuda:
// cuda/thd_cuda.h; emu: thd_emu.h), which share their signatures.
#define DCP_THD_ENTRIES(Name, suffix)                                                                       \
  struct Name {                                                                                             \
    template <typename T>                                                                                   \
    static std::vector<T> partition(std::span<const T> g, int64_t row, const ThdBatch& b, int cp, int r) {  \
      return thd_partition_##suffix<T>(g, row, b, cp, r);                                                   \
    }                                                                                                       \
    template <typename T>                                                                                   \
    static std::vector<T> unpartition(std::span<const T> s, int64_t row, const ThdBatch& b, int cp) {       \
      return thd_unpartition_##suffix<T>(s, row, b, cp);                                                    \
    }                                                                                                       \
    template <typename T>                                                                                   \
    static std::vector<T> gather_rows(std::span<const T> src, std::span<const int64_t> rows, int64_t row) { \
      return thd_gather_rows_##suffix<T>(src, rows, row);                                                   \
    }                                                                                                       \
    static void lse_merge(const AttnShape& s, std::span<const float> os, std::span<const float> ls,         \
                          std::span<float> oa, std::span<float> la, std::span<const int64_t> rows) {        \
      thd_lse_merge_##suffix(s, os, ls, oa, la, rows);                                                      \
    }                                                                                                       \
    static void add_rows(std::span<const float> step, std::span<float> acc, std::span<const int64_t> rows,  \
                         int64_t row) {                                                                     \
      thd_add_rows_##suffix(step, acc, rows, row);                                                          \
    }                                                                                                       \
  }
