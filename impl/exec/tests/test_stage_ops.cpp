// The ops a measured run of a rank's micro-batch replays (stage_ops.h) are the work the cost
// model charges: GEMM FLOPs equal its per-token formula at the rank's rows, the backward twice
// the forward, the recompute once more; over the ranks of a group the ring steps attend every
// causal (query, key) pair of every sequence exactly once.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cost/flops.h"
#include "exec/stage_ops.h"

#include <algorithm>
#include <string>

namespace dcp::exec {
namespace {

int64_t thd_rows(const std::vector<int64_t>& lengths, int k) {
  int64_t rows = 0;
  for (int64_t L : lengths) rows += (L + 2 * k - 1) / (2 * k) * 2 * k / k;
  return rows;
}

TEST(StageOps, GemmFlopsAreTheCostModels) {
  const cost::ModelConfig m = cost::model_preset("llama3-8b");
  const std::vector<int64_t> lengths = {5000, 333, 1, 64};
  for (const int k : {1, 2, 8})
    for (const bool last : {false, true})
      for (const bool recompute : {false, true}) {
        const StageWork w = stage_ops(m, lengths, k, k - 1, 3, last, recompute);
        const double T = static_cast<double>(thd_rows(lengths, k));
        ASSERT_EQ(w.rows, thd_rows(lengths, k));
        const double fwd = 3 * cost::fwd_layer_gemm_flops_per_token(m) * T +
                           (last ? cost::fwd_logits_flops_per_token(m) * T : 0.0);
        EXPECT_NEAR(gemm_flops(w, Pass::fwd), fwd, 1e-9 * fwd) << "k " << k;
        EXPECT_NEAR(gemm_flops(w, Pass::bwd), 2 * fwd, 2e-9 * fwd) << "k " << k;  // dgrad + wgrad
        const double re = recompute ? 3 * cost::fwd_layer_gemm_flops_per_token(m) * T : 0.0;
        EXPECT_NEAR(gemm_flops(w, Pass::recompute), re, 1e-9 * fwd);
      }
}

// Each linear layer W [out, in] runs as TransformerEngine runs it: forward X [T, in] W^T (nt),
// dgrad dY [T, out] W (nn, 16-bit), wgrad dY^T X [out, in] over the T rows into fp32 (tn,
// accumulating: Megatron's gradient accumulation fusion), the three with the same out and in.
TEST(StageOps, GemmFormsAreALinearLayers) {
  const cost::ModelConfig m = cost::model_preset("llama3-8b");
  const StageWork w = stage_ops(m, {700, 33}, 2, 1, 2, true, true);
  int fwd = 0, dgrad = 0, wgrad = 0;
  for (const StageOp& o : w.ops) {
    if (o.kind != OpKind::gemm) continue;
    const std::string name = o.name;
    if (o.pass != Pass::bwd) {
      ++fwd;
      EXPECT_EQ(o.form, GemmForm::nt) << name;
      EXPECT_FALSE(o.accumulate_fp32) << name;
      EXPECT_EQ(o.m, w.rows) << name;
    } else if (name.ends_with(".dgrad")) {
      ++dgrad;
      EXPECT_EQ(o.form, GemmForm::nn) << name;
      EXPECT_FALSE(o.accumulate_fp32) << name;
      EXPECT_EQ(o.m, w.rows) << name;
    } else {
      ASSERT_TRUE(name.ends_with(".wgrad")) << name;
      ++wgrad;
      EXPECT_EQ(o.form, GemmForm::tn) << name;
      EXPECT_TRUE(o.accumulate_fp32) << name;
      EXPECT_EQ(o.k, w.rows) << name;
      // Its dgrad (the op before it) has the same weight: dgrad [T, in] = [T, out] x [out, in].
      const StageOp& d = *(&o - 1);
      EXPECT_EQ(std::string(d.name), name.substr(0, name.size() - 5) + "dgrad");
      EXPECT_EQ(o.m, d.k) << name;  // out
      EXPECT_EQ(o.n, d.n) << name;  // in
    }
  }
  EXPECT_EQ(dgrad, wgrad);
  EXPECT_EQ(wgrad, 2 * 4 + 1);  // 2 layers x (qkv, proj, fc1, fc2) + the output layer
  EXPECT_EQ(fwd, 2 * 2 * 4 + 1);  // forward and recompute of the layers, the output layer once
}

// The THD side kernels' inputs of every ring step: read-half rows exactly for the lower (src's
// front half) and upper (this rank's back half) steps, half of the local rows, distinct and inside
// them; the group's last step marked once per layer and pass; nothing of it at cp = 1.
TEST(StageOps, RingStepsCarryTheSideKernelsRows) {
  const cost::ModelConfig m = cost::model_preset("llama3-8b");
  const std::vector<int64_t> lengths = {700, 33, 1, 0, 4096};
  for (const int k : {1, 2, 4})
    for (int r = 0; r < k; ++r) {
      const StageWork w = stage_ops(m, lengths, k, r, 2, false, true);
      int steps = 0, last = 0;
      for (const StageOp& o : w.ops) {
        if (o.kind != OpKind::attention) continue;
        ++steps;
        last += o.last_step;
        EXPECT_EQ(o.cp_size, k);
        EXPECT_EQ(o.local_rows, w.rows);
        const bool half = o.step == attn::RingStep::lower || o.step == attn::RingStep::upper;
        ASSERT_EQ(o.gather_rows != nullptr, half) << "k " << k << " rank " << r << " " << o.name;
        if (!half) continue;
        EXPECT_EQ(static_cast<int64_t>(o.gather_rows->size()) * 2, w.rows) << o.name;
        std::vector<int64_t> sorted = *o.gather_rows;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << o.name;
        EXPECT_GE(sorted.front(), 0);
        EXPECT_LT(sorted.back(), w.rows);
      }
      EXPECT_EQ(steps, 3 * 2 * k);  // forward, recompute, backward of 2 layers, k steps each
      EXPECT_EQ(last, 3 * 2);
    }
}

TEST(StageOps, RingStepsOfAGroupAttendEveryCausalPairOnce) {
  const cost::ModelConfig m = cost::model_preset("llama-13b");
  const std::vector<int64_t> lengths = {4097, 128, 31, 1, 0, 2048};
  double pairs = 0;
  for (int64_t L : lengths) pairs += static_cast<double>(L) * static_cast<double>(L + 1) / 2;
  const double per_pair = 4.0 * m.heads * m.head_dim_or_default();
  for (const int k : {1, 2, 4, 8}) {
    double fwd = 0, bwd = 0;
    for (int r = 0; r < k; ++r) {
      const StageWork w = stage_ops(m, lengths, k, r, 2, false, true);
      fwd += attention_flops(w, Pass::fwd);
      bwd += attention_flops(w, Pass::bwd);
      EXPECT_NEAR(attention_flops(w, Pass::recompute), attention_flops(w, Pass::fwd), 1e-6);
    }
    EXPECT_NEAR(fwd, 2 * per_pair * pairs, 1e-9 * fwd) << "k " << k;  // 2 layers
    EXPECT_NEAR(bwd, 2.5 * fwd, 1e-9 * bwd) << "k " << k;
    // The cost model's causal attention (fwd_layer_attn_flops_per_token_sq = 2 q per L^2 and layer:
    // half the square) differs from the exact count by the diagonal, L / 2 pairs per sequence.
    double model = 0;
    for (int64_t L : lengths) model += 2 * cost::fwd_layer_attn_flops_per_token_sq(m) * static_cast<double>(L) * L;
    EXPECT_NEAR(fwd, model, 2 * per_pair * 0.5 * (4097 + 128 + 31 + 1 + 2048)) << "k " << k;
  }
}

TEST(StageOps, BadInputIsRefused) {
  const cost::ModelConfig m = cost::model_preset("tiny");
  EXPECT_THROW(stage_ops(m, {10}, 2, 2, 1, false, false), InputError);
  EXPECT_THROW(stage_ops(m, {-1}, 1, 0, 1, false, false), InputError);
  EXPECT_THROW(stage_ops(m, {10}, 1, 0, -1, false, false), InputError);
}

}  // namespace
}  // namespace dcp::exec
