// Tests of the costs added by cost model v2 (issue 8), each against a hand-computed value:
// attention tables with tile quantisation, the host/launch floor and the ring's host costs, the THD
// side kernels and cuDNN's zero-fills and the per-iteration costs (the memory model: test_memory.cpp).
#include "core/error.h"
#include "cost/attention_table.h"
#include "cost/flops.h"
#include "cost/hardware.h"
#include "cost/time_model.h"
#include "unit_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace dcp::cost {
namespace {

using testing::unit_model;  // tests/unit_model.h

TEST(AttentionTable, ShortSequencesPayWholeTiles) {
  const auto p = hardware_preset("h100-sxm");
  const double at128 = p.attn_efficiency("fa3", AttnKind::fwd_causal, 128, 128, 128);
  EXPECT_NEAR(at128 * 989, 90, 1e-9);
  // 64 tokens still run one 128 x 128 tile: a quarter of the work per tile.
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_causal, 64, 64, 128), at128 * 0.25, 1e-12);
  // 200 tokens run 2 tiles of 128 along each axis: 200/256 used; grid value between 128 and 256.
  const double grid200 = (90 + (165 - 90) * std::log2(200.0 / 128)) / 989;
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_causal, 200, 200, 128),
              grid200 * (200.0 / 256) * (200.0 / 256), 1e-12);
  // FA2's forward K tile is 64 rows: 64 keys fill it; FA3's 128-row tile is half used.
  EXPECT_NEAR(p.attn_efficiency("fa2", AttnKind::fwd_full, 128, 64, 128),
              p.attn_efficiency("fa2", AttnKind::fwd_full, 128, 128, 128), 1e-12);
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_full, 128, 64, 128),
              0.5 * p.attn_efficiency("fa3", AttnKind::fwd_full, 128, 128, 128), 1e-12);
  EXPECT_DOUBLE_EQ(tile_utilization(1, 128), 1.0 / 128);
  EXPECT_DOUBLE_EQ(tile_utilization(256, 128), 1.0);
}

TEST(AttentionTable, ForwardAmortisesOverKeysBackwardOverQueries) {
  const auto p = hardware_preset("h100-sxm");
  // Forward: the key length sets the efficiency (565 at 1k keys, whatever the queries).
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_full, 16384, 1024, 128) * 989, 565, 1e-9);
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_full, 512, 1024, 128) * 989, 565, 1e-9);
  // Backward: the query length does (424 at 1k queries).
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::bwd, 1024, 16384, 128) * 989, 424, 1e-9);
  // Between grid points: linear in log2 (geometric midpoint of 512 and 1024 keys = 724.08, which
  // runs 6 key tiles of 128: 724.08 / 768 of them used).
  const double k = std::sqrt(512.0 * 1024);
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_full, 1024, k, 128) * 989, (467 + 565) / 2.0 * k / 768, 1e-9);
  // Flat above the table.
  EXPECT_NEAR(p.attn_efficiency("cudnn", AttnKind::fwd_full, 1 << 20, 1 << 20, 128) * 989, 595, 1e-9);
}

TEST(AttentionTable, JsonRoundTripAndValidation) {
  const auto tables = h100_attention_tables();
  ASSERT_EQ(tables.size(), 3u);
  for (const auto& t : tables) {
    const auto back = attention_table_from_json(attention_table_to_json(t), "t");
    EXPECT_EQ(attention_table_to_json(back), attention_table_to_json(t));
    EXPECT_NO_THROW(validate_attention_table(back, "p"));
  }
  auto bad = tables[0];
  bad.fwd_full[3] = 1.5;
  EXPECT_THROW(validate_attention_table(bad, "p"), InputError);
  EXPECT_THROW(attention_table_from_json(nlohmann::json::parse(R"({"backend": "x", "lengths": [1],
      "fwd_causal": [[1]], "fwd_full": [[1]], "bwd": [[1]], "tiles": 3})"), "t"), InputError);
}

// Which table each attention block reads: a causal block (a cp = 1 sequence, a ring's diagonal
// step, all-gather CP) the causal backward, an off-diagonal ring step the non-causal one. Every
// table of the unit profile set to causal 0.5, full 1.0, backward 0.8 (causal backward 0.4); the
// unit model's attention costs 256 FLOPs per token^2 per layer, 2.5x in the backward, 2 layers,
// against the unit profile's flat 1.0 tables.
TEST(AttentionKinds, CausalBackwardOnCausalBlocksOnly) {
  auto flat = unit_model();
  auto cm = flat;
  for (auto& t : cm.hardware.attention_tables) {
    t.fwd_causal = {0.5};
    t.fwd_full = {1.0};
    t.bwd = {0.8};
  }
  const std::vector<int64_t> l{1000};
  const auto bwd_delta = [&](int k) {
    return group_stage_times(cm, l, k, 0, 0).bwd.compute_s - group_stage_times(flat, l, k, 0, 0).bwd.compute_s;
  };
  // k = 1: 2.5 x 256 x 1000^2 = 640e6 FLOPs per layer at 0.4 instead of 1.0.
  EXPECT_NEAR(bwd_delta(1), 2 * 640e6 * (1 / 0.4e12 - 1 / 1e12), 1e-15);
  // k = 2 ring: each step 2.5 x 256 x 500^2 = 160e6 FLOPs; the diagonal at 0.4, the other at 0.8.
  EXPECT_NEAR(bwd_delta(2), 2 * (160e6 / 0.4e12 + 160e6 / 0.8e12 - 2 * 160e6 / 1e12), 1e-15);
  // All-gather CP: the rank's causal share, 2.5 x 256 x 1000^2 / 2 = 320e6 FLOPs, at 0.4.
  cm.training.cp_comm = flat.training.cp_comm = CpComm::all_gather;
  EXPECT_NEAR(bwd_delta(2), 2 * 320e6 * (1 / 0.4e12 - 1 / 1e12), 1e-15);
  // The forward is unchanged in kind: causal at 0.5.
  EXPECT_NEAR(group_stage_times(cm, l, 1, 0, 0).fwd.compute_s - group_stage_times(flat, l, 1, 0, 0).fwd.compute_s,
              2 * 256e6 * (1 / 0.5e12 - 1 / 1e12), 1e-15);
}

// The main-gradient adds of a backward pass (Megatron's DDP hook). The unit model
// (tests/unit_model.h) has 197,504 parameters in 15 tensors: per layer QKV, projection, fc1, fc2
// (98,304) and two RMSNorm weights (256); the embedding (128); the final norm (128); the untied
// output weight (128). The embedding's backward also writes a dense bf16 gradient (2 B each).
TEST(GradAccumulation, AddsChargeTrafficAndHostPerPass) {
  auto cm = unit_model();
  cm.hardware.hbm_bytes_per_s = 1e9;
  cm.hardware.grad_add_host_s = 1e-5;
  // With the fusion (Megatron's default) the GEMM weights accumulate in place; the norms (512),
  // the embedding (128) and the final norm (128) still go through the hook: 6 tensors. Each add
  // reads the bf16 gradient (2 B) and reads and writes the fp32 main gradient (4 + 4 B).
  EXPECT_NEAR(grad_add(cm, 0).gpu_s, (10.0 * 768 + 2 * 128) / 1e9, 1e-15);
  EXPECT_NEAR(grad_add(cm, 0).host_s, 6 * 1e-5, 1e-15);
  // --no-gradient-accumulation-fusion: every parameter, 15 tensors.
  cm.training.gradient_accumulation_fusion = false;
  EXPECT_NEAR(grad_add(cm, 0).gpu_s, (10.0 * 197504 + 2 * 128) / 1e9, 1e-15);
  EXPECT_NEAR(grad_add(cm, 0).host_s, 15 * 1e-5, 1e-15);
  cm.training.grad_reduce_fp32 = false;  // bf16 main gradients: 2 + 2 + 2 B
  EXPECT_NEAR(grad_add(cm, 0).gpu_s, (6.0 * 197504 + 2 * 128) / 1e9, 1e-15);
  cm.training.grad_reduce_fp32 = true;
  // The backward pass carries it: GPU time in compute, host time in the host floor.
  auto fused = cm;
  fused.training.gradient_accumulation_fusion = true;
  const std::vector<int64_t> l{1000};
  EXPECT_NEAR(group_stage_times(cm, l, 1, 0, 0).bwd.compute_s - group_stage_times(fused, l, 1, 0, 0).bwd.compute_s,
              10.0 * (197504 - 768) / 1e9, 1e-15);
  EXPECT_EQ(group_stage_times(cm, l, 1, 0, 0).fwd.compute_s, group_stage_times(fused, l, 1, 0, 0).fwd.compute_s);
  // PP 2: one layer per stage; the embedding on the first, the final norm and output on the last.
  auto pp = unit_model(2, 2);
  pp.hardware.hbm_bytes_per_s = 1e9;
  pp.hardware.grad_add_host_s = 1e-5;
  EXPECT_NEAR(grad_add(pp, 0).gpu_s, (10.0 * 384 + 2 * 128) / 1e9, 1e-15);
  EXPECT_NEAR(grad_add(pp, 0).host_s, 3 * 1e-5, 1e-15);
  EXPECT_NEAR(grad_add(pp, 1).gpu_s, 10.0 * 384 / 1e9, 1e-15);
  EXPECT_NEAR(grad_add(pp, 1).host_s, 3 * 1e-5, 1e-15);
  pp.training.gradient_accumulation_fusion = false;
  EXPECT_NEAR(grad_add(pp, 0).gpu_s, (10.0 * (98560 + 128) + 2 * 128) / 1e9, 1e-15);
  EXPECT_NEAR(grad_add(pp, 0).host_s, 7 * 1e-5, 1e-15);
  EXPECT_NEAR(grad_add(pp, 1).gpu_s, 10.0 * (98560 + 256) / 1e9, 1e-15);
  EXPECT_NEAR(grad_add(pp, 1).host_s, 8 * 1e-5, 1e-15);
  // Tied embeddings with PP 1: the output weight is the embedding's own tensor, and autograd sums
  // the two bf16 gradients before the hook (read 2 + 2 B, write 2 B per entry).
  cm.model.tied_embeddings = true;
  EXPECT_NEAR(grad_add(cm, 0).host_s, 14 * 1e-5, 1e-15);
  EXPECT_NEAR(grad_add(cm, 0).gpu_s, (10.0 * (197504 - 128) + 2 * 128 + 6 * 128) / 1e9, 1e-15);
}

// A micro-batch's fixed host cost: its data and packed-sequence parameters on every virtual stage,
// the embedding only on the first, the output layer and loss only on the last (it had been the
// whole sum on every virtual stage).
TEST(HostFloor, MicroBatchFixedCostByVirtualStage) {
  auto cm = unit_model();
  cm.hardware.microbatch_every_stage_s = 1e-4;
  cm.hardware.microbatch_first_stage_s = 2e-5;
  cm.hardware.microbatch_last_stage_s = 3e-5;
  cm.cluster.pp = 2;
  cm.cluster.vpp = 2;  // virtual stages 0 .. 3; stage 0 holds 0 and 2, stage 1 holds 1 and 3
  EXPECT_DOUBLE_EQ(microbatch_overhead(cm, 0), 1.2e-4);
  EXPECT_DOUBLE_EQ(microbatch_overhead(cm, 1), 1e-4);
  EXPECT_DOUBLE_EQ(microbatch_overhead(cm, 2), 1e-4);
  EXPECT_DOUBLE_EQ(microbatch_overhead(cm, 3), 1.3e-4);
  cm.cluster.pp = 1;
  cm.cluster.vpp = 1;  // one stage is both
  EXPECT_DOUBLE_EQ(microbatch_overhead(cm, 0), 1.5e-4);
  // Half of it in each pass (the GPU-bound unit model: no host excess).
  const std::vector<int64_t> l{1000};
  const auto st = group_stage_times(cm, l, 1, 0, 0);
  EXPECT_NEAR(st.fwd.overhead_s, 0.75e-4, 1e-15);
  EXPECT_NEAR(st.bwd.overhead_s, 0.75e-4, 1e-15);
  cm.cluster.pp = 2;  // a middle-free two-stage pipeline: stage 0 the embedding's, stage 1 the loss's
  EXPECT_NEAR(group_stage_times(cm, l, 1, 0, 0).fwd.overhead_s, 0.6e-4, 1e-15);
  EXPECT_NEAR(group_stage_times(cm, l, 1, 0, 1).fwd.overhead_s, 0.65e-4, 1e-15);
}

TEST(HostFloor, PassTakesTheLongerOfGpuAndHostTime) {
  auto cm = unit_model();
  cm.hardware.host_layer_fwd_s = 1e-3;
  cm.hardware.host_layer_bwd_s = 2e-3;
  cm.hardware.ring_step_fwd_s = 1e-4;
  cm.hardware.ring_step_bwd_s = 3e-4;
  cm.hardware.microbatch_every_stage_s = 4e-5;
  const std::vector<int64_t> l{1000};
  // k = 1: GPU fwd 905,472,000 flops = 9.05472e-4 s < host 2 layers x 1 ms.
  const auto one = group_stage_times(cm, l, 1, 0, 0);
  EXPECT_NEAR(one.fwd.total_s(), 2e-3 + 2e-5, 1e-12);
  EXPECT_NEAR(one.fwd.overhead_s, 2e-3 - 9.05472e-4 + 2e-5, 1e-12);
  EXPECT_NEAR(one.bwd.total_s(), std::max(2.066944e-3, 4e-3) + 2e-5, 1e-12);
  // k = 2: the ring adds its call (with the first step) and k - 1 later steps per layer to the
  // host time; nothing at k = 1.
  cm.hardware.ring_call_fwd_s = 5e-5;
  cm.hardware.ring_call_bwd_s = 7e-5;
  const auto two = group_stage_times(cm, l, 2, 0, 0);
  EXPECT_NEAR(two.fwd.total_s(), 2 * (1e-3 + 5e-5 + 1e-4) + 2e-5, 1e-12);
  EXPECT_NEAR(two.bwd.total_s(), 2 * (2e-3 + 7e-5 + 3e-4) + 2e-5, 1e-12);
  EXPECT_NEAR(group_stage_times(cm, l, 1, 0, 0).fwd.total_s(), one.fwd.total_s(), 1e-15);
  // Recompute: the backward also issues the forward's host work.
  cm.training.recompute_full = true;
  const auto rc = group_stage_times(cm, l, 2, 0, 0);
  EXPECT_NEAR(rc.bwd.total_s(), 2 * (2e-3 + 7e-5 + 3e-4) + 2 * (1e-3 + 5e-5 + 1e-4) + 2e-5, 1e-12);
  // A GPU-bound pass keeps its GPU time: no overhead beyond the micro-batch's share.
  cm.hardware.host_layer_fwd_s = 1e-9;
  cm.hardware.ring_step_fwd_s = 0;
  EXPECT_NEAR(group_stage_times(cm, l, 1, 0, 0).fwd.overhead_s, 2e-5, 1e-15);
}

TEST(ThdSideKernels, HbmTrafficProportionalToStepsAfterTheFirstTimesTokens) {
  auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  cm.hardware.hbm_bytes_per_s = 1e9;  // (the main-gradient adds are the same in both)
  const auto none = group_stage_times(cm, l, 2, 0, 0);
  cm.hardware.thd_side_fwd_bytes_q = 1;
  cm.hardware.thd_side_fwd_bytes_kv = 2;
  cm.hardware.thd_side_bwd_bytes_q = 3;
  cm.hardware.thd_side_bwd_bytes_kv = 4;
  // k = 2: (k-1) * T * (1 * 128 + 2 * 128) = 1 * 500 * 384 = 192,000 B per layer, 2 layers.
  const auto two = group_stage_times(cm, l, 2, 0, 0);
  EXPECT_NEAR(two.fwd.compute_s - none.fwd.compute_s, 2 * 192000 / 1e9, 1e-15);
  EXPECT_NEAR(two.bwd.compute_s - none.bwd.compute_s, 2 * 500 * (3 * 128 + 4 * 128) / 1e9, 1e-15);
  // k = 4: 3 steps x 250 tokens x 384 B.
  const auto four = group_stage_times(cm, l, 4, 0, 0);
  cm.hardware.hbm_bytes_per_s = 0;
  const auto four0 = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(four.fwd.compute_s - four0.fwd.compute_s, 2 * 3 * 250 * 384 / 1e9, 1e-15);
  // The first step's own corrections and KV copies: T local tokens x (5 q + 8 kv) forward, x (6 q +
  // 7 kv) backward, at any k > 1 (k = 4: 250 tokens).
  cm.hardware.hbm_bytes_per_s = 1e9;
  cm.hardware.thd_side_first_fwd_bytes_q = 5;
  cm.hardware.thd_side_first_fwd_bytes_kv = 8;
  cm.hardware.thd_side_first_bwd_bytes_q = 6;
  cm.hardware.thd_side_first_bwd_bytes_kv = 7;
  const auto first = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(first.fwd.compute_s - four.fwd.compute_s, 2 * 250 * (5 + 8) * 128 / 1e9, 1e-15);
  EXPECT_NEAR(first.bwd.compute_s - four.bwd.compute_s, 2 * 250 * (6 * 128 + 7 * 128) / 1e9, 1e-15);
  // k = 1: no ring, no side kernels.
  const auto one = group_stage_times(cm, l, 1, 0, 0);
  cm.hardware.hbm_bytes_per_s = 0;
  EXPECT_DOUBLE_EQ(one.fwd.compute_s, group_stage_times(cm, l, 1, 0, 0).fwd.compute_s);
}

// q and kv terms scale with their own widths: under grouped-query attention (4 query heads, 1 KV
// head of dim 32: q_dim 128, kv_dim 32) a key read with the other width would be off by 4x. Each
// key alone, k = 4 (250 local tokens, 3 steps after the first), 2 layers, both layouts.
TEST(ThdSideKernels, QAndKvKeysScaleWithTheirOwnWidthsUnderGqa) {
  auto cm = unit_model();
  cm.model.heads = 4;
  cm.model.kv_heads = 1;
  cm.model.head_dim = 32;
  ASSERT_EQ(cm.model.q_dim(), 128);
  ASSERT_EQ(cm.model.kv_dim(), 32);
  const std::vector<int64_t> l{1000};
  cm.hardware.hbm_bytes_per_s = 1e9;
  struct Key {
    double HardwareProfile::*field;
    QkvFormat format;
    bool backward;
    double per_token;  // bytes per local token per unit of the key, q_dim or kv_dim times steps
  };
  const Key keys[] = {
      {&HardwareProfile::thd_side_fwd_bytes_q, QkvFormat::thd, false, 3 * 128},
      {&HardwareProfile::thd_side_fwd_bytes_kv, QkvFormat::thd, false, 3 * 32},
      {&HardwareProfile::thd_side_bwd_bytes_q, QkvFormat::thd, true, 3 * 128},
      {&HardwareProfile::thd_side_bwd_bytes_kv, QkvFormat::thd, true, 3 * 32},
      {&HardwareProfile::thd_side_first_fwd_bytes_q, QkvFormat::thd, false, 128},
      {&HardwareProfile::thd_side_first_fwd_bytes_kv, QkvFormat::thd, false, 32},
      {&HardwareProfile::thd_side_first_fwd_bytes_kv, QkvFormat::bshd, false, 32},
      {&HardwareProfile::thd_side_first_bwd_bytes_q, QkvFormat::thd, true, 128},
      {&HardwareProfile::thd_side_first_bwd_bytes_kv, QkvFormat::thd, true, 32},
      {&HardwareProfile::thd_side_first_bwd_bytes_kv, QkvFormat::bshd, true, 32},
      {&HardwareProfile::bshd_side_fwd_bytes_q, QkvFormat::bshd, false, 3 * 128},
      {&HardwareProfile::bshd_side_fwd_bytes_kv, QkvFormat::bshd, false, 3 * 32},
      {&HardwareProfile::bshd_side_bwd_bytes_q, QkvFormat::bshd, true, 3 * 128},
      {&HardwareProfile::bshd_side_bwd_bytes_kv, QkvFormat::bshd, true, 3 * 32},
      {&HardwareProfile::bshd_side_first_fwd_bytes_q, QkvFormat::bshd, false, 128},
  };
  for (const auto& key : keys) {
    const auto base = group_stage_times(cm, l, 4, 0, 0, key.format);
    auto one = cm;
    one.hardware.*key.field = 1;
    const auto t = group_stage_times(one, l, 4, 0, 0, key.format);
    const double fwd = t.fwd.compute_s - base.fwd.compute_s, bwd = t.bwd.compute_s - base.bwd.compute_s;
    EXPECT_NEAR(key.backward ? bwd : fwd, 2 * 250 * key.per_token / 1e9, 1e-15) << key.per_token;
    EXPECT_NEAR(key.backward ? fwd : bwd, 0, 1e-15);
  }
}

// A padded plan's ring (TE's bshd layout, QkvFormat::bshd) charges the bshd_* keys: its own bytes
// per step after the first and on the first forward step's correction; the forward's KV copy and
// the first backward step's bytes are THD's.
TEST(BshdSideKernels, PaddedRingChargesItsOwnBytesAndHostCost) {
  auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  cm.hardware.hbm_bytes_per_s = 1e9;
  cm.hardware.thd_side_fwd_bytes_q = 100;  // THD's keys, far from bshd's: a mix-up shows
  cm.hardware.thd_side_fwd_bytes_kv = 100;
  cm.hardware.thd_side_bwd_bytes_q = 100;
  cm.hardware.thd_side_bwd_bytes_kv = 100;
  cm.hardware.thd_side_first_fwd_bytes_q = 100;
  cm.hardware.thd_side_first_fwd_bytes_kv = 8;  // the KV copy: the same in both layouts
  cm.hardware.thd_side_first_bwd_bytes_q = 6;
  cm.hardware.thd_side_first_bwd_bytes_kv = 7;
  cm.hardware.bshd_side_fwd_bytes_q = 1;
  cm.hardware.bshd_side_fwd_bytes_kv = 2;
  cm.hardware.bshd_side_bwd_bytes_q = 3;
  cm.hardware.bshd_side_bwd_bytes_kv = 4;
  cm.hardware.bshd_side_first_fwd_bytes_q = 5;
  // k = 4, 250 local tokens, 2 layers, q_dim = kv_dim = 128 (the main-gradient adds need HBM too:
  // the same in both, taken out through a bshd run without side bytes).
  auto zero = cm;
  for (double* f : {&zero.hardware.bshd_side_fwd_bytes_q, &zero.hardware.bshd_side_fwd_bytes_kv,
                    &zero.hardware.bshd_side_bwd_bytes_q, &zero.hardware.bshd_side_bwd_bytes_kv,
                    &zero.hardware.bshd_side_first_fwd_bytes_q, &zero.hardware.thd_side_first_fwd_bytes_kv,
                    &zero.hardware.thd_side_first_bwd_bytes_q, &zero.hardware.thd_side_first_bwd_bytes_kv})
    *f = 0;
  const auto base = group_stage_times(zero, l, 4, 0, 0, QkvFormat::bshd);
  const auto bshd = group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd);
  // forward: 3 steps x (1 q + 2 kv) + first 5 q + THD's first 8 kv = 22 x 128 B per token;
  // backward: 3 x (3 + 4) + THD's first 6 + 7 = 34 x 128.
  EXPECT_NEAR(bshd.fwd.compute_s - base.fwd.compute_s, 2 * 250 * 22 * 128 / 1e9, 1e-15);
  EXPECT_NEAR(bshd.bwd.compute_s - base.bwd.compute_s, 2 * 250 * 34 * 128 / 1e9, 1e-15);
  // THD on the same group charges THD's keys: 3 x 200 + 100 + 8 = 708 x 128 B forward.
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0).fwd.compute_s - base.fwd.compute_s, 2 * 250 * 708 * 128 / 1e9, 1e-15);
  // Host: the call and k - 1 ring steps per layer at bshd's cost (a host-bound pass: GPU time far
  // below).
  cm.hardware.hbm_bytes_per_s = 0;
  cm.hardware.host_layer_fwd_s = 1e-2;
  cm.hardware.host_layer_bwd_s = 1e-2;
  cm.hardware.ring_step_fwd_s = 1e-3;
  cm.hardware.ring_step_bwd_s = 3e-3;
  cm.hardware.bshd_ring_step_fwd_s = 5e-4;
  cm.hardware.bshd_ring_step_bwd_s = 2e-3;
  cm.hardware.ring_call_fwd_s = 4e-3;
  cm.hardware.bshd_ring_call_fwd_s = 6e-4;
  cm.hardware.bshd_ring_call_bwd_s = 7e-4;
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd).fwd.total_s(), 2 * (1e-2 + 6e-4 + 3 * 5e-4), 1e-12);
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd).bwd.total_s(), 2 * (1e-2 + 7e-4 + 3 * 2e-3), 1e-12);
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0).fwd.total_s(), 2 * (1e-2 + 4e-3 + 3 * 1e-3), 1e-12);
  // k = 1: no ring, so the layouts agree.
  EXPECT_DOUBLE_EQ(group_stage_times(cm, l, 1, 0, 0, QkvFormat::bshd).fwd.total_s(),
                   group_stage_times(cm, l, 1, 0, 0).fwd.total_s());
}

// The ring's host side per layer: the call (diagonal step, prelude, epilogue) once per pass plus
// k - 1 later steps, in the plan's layout and the backend's TE path (flash: fa2, fa3, dcpbench;
// fused: cudnn); the device syncs only on a THD backward on the flash path; none of it at k = 1
// or with all-gather CP.
TEST(RingHost, CallPlusStepsPerLayoutAndPathSyncsOnlyOnFlashThd) {
  auto cm = unit_model();
  auto& hw = cm.hardware;
  hw.ring_step_fwd_s = 1e-3;
  hw.ring_step_bwd_s = 2e-3;
  hw.bshd_ring_step_fwd_s = 3e-3;
  hw.bshd_ring_step_bwd_s = 4e-3;
  hw.ring_call_fwd_s = 10e-3;
  hw.ring_call_bwd_s = 20e-3;
  hw.bshd_ring_call_fwd_s = 30e-3;
  hw.bshd_ring_call_bwd_s = 40e-3;
  hw.cudnn_ring_step_fwd_s = 5e-3;
  hw.cudnn_ring_step_bwd_s = 6e-3;
  hw.cudnn_bshd_ring_step_fwd_s = 7e-3;
  hw.cudnn_bshd_ring_step_bwd_s = 8e-3;
  hw.cudnn_ring_call_fwd_s = 50e-3;
  hw.cudnn_ring_call_bwd_s = 60e-3;
  hw.cudnn_bshd_ring_call_fwd_s = 70e-3;
  hw.cudnn_bshd_ring_call_bwd_s = 80e-3;
  hw.thd_flash_ring_bwd_sync_s = 0.5e-3;
  for (const char* backend : {"fa2", "fa3", "dcpbench", "cudnn"}) {
    cm.training.attention_backend = backend;
    const bool fused = std::string(backend) == "cudnn";
    const auto thd = ring_host(cm, 4, QkvFormat::thd);
    EXPECT_DOUBLE_EQ(thd.fwd_s, fused ? 50e-3 + 3 * 5e-3 : 10e-3 + 3 * 1e-3) << backend;
    EXPECT_DOUBLE_EQ(thd.bwd_s, fused ? 60e-3 + 3 * 6e-3 : 20e-3 + 3 * 2e-3) << backend;
    EXPECT_DOUBLE_EQ(thd.bwd_sync_s, fused ? 0.0 : 0.5e-3) << backend;
    const auto bshd = ring_host(cm, 8, QkvFormat::bshd);
    EXPECT_DOUBLE_EQ(bshd.fwd_s, fused ? 70e-3 + 7 * 7e-3 : 30e-3 + 7 * 3e-3) << backend;
    EXPECT_DOUBLE_EQ(bshd.bwd_s, fused ? 80e-3 + 7 * 8e-3 : 40e-3 + 7 * 4e-3) << backend;
    EXPECT_DOUBLE_EQ(bshd.bwd_sync_s, 0.0) << backend;
    for (auto f : {QkvFormat::thd, QkvFormat::bshd}) {
      const auto one = ring_host(cm, 1, f);
      EXPECT_EQ(one.fwd_s + one.bwd_s + one.bwd_sync_s, 0.0);
    }
  }
  cm.training.cp_comm = CpComm::all_gather;
  const auto ag = ring_host(cm, 4, QkvFormat::thd);
  EXPECT_EQ(ag.fwd_s + ag.bwd_s + ag.bwd_sync_s, 0.0);
  cm.training.cp_comm = CpComm::ring;
  cm.training.attention_backend = "fa4";  // a backend with no TE path here is an internal error
  EXPECT_THROW(ring_host(cm, 4, QkvFormat::thd), std::exception);
}

// In a pass: the call and steps join the host issue time and the sync idle time the GPU time,
// pass = max(GPU + idle, host): it lengthens a GPU-bound backward (once per layer), not a
// host-bound one, whose host time already holds the ops issued after each sync.
TEST(RingHost, SyncIdleTimeLengthensOnlyAGpuBoundBackward) {
  auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  cm.training.attention_backend = "fa3";
  const auto gpu_bound = group_stage_times(cm, l, 4, 0, 0);
  cm.hardware.thd_flash_ring_bwd_sync_s = 1e-4;
  const auto synced = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(synced.bwd.total_s() - gpu_bound.bwd.total_s(), 2 * 1e-4, 1e-15);  // 2 layers
  EXPECT_DOUBLE_EQ(synced.fwd.total_s(), gpu_bound.fwd.total_s());
  EXPECT_DOUBLE_EQ(group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd).bwd.total_s(),
                   gpu_bound.bwd.total_s());  // bshd: no zero-fill slicing
  // Host-bound: layers x (host_layer + call + k - 1 steps); the syncs hide under it.
  cm.hardware.host_layer_fwd_s = 1e-2;
  cm.hardware.host_layer_bwd_s = 1e-2;
  cm.hardware.ring_call_fwd_s = 2e-3;
  cm.hardware.ring_call_bwd_s = 3e-3;
  cm.hardware.ring_step_fwd_s = 1e-3;
  cm.hardware.ring_step_bwd_s = 1e-3;
  const auto host = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(host.fwd.total_s(), 2 * (1e-2 + 2e-3 + 3 * 1e-3), 1e-12);
  EXPECT_NEAR(host.bwd.total_s(), 2 * (1e-2 + 3e-3 + 3 * 1e-3), 1e-12);
  // Recompute issues the forward's host work (call and steps) again.
  cm.training.recompute_full = true;
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0).bwd.total_s(),
              2 * (1e-2 + 3e-3 + 3 * 1e-3) + 2 * (1e-2 + 2e-3 + 3 * 1e-3), 1e-12);
  // Between the two: GPU time + idle just above the host time.
  cm.training.recompute_full = false;
  const double gpu_bwd = host.bwd.compute_s + host.bwd.comm_exposed_s;
  cm.hardware.thd_flash_ring_bwd_sync_s = (2 * (1e-2 + 3e-3 + 3 * 1e-3) - gpu_bwd) / 2 + 1e-3;
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0).bwd.total_s(),
              gpu_bwd + 2 * cm.hardware.thd_flash_ring_bwd_sync_s, 1e-12);
}

// The public profile's ring host costs are the op counts of hardware.cpp (a typo there would be
// written into the calibration file too, whose test only compares the two): at k = 4, ops =
// a k + b at 13.5 us each plus k attention calls at a TE module's 2.7 x 13.5 us, per path.
TEST(RingHost, PublicProfileChargesTheCountedOps) {
  auto cm = unit_model();
  cm.hardware = hardware_preset("h100-sxm");
  const double op = 13.5e-6, call = 2.7 * 13.5e-6;
  const auto at4 = [&](double a, double b) { return (4 * a + b) * op + 4 * call; };
  struct Path {
    const char* backend;
    QkvFormat format;
    double fa, fb, ba, bb;  // forward a k + b, backward a k + b ops
  };
  const Path paths[] = {{"fa3", QkvFormat::thd, 16.5, -2.5, 14.5, 3.5},
                        {"fa3", QkvFormat::bshd, 13, -3, 12, 4},
                        {"cudnn", QkvFormat::thd, 18.5, -3.5, 12.5, 1.5},
                        {"cudnn", QkvFormat::bshd, 13, -3, 9, 4}};
  for (const auto& p : paths) {
    cm.training.attention_backend = p.backend;
    const auto r = ring_host(cm, 4, p.format);
    EXPECT_NEAR(r.fwd_s, at4(p.fa, p.fb), 1e-12) << p.backend;
    EXPECT_NEAR(r.bwd_s, at4(p.ba, p.bb), 1e-12) << p.backend;
    const bool flash_thd = p.format == QkvFormat::thd && std::string(p.backend) == "fa3";
    EXPECT_NEAR(r.bwd_sync_s, flash_thd ? 3 * op : 0.0, 1e-15) << p.backend;
  }
}

// Under full recompute the sync idle is charged once per backward pass (the recomputed forward
// has no syncs), GPU-bound as host-bound.
TEST(RingHost, SyncIdleOnceUnderRecompute) {
  auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  cm.training.recompute_full = true;
  const auto base = group_stage_times(cm, l, 4, 0, 0);
  cm.hardware.thd_flash_ring_bwd_sync_s = 1e-4;
  EXPECT_NEAR(group_stage_times(cm, l, 4, 0, 0).bwd.total_s() - base.bwd.total_s(), 2 * 1e-4, 1e-15);
}

// cuDNN's per-call zero-fills on THD: every call, k = 1 included; rows summed over the ring's
// steps, (1 + 0.75 (k - 1)) x T local; q and kv keys at their own widths (GQA: q_dim 128, kv_dim
// 32); nothing on bshd or on the flash-attention backends.
TEST(FusedThdFills, EveryCudnnCallWritesItsRowsAtTheirWidths) {
  auto cm = unit_model();
  cm.model.heads = 4;
  cm.model.kv_heads = 1;
  cm.model.head_dim = 32;
  cm.hardware.hbm_bytes_per_s = 1e9;
  const std::vector<int64_t> l{1000};
  cm.training.attention_backend = "cudnn";
  const auto base1 = group_stage_times(cm, l, 1, 0, 0), base4 = group_stage_times(cm, l, 4, 0, 0);
  const auto base4b = group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd);
  cm.hardware.thd_fused_fill_fwd_bytes_q = 1;
  cm.hardware.thd_fused_fill_bwd_bytes_q = 2;
  cm.hardware.thd_fused_fill_bwd_bytes_kv = 3;
  const auto one = group_stage_times(cm, l, 1, 0, 0);
  EXPECT_NEAR(one.fwd.compute_s - base1.fwd.compute_s, 2 * 1000 * 1 * 128 / 1e9, 1e-15);
  EXPECT_NEAR(one.bwd.compute_s - base1.bwd.compute_s, 2 * 1000 * (2 * 128 + 3 * 32) / 1e9, 1e-15);
  // k = 4: 250 local tokens, rows 250 x (1 + 0.75 x 3) = 812.5 per layer.
  const auto four = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(four.fwd.compute_s - base4.fwd.compute_s, 2 * 812.5 * 1 * 128 / 1e9, 1e-15);
  EXPECT_NEAR(four.bwd.compute_s - base4.bwd.compute_s, 2 * 812.5 * (2 * 128 + 3 * 32) / 1e9, 1e-15);
  EXPECT_DOUBLE_EQ(group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd).fwd.compute_s, base4b.fwd.compute_s);
  EXPECT_DOUBLE_EQ(group_stage_times(cm, l, 4, 0, 0, QkvFormat::bshd).bwd.compute_s, base4b.bwd.compute_s);
  for (const char* flash : {"fa2", "fa3"}) {
    auto f = cm;
    f.training.attention_backend = flash;
    auto f0 = f;
    f0.hardware.thd_fused_fill_fwd_bytes_q = f0.hardware.thd_fused_fill_bwd_bytes_q =
        f0.hardware.thd_fused_fill_bwd_bytes_kv = 0;
    for (int k : {1, 4}) {
      EXPECT_DOUBLE_EQ(group_stage_times(f, l, k, 0, 0).fwd.compute_s, group_stage_times(f0, l, k, 0, 0).fwd.compute_s)
          << flash << " k " << k;
      EXPECT_DOUBLE_EQ(group_stage_times(f, l, k, 0, 0).bwd.compute_s, group_stage_times(f0, l, k, 0, 0).bwd.compute_s)
          << flash << " k " << k;
    }
  }
}

TEST(IterationCost, OptimizerShardFixedCostAndTheSequencePackingDataPath) {
  auto cm = unit_model(2);
  cm.hardware.hbm_bytes_per_s = 1e9;
  cm.hardware.optimizer_bytes_per_param = 10;
  cm.hardware.iteration_overhead_s = 1e-3;
  cm.hardware.packed_data_overhead_s = 2e-3;
  cm.hardware.reroute_bytes_per_token = 28;
  cm.hardware.intra_node_latency_s = 1e-5;
  const double p = 197504;
  auto it = iteration_time(cm, false, 4096);
  // Whole model (no distributed optimizer), plus zeroing the fp32 grad buffer (4 B per param) and
  // scaling it (read + write, 8 B per param: a pool of 2 ranks).
  EXPECT_NEAR(it.optimizer_s, (10 * p + 4 * p + 8 * p) / 1e9, 1e-15);
  EXPECT_DOUBLE_EQ(it.fixed_s, 1e-3);
  EXPECT_EQ(it.data_s, 0.0);  // a padded (bshd) plan takes Megatron's ordinary data path
  cm.training.distributed_optimizer = true;
  it = iteration_time(cm, true, 4096);
  // The Adam step on the shard of the pool of 2; the whole grad buffer is still zeroed and scaled.
  EXPECT_NEAR(it.optimizer_s, (10 * p / 2 + 4 * p + 8 * p) / 1e9, 1e-15);
  cm.training.grad_reduce_fp32 = false;  // bf16 grads: 2 B per param zeroed, 4 read and written
  EXPECT_NEAR(iteration_time(cm, true, 4096).optimizer_s, (10 * p / 2 + 2 * p + 4 * p) / 1e9, 1e-15);
  cm.training.grad_reduce_fp32 = true;
  {
    // A pool of one rank: nothing divides the gradients (no --calculate-per-token-loss recorded),
    // so only the zeroing pass is charged.
    auto one = unit_model(1);
    one.hardware.hbm_bytes_per_s = 1e9;
    one.hardware.optimizer_bytes_per_param = 10;
    EXPECT_NEAR(iteration_time(one, false, 4096).optimizer_s, (10 * p + 4 * p) / 1e9, 1e-15);
  }
  // DP 2 (cp 1): two length all-gathers over the DP group, 1 latency each; the re-route's six
  // all-to-alls, 1 latency each, moving (DP-1)/DP of the 4096 received tokens x 28 B at 1e9 B/s;
  // the host part.
  EXPECT_NEAR(it.data_s, 2 * 1e-5 + 6 * 1e-5 + 0.5 * 4096 * 28 / 1e9 + 2e-3, 1e-15);
  EXPECT_NEAR(it.total_s(), it.optimizer_s + it.fixed_s + it.data_s, 1e-15);
  // The same pool as DP 1 x CP 2: CP siblings load the same samples, so nothing crosses a link
  // and there is no DP group to gather over; the six all-to-alls still run.
  cm.cluster.cp = 2;
  EXPECT_NEAR(iteration_time(cm, true, 4096).data_s, 6 * 1e-5 + 2e-3, 1e-15);
  // DP 2 over two nodes: the gathers and the all-to-alls pay the inter-node latency, and each
  // rank's re-routed bytes its share of its node's NICs (an all-to-all is not striped over them
  // like a ring): NVLink 4e9, 2 NICs of 1e9 per node of 1 GPU -> 2e9.
  cm.cluster.cp = 1;
  cm.cluster.gpus_per_node = 1;
  cm.cluster.nics_per_node = 2;
  cm.hardware.inter_node_latency_s = 1e-4;
  cm.hardware.intra_node_bytes_per_s = 4e9;
  cm.hardware.inter_node_bytes_per_s = 1e9;
  EXPECT_NEAR(iteration_time(cm, true, 4096).data_s, 2 * 1e-4 + 6 * 1e-4 + 0.5 * 4096 * 28 / 2e9 + 2e-3, 1e-15);
  // DP 2 x CP 4 on nodes of 5 GPUs: the DP group of pool rank 0, {0, 4}, is inside the first
  // node, but that of rank 1, {1, 5}, spans two, and the worst group sets the step: inter-node
  // gathers, and its peer's half of the received tokens through 2 NICs of 1e9 shared by 5 GPUs.
  auto dpcp = unit_model(8);
  dpcp.cluster.cp = 4;
  dpcp.cluster.gpus_per_node = 5;
  dpcp.cluster.nics_per_node = 2;
  dpcp.hardware = cm.hardware;
  EXPECT_NEAR(iteration_time(dpcp, true, 4096).data_s, 2 * 1e-4 + 6 * 1e-4 + 0.5 * 4096 * 28 / 0.4e9 + 2e-3, 1e-15);
  // Nodes of 8: every DP group ({j, j + 4}) stays in the node: NVLink latencies and bandwidth.
  dpcp.cluster.gpus_per_node = 8;
  EXPECT_NEAR(iteration_time(dpcp, true, 4096).data_s, 2 * 1e-5 + 6 * 1e-5 + 0.5 * 4096 * 28 / 4e9 + 2e-3, 1e-15);
  // DP 8 x CP 1 on nodes of 4: of the 7 peers 3 share the rank's node (NVLink, 3/8 of the tokens
  // at 4e9) and 4 do not (4/8 through 2e9 / 4 GPUs = 0.5e9); the two move at once, the NICs bind.
  auto dp8 = unit_model(8);
  dp8.cluster.gpus_per_node = 4;
  dp8.cluster.nics_per_node = 2;
  dp8.hardware = cm.hardware;
  EXPECT_NEAR(iteration_time(dp8, true, 4096).data_s,
              2 * 7 * 1e-4 + 6 * 1e-4 + std::max(3.0 / 8 * 4096 * 28 / 4e9, 4.0 / 8 * 4096 * 28 / 0.5e9) + 2e-3, 1e-15);
  // The same DP 8 on nodes of 3: the last node holds rank 6 and 7 only, and a rank there may
  // share it with no DP peer of its own group; counted as none: 7/8 of the tokens cross (3 NICs).
  dp8.cluster.gpus_per_node = 3;
  dp8.cluster.nics_per_node = 3;
  EXPECT_NEAR(iteration_time(dp8, true, 4096).data_s, 2 * 7 * 1e-4 + 6 * 1e-4 + 7.0 / 8 * 4096 * 28 / 1e9 + 2e-3, 1e-15);
  // With nodes of 4 the DP group spans two nodes too: 2 NICs of 1e9 shared by 4 GPUs.
  dpcp.cluster.gpus_per_node = 4;
  EXPECT_NEAR(iteration_time(dpcp, true, 4096).data_s, 2 * 1e-4 + 6 * 1e-4 + 0.5 * 4096 * 28 / 0.5e9 + 2e-3, 1e-15);
  // NVIDIA's prototype's prefetching sampler: in the step one all-reduce of two counters over the
  // pool ((N-1) latencies) and the host part; no gathers, no re-route.
  dpcp.training.data_path = DataPath::prefetch;
  EXPECT_NEAR(iteration_time(dpcp, true, 4096).data_s, 7 * 1e-4 + 2e-3, 1e-15);
  EXPECT_EQ(iteration_time(dpcp, false, 4096).data_s, 0.0);
}

TEST(Hardware, ScalarKeysRoundTripAndCollectiveBandwidth) {
  auto p = hardware_preset("h100-sxm");
  for (const auto& k : profile_scalar_keys()) {
    const double v = profile_scalar(p, k);
    set_profile_scalar(p, k, v * 2);
    EXPECT_DOUBLE_EQ(profile_scalar(p, k), v * 2) << k;
    set_profile_scalar(p, k, v);
  }
  EXPECT_THROW(profile_scalar(p, "warp_speed"), Error);
  EXPECT_DOUBLE_EQ(p.collective_inter_node_bytes_per_s(), 400e9);  // 8 NICs x 50 GB/s < 450 NVLink
  p.nics_per_node = 4;
  EXPECT_DOUBLE_EQ(p.collective_inter_node_bytes_per_s(), 200e9);
}

}  // namespace
}  // namespace dcp::cost
