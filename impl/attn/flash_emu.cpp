// See flash_emu.h.
#include "attn/flash_emu.h"

#include <cmath>
#include <limits>
#include <vector>

#include "attn/attn_ref.h"
#include "attn/cta_emu.h"
#include "attn/flash/flash_bwd_block.h"
#include "attn/flash/flash_fwd_block.h"
#include "core/error.h"
#include "core/nvtx.h"

namespace dcp::attn {

flash::FwdParams flash_fwd_params(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, size_t q,
                                  size_t k, size_t v, size_t out, size_t lse) {
  validate(s);
  DCP_REQUIRE(s.head_dim == 64 || s.head_dim == 128, "flash attention: head_dim=", s.head_dim,
              " unsupported (64 or 128)");
  validate_layout(bq);
  validate_layout(bk);
  DCP_REQUIRE(bq.batch() == bk.batch(), "flash attention: the query batch has ", bq.batch(),
              " sequences, the key batch ", bk.batch());
  check_sizes(s, bq.total_tokens(), bk.total_tokens(), q, k, v, out, lse);
  flash::FwdParams p;
  p.batch = bq.batch();
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.head_dim = s.head_dim;
  p.scale_log2 = static_cast<float>(s.scale() * 1.4426950408889634);
  p.causal = s.causal;
  return p;
}

flash::BwdParams flash_bwd_params(const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s, size_t q, size_t k,
                                  size_t v, size_t out, size_t lse, size_t dout, size_t dq, size_t dk, size_t dv) {
  const flash::FwdParams f = flash_fwd_params(bq, bk, s, q, k, v, out, lse);
  check_sizes(s, bq.total_tokens(), bk.total_tokens(), dout, dk, dv, dq, lse);
  flash::BwdParams p;
  static_cast<flash::VarlenProblem&>(p) = f;  // the shape; bind_bwd sets the arrays and tensors
  p.rows_q = bq.total_tokens();
  p.scale = static_cast<float>(s.scale());
  return p;
}

namespace {
void bind_arrays(flash::VarlenProblem& p, const FlashBatchArrays& a) {
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.seqstart_q = a.seqstart_q;
  p.seqstart_k = a.seqstart_k;
}
}  // namespace

void bind_fwd(flash::FwdParams& p, const FlashBatchArrays& a, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              uint16_t* out, float* lse) {
  bind_arrays(p, a);
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
}

void bind_bwd(flash::BwdParams& p, const FlashBatchArrays& a, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              const uint16_t* out, const float* lse, const uint16_t* dout, float* delta, float* dq_accum, uint16_t* dq,
              uint16_t* dk, uint16_t* dv) {
  bind_arrays(p, a);
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = out;
  p.lse = lse;
  p.dout = dout;
  p.delta = delta;
  p.dq_accum = dq_accum;
  p.dq = dq;
  p.dk = dk;
  p.dv = dv;
}

int flash_bwd_n_blocks(const ThdBatch& bk) {
  int n = 0;
  for (int j = 0; j < bk.batch(); ++j)
    n = std::max(n, (bk.padded_seqlen(j) + flash::kBlockN - 1) / flash::kBlockN);
  return n;
}

flash::FwdGrid flash_fwd_grid(const ThdBatch& bq, int tiles_m) {
  DCP_REQUIRE(tiles_m == 1 || tiles_m == 2, "the forward takes 1 or 2 m16 tiles per warp, not ", tiles_m);
  const int rows = flash::fwd_block_rows(tiles_m);
  int m = 0;
  for (int j = 0; j < bq.batch(); ++j) m = std::max(m, (bq.padded_seqlen(j) + rows - 1) / rows);
  return {m, tiles_m};
}

namespace {

using emu::HostCtx;
using emu::run_grid;

FlashBatchArrays host_arrays(const ThdBatch& bq, const ThdBatch& bk) {
  return {bq.cu_seqlens.data(), bk.cu_seqlens.data(), bq.cu_seqlens_padded.data(), bk.cu_seqlens_padded.data()};
}

template <class E, int D, int MT>
void run_fwd_tiles(const flash::FwdParams& p, int m_blocks) {
  run_grid(m_blocks, p.heads, p.batch, flash::fwd_smem_elems(D, MT), [&](HostCtx& c, int m, int h, int b, uint16_t* smem) {
    flash::flash_fwd_block<HostCtx, E, D, MT>(c, p, m, h, b, smem);
  });
}
template <class E, int D>
void run_fwd(const flash::FwdParams& p, flash::FwdGrid grid) {
  if (grid.tiles_m == 1) run_fwd_tiles<E, D, 1>(p, grid.m_blocks);
  else run_fwd_tiles<E, D, 2>(p, grid.m_blocks);
}

template <class E, int D>
void run_bwd(const flash::BwdParams& p, int n_blocks) {
  for (int64_t pair = 0; pair < p.rows_q * p.heads; ++pair) flash::flash_bwd_prep<E, D>(p, pair);
  run_grid(n_blocks, p.kv_heads, p.batch, flash::bwd_smem_elems(D), [&](HostCtx& c, int n, int hk, int b, uint16_t* smem) {
    flash::flash_bwd_block<HostCtx, E, D>(c, p, n, hk, b, smem);
  });
  for (int64_t i = 0; i < p.rows_q * p.heads * D; ++i) flash::flash_bwd_dq<E>(p, i);
}

}  // namespace

void flash_bwd_emulated(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                        std::span<const uint16_t> q, std::span<const uint16_t> k, std::span<const uint16_t> v,
                        std::span<const uint16_t> out, std::span<const float> lse, std::span<const uint16_t> dout,
                        std::span<uint16_t> dq, std::span<uint16_t> dk, std::span<uint16_t> dv) {
  DCP_NVTX_RANGE();
  flash::BwdParams p = flash_bwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size(), dout.size(),
                                        dq.size(), dk.size(), dv.size());
  std::vector<float> delta(lse.size(), std::numeric_limits<float>::quiet_NaN()), dq_accum(dq.size(), 0.f);
  bind_bwd(p, host_arrays(bq, bk), q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(), delta.data(),
           dq_accum.data(), dq.data(), dk.data(), dv.data());
  const int n_blocks = flash_bwd_n_blocks(bk);
  if (half == Half::bf16) {
    if (s.head_dim == 64) run_bwd<flash::Bf16, 64>(p, n_blocks);
    else run_bwd<flash::Bf16, 128>(p, n_blocks);
  } else {
    if (s.head_dim == 64) run_bwd<flash::Fp16, 64>(p, n_blocks);
    else run_bwd<flash::Fp16, 128>(p, n_blocks);
  }
}

void flash_fwd_emulated(Half half, const ThdBatch& bq, const ThdBatch& bk, const AttnShape& s,
                        std::span<const uint16_t> q, std::span<const uint16_t> k,
                        std::span<const uint16_t> v, std::span<uint16_t> out, std::span<float> lse, int tiles_m) {
  DCP_NVTX_RANGE();
  flash::FwdParams p = flash_fwd_params(bq, bk, s, q.size(), k.size(), v.size(), out.size(), lse.size());
  bind_fwd(p, host_arrays(bq, bk), q.data(), k.data(), v.data(), out.data(), lse.data());
  const flash::FwdGrid grid = flash_fwd_grid(bq, tiles_m);
  if (grid.m_blocks == 0) return;
  if (half == Half::bf16) {
    if (s.head_dim == 64) run_fwd<flash::Bf16, 64>(p, grid);
    else run_fwd<flash::Bf16, 128>(p, grid);
  } else {
    if (s.head_dim == 64) run_fwd<flash::Fp16, 64>(p, grid);
    else run_fwd<flash::Fp16, 128>(p, grid);
  }
}

}  // namespace dcp::attn
