// Mamba-style mixer: a selective state-space scan with one scalar decay per head (the Mamba-2 /
// SSD form: Dao & Gu 2024, "Transformers are SSMs: Generalized Models and Efficient Algorithms
// Through Structured State Space Duality", §3 and the Mamba2 block of their reference code), with
// context parallelism by all-to-all (reference/megatron-dynamic-cp.md §5 "Mamba under CP",
// Megatron's mamba_context_parallel.py).
//
//   [z, xs, B, C, dt] = x W_in^T          z, xs [d_inner = heads * head_dim], B, C [N], dt [heads]
//   per head h, per sequence (state S [head_dim, N] = 0 at every sequence start, real rows in
//   sequence order):
//     dta_t = softplus(dt_t + dt_bias[h]);  a_t = exp(-exp(A_log[h]) * dta_t)
//     S_t = a_t S_{t-1} + dta_t xs_t (x) B_t;  y_t = S_t C_t + D[h] xs_t
//   out = y * silu(z);  result = out W_out^T
// One group of B/C (ngroups = 1). Omitted from Mamba-2, on purpose: the depthwise conv1d over
// [xs, B, C] and the gated RMSNorm before out_proj (the scan, the gating and the CP data flow are
// what this model has to exercise; both omitted parts are per-channel and would not change it).
// Padding rows (after a sequence's real rows) are outside the scan: their y is 0, so they add
// nothing to any gradient, whatever their upstream gradient.
//
// Parameters (Mamba-2 names; initialisation as Mamba-2's Mamba2.__init__ unless stated):
//   <name>.in_proj.weight  [2 d_inner + 2 N + heads, hidden]  normal_std(init_std) (Megatron init)
//   <name>.dt_bias         [heads]  inverse softplus of dt ~ log-uniform(1e-3, 1e-1): Mamba-2 draws
//                          dt log-uniformly in [dt_min, dt_max] = [1e-3, 1e-1] and stores
//                          dt + log(-expm1(-dt)) = log(expm1(dt)) ~ log(dt) + dt/2; we draw it
//                          uniformly in [log(expm1(1e-3)), log(expm1(1e-1))] (the same range,
//                          nearly the same law, and a stateless ParamInit).
//   <name>.A_log           [heads]  log(uniform(1, 16))  (Mamba-2 A_init_range)
//   <name>.D               [heads]  1
//   <name>.out_proj.weight [hidden, d_inner]  normal_std(init_std)
//
// Context parallelism over the micro-batch's group of cp ranks (cp must divide heads; §7r):
// this rank holds the zigzag shard [rows_local, hidden] of the group's packed batch. After
// in_proj, an all-to-all makes the tensors head-sharded: rank r receives, for every row of the
// batch, xs and dt of its heads [r heads/cp, (r+1) heads/cp) and B, C in full (ngroups = 1 < cp:
// repeated to every rank, Megatron's group_repeat). The zigzag order is undone (rank p's block
// goes to the rows attn::zigzag_rows(thd, cp, p)), the scan runs over whole sequences with this
// rank's slice of dt_bias / A_log / D (their gradients land in that slice of the full tensors;
// the other slices stay 0 on this rank, so the executor's sum over ranks gives the full
// gradient, as Megatron slices the parameters in the forward), then the zigzag is redone and a
// second all-to-all returns y as [rows_local, d_inner]. Gating and out_proj are local. The
// backward mirrors it: the gradient of an all-to-all is the reverse all-to-all, and the dB/dC of
// every rank's heads are summed (in rank order, deterministic) on the rows' owner.
// CP group switching (§5, PR2000's MambaMixer.forward): forward and backward run inside a
// CpGroupScope; a size that does not divide the heads is rejected before the group is switched.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "model/kernels.h"
#include "model/layer.h"
#include "model/packed_seq.h"
#include "model/params.h"

namespace dcp::model {

template <typename T>
class MambaMixer final : public Layer<T>, public CpAware {
 public:
  MambaMixer(const std::string& name, const ModelConfig& c, ParamStore<T>& p, Kernels<T>& k,
             comm::Communicator* own_group = nullptr);
  const char* kind() const override { return "mamba"; }
  void forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) override;
  void backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) override;

  int in_proj_width() const { return 2 * inner_ + 2 * state_ + heads_; }

 protected:
  // InputError naming the mixer, `size` and the head count unless size divides the heads.
  void check_cp_size(int size) const override;

 private:
  // Column offsets inside one row of in_proj's output [z | xs | B | C | dt].
  int col_xs() const { return inner_; }
  int col_b() const { return 2 * inner_; }
  int col_dt() const { return 2 * inner_ + 2 * state_; }

  // Sequence-sharded [rows_local, *] <-> head-sharded in sequence order [total, *] (see above).
  void to_heads_fwd(const MicroBatchView& mb);
  void from_heads_fwd(const MicroBatchView& mb);
  void to_heads_bwd(const MicroBatchView& mb);
  void from_heads_bwd(const MicroBatchView& mb);
  void exchange(size_t block_elems);  // all-to-all of send_ into recv_, cp blocks of block_elems

  std::string name_;
  int hidden_, heads_, head_dim_, state_, inner_;
  ParamStore<T>& p_;
  Kernels<T>& k_;
  ParamId w_in_, dt_bias_, a_log_, d_, w_out_;

  // Kept from forward for backward: the input, in_proj's output, the head-sharded scan inputs
  // (sequence order) and the local scan output / gated output.
  std::vector<T> x_, zxbcdt_, h_xs_, h_b_, h_c_, h_dt_, y_, out_;
  // Scratch (reused across calls: no per-row allocation).
  std::vector<T> send_, recv_, h_y_, dout_, dzxbcdt_, dy_, h_dy_, h_dxs_, h_ddt_, h_db_, h_dc_, dbc_;
  std::vector<std::vector<int64_t>> zz_;  // zz_[q] = attn::zigzag_rows(thd, cp, q)
};

}  // namespace dcp::model
