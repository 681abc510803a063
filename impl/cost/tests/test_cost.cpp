// Tests of the FLOPs formula (hand-computed values), hardware curves + calibration files, and the
// time model on the "unit" profile (peak 1e12 FLOP/s, efficiency 1, 1e9 B/s, no latency), where
// every time is a FLOP or byte count divided by a power of ten.
#include "core/error.h"
#include "cost/flops.h"
#include "cost/hardware.h"
#include "cost/attention_table.h"
#include "cost/time_model.h"
#include "unit_model.h"

#include <gtest/gtest.h>

#include <tuple>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace dcp::cost {
namespace {

// ---- FLOPs -------------------------------------------------------------------------------
// Expected values computed by hand from reference §6:
//   llama-13b: 6*40*5120*3*13824 + 6*40*(5120*15360 + 5120^2) + 6*5120*32000 = 77,109,657,600
//              per token; 6*40*5120 = 1,228,800 per token^2.
//   llama3-8b: 6*32*4096*3*14336 + 6*32*(4096*6144 + 4096^2) + 6*4096*128256 = 45,027,950,592;
//              6*32*4096 = 786,432.
TEST(Flops, Llama13bCoefficients) {
  const auto c = train_flops_coefficients(model_preset("llama-13b"));
  EXPECT_DOUBLE_EQ(c.per_token, 77109657600.0);
  EXPECT_DOUBLE_EQ(c.per_token_sq, 1228800.0);
}

TEST(Flops, Llama3_8bGqaCoefficients) {
  const auto m = model_preset("llama3-8b");
  EXPECT_EQ(m.kv_dim(), 1024);
  const auto c = train_flops_coefficients(m);
  EXPECT_DOUBLE_EQ(c.per_token, 45027950592.0);
  EXPECT_DOUBLE_EQ(c.per_token_sq, 786432.0);
}

TEST(Flops, FromLengthsUsesSumAndSumOfSquares) {
  const auto m = model_preset("llama-13b");
  const std::vector<int64_t> one{4096};
  EXPECT_DOUBLE_EQ(train_flops_of_lengths(m, one), 336457000550400.0);
  const std::vector<int64_t> two{1000, 3000};  // S = 4000, Q = 10^7
  EXPECT_DOUBLE_EQ(train_flops_of_lengths(m, two), 320726630400000.0);
  // Packing two sequences is cheaper than one of their total length (Q differs).
  EXPECT_LT(train_flops_of_lengths(m, two), train_flops(m, 4000, 4000.0 * 4000));
}

TEST(Flops, NonSwigluTinyModel) {
  ModelConfig m = model_preset("tiny");
  m.swiglu = false;
  m.head_dim = 16;
  // 6*2*64*2*128 + 6*2*(64*(64+64) + 64*64) + 6*64*256 = 442,368; 6*2*64 = 768.
  const auto c = train_flops_coefficients(m);
  EXPECT_DOUBLE_EQ(c.per_token, 442368.0);
  EXPECT_DOUBLE_EQ(c.per_token_sq, 768.0);
}

TEST(Flops, LlamaPresetsByHand) {
  // Training = 3 x forward. Forward GEMMs per token and layer: 2 x (QKV h(h + 2 kv_dim) + proj h^2
  // + SwiGLU MLP 3 h ffn); logits 2 h V; attention per token^2 and layer 2 h (QK^T and PV, causal
  // half). (This test had repeated the implementation's own formula, so a wrong per-layer piece
  // changed both sides.)
  //   llama-13b: 2 (5120*15360 + 5120^2 + 3*5120*13824) = 634,388,480; 2*5120*32000 = 327,680,000;
  //              3 (40 * 634,388,480 + 327,680,000) = 77,109,657,600; 3*40*2*5120 = 1,228,800.
  //   llama3-8b (GQA, kv_dim 1024): 2 (4096*6144 + 4096^2 + 3*4096*14336) = 436,207,616;
  //              2*4096*128256 = 1,050,673,152; 3 (32 * 436,207,616 + 1,050,673,152) =
  //              45,027,950,592; 3*32*2*4096 = 786,432.
  const auto a = train_flops_coefficients(model_preset("llama-13b"));
  EXPECT_DOUBLE_EQ(a.per_token, 77109657600.0);
  EXPECT_DOUBLE_EQ(a.per_token_sq, 1228800.0);
  const auto b = train_flops_coefficients(model_preset("llama3-8b"));
  EXPECT_DOUBLE_EQ(b.per_token, 45027950592.0);
  EXPECT_DOUBLE_EQ(b.per_token_sq, 786432.0);
  for (const auto& name : model_preset_names()) validate_model(model_preset(name));
}

TEST(Flops, PresetsAndParams) {
  EXPECT_THROW(model_preset("llama-70b"), InputError);
  // Llama-2-13B has 13.0e9 parameters (untied embeddings).
  EXPECT_NEAR(total_params(model_preset("llama-13b")) / 1e9, 13.016, 0.01);
  EXPECT_NEAR(total_params(model_preset("llama3-8b")) / 1e9, 8.03, 0.01);
  EXPECT_NEAR(total_params(model_preset("llama3-70b")) / 1e9, 70.55, 0.01);  // the model card's 70.6B
  ModelConfig bad = model_preset("llama3-8b");
  bad.kv_heads = 5;
  EXPECT_THROW(validate_model(bad), InputError);
}

// ---- hardware ----------------------------------------------------------------------------
TEST(Hardware, CurveIsLogLinearAndClamped) {
  Curve c;
  c.points = {{128, 0.2}, {512, 0.6}};
  EXPECT_DOUBLE_EQ(c.at(64), 0.2);
  EXPECT_DOUBLE_EQ(c.at(256), 0.4);  // halfway in log2
  EXPECT_DOUBLE_EQ(c.at(4096), 0.6);
}

TEST(Hardware, H100PublicAnchors) {
  const auto p = hardware_preset("h100-sxm");
  validate_profile(p);
  EXPECT_DOUBLE_EQ(p.peak_flops_per_s, 989e12);
  EXPECT_DOUBLE_EQ(p.gemm_efficiency_at(8192) * 989e12, 798e12);
  EXPECT_DOUBLE_EQ(p.gemm_efficiency_at(1 << 20) * 989e12, 798e12);  // flat above the table
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_causal, 16384, 16384, 128) * 989, 616, 1e-9);  // FA3 paper
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::fwd_full, 1024, 1024, 128) * 989, 565, 1e-9);
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::bwd, 4096, 4096, 128) * 989, 542, 1e-9);
  EXPECT_NEAR(p.attn_efficiency("fa2", AttnKind::fwd_causal, 16384, 16384, 128) * 989, 335, 1e-9);  // FA2 series
  EXPECT_NEAR(p.attn_efficiency("cudnn", AttnKind::bwd, 2048, 2048, 128) * 989, 465, 1e-9);
  EXPECT_THROW(p.attn_efficiency("fa4", AttnKind::bwd, 2048, 2048, 128), InputError);
  // The causal backward: the (non-causal) backward times the forward's causal / full ratio at the
  // same lengths: FA3 at 4096, 542 x 579 / 638; at 512, 316 x 292 / 467 (0.63 of the non-causal).
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::bwd_causal, 4096, 4096, 128) * 989, 542.0 * 579 / 638, 1e-9);
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::bwd_causal, 512, 512, 128) * 989, 316.0 * 292 / 467, 1e-9);
  // Off the diagonal each grid along its own axis: the backward at q = 1024 (424), the forward's
  // causal / full ratio at k = 16384 (616 / 648).
  EXPECT_NEAR(p.attn_efficiency("fa3", AttnKind::bwd_causal, 1024, 16384, 128) * 989, 424.0 * 616 / 648, 1e-9);
  // FA2 below the paper's 512 tokens: the FA3 series' ratios (attention_table.cpp), e.g. causal at
  // 256 tokens 0.57 x 191.
  EXPECT_NEAR(p.attn_efficiency("fa2", AttnKind::fwd_causal, 256, 256, 128) * 989, 109, 1e-9);
  EXPECT_DOUBLE_EQ(p.intra_node_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(p.inter_node_bytes_per_s, 50e9);
  EXPECT_THROW(hardware_preset("a100"), InputError);
}

TEST(Hardware, CalibrationOverridesPointsAndNamesTheSource) {
  const auto base = hardware_preset("h100-sxm");
  const auto j = nlohmann::json::parse(R"({"schema": "dcpbench.calibration.v1", "name": "test-cal",
      "profile": "h100-sxm", "obtained": "measured",
      "gemm_efficiency": [[8192, 0.9], [100000, 0.95]],
      "attention_tables": [{"backend": "fa3", "head_dim": 128, "lengths": [1024], "fwd_tile": [1, 1],
                            "bwd_tile": [1, 1], "fwd_causal": [[0.5]], "fwd_full": [[0.6]], "bwd": [[0.4]]}],
      "inter_node_bytes_per_s": 25e9, "host_layer_fwd_s": 1e-3})");
  const auto p = apply_calibration(base, j, "test.json");
  EXPECT_EQ(p.calibration, "test-cal");
  EXPECT_EQ(p.obtained, "measured");
  EXPECT_DOUBLE_EQ(p.gemm_efficiency_at(8192), 0.9);
  EXPECT_DOUBLE_EQ(p.gemm_efficiency_at(1e6), 0.95);
  EXPECT_DOUBLE_EQ(p.gemm_efficiency_at(128), base.gemm_efficiency_at(128));  // untouched
  EXPECT_DOUBLE_EQ(p.attn_efficiency("fa3", AttnKind::fwd_causal, 1024, 1024, 128), 0.5);
  EXPECT_DOUBLE_EQ(p.attn_efficiency("fa3", AttnKind::bwd, 77, 5000, 128), 0.4);  // one point: flat, tiles of 1
  EXPECT_DOUBLE_EQ(p.attn_efficiency("fa3", AttnKind::bwd_causal, 77, 5000, 128), 0.4 * 0.5 / 0.6);
  // A measured causal forward faster than the full one does not make the causal backward faster
  // than the non-causal one: the ratio is capped at 1.
  const auto faster = apply_calibration(base, nlohmann::json::parse(R"({"attention_tables": [{"backend": "fa3",
      "head_dim": 128, "lengths": [1024], "fwd_tile": [1, 1], "bwd_tile": [1, 1], "fwd_causal": [[0.7]],
      "fwd_full": [[0.6]], "bwd": [[0.4]]}]})"), "faster.json");
  EXPECT_DOUBLE_EQ(faster.attn_efficiency("fa3", AttnKind::bwd_causal, 1024, 1024, 128), 0.4);
  EXPECT_DOUBLE_EQ(p.attn_efficiency("fa2", AttnKind::fwd_causal, 1024, 1024, 128),
                   base.attn_efficiency("fa2", AttnKind::fwd_causal, 1024, 1024, 128));  // other backends kept
  EXPECT_DOUBLE_EQ(p.inter_node_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(p.host_layer_fwd_s, 1e-3);
  CostModel cm{model_preset("llama-13b"), p, {}, {}};
  EXPECT_EQ(source_label(cm), "simulated:dcp-cost-v2@test-cal");
}

TEST(Hardware, CalibrationRejectsBadInput) {
  const auto base = hardware_preset("h100-sxm");
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"gemm_eff": []})"), "x"), InputError);
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"gemm_efficiency": [[10, 1.5]]})"), "x"),
               InputError);
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"profile": "unit"})"), "x"), InputError);
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"peak_flops_per_s": "fast"})"), "x"),
               InputError);
  // The 1-D "attention" curves of cost model v1 are gone: tables per backend replace them.
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"attention": []})"), "x"), InputError);
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"attention_tables": [{"backend": "fa3",
      "lengths": [128, 256], "fwd_causal": [[0.5]], "fwd_full": [[0.5]], "bwd": [[0.5]]}]})"), "x"), InputError);
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"ring_step_fwd_s": -1})"), "x"), InputError);
  // Every rate divides a volume: 0 would make that traffic free (helper-20: hbm_bytes_per_s 0 gave
  // a faster step); and every scalar has a ceiling of its unit, so a typo is refused, not printed.
  for (const std::string& key : profile_scalar_keys()) {
    const bool rate = key.ends_with("_per_s");
    nlohmann::json j;
    j[key] = 0;
    if (rate) {
      EXPECT_THROW(apply_calibration(base, j, "x"), InputError) << key;
    } else if (key != "memory_bytes") {  // (memory must exceed the reserve)
      EXPECT_NO_THROW(apply_calibration(base, j, "x")) << key;
    }
    j[key] = 1e300;
    EXPECT_THROW(apply_calibration(base, j, "x"), InputError) << key;
    j[key] = profile_scalar(base, key);  // the built-in value is within its limits
    EXPECT_NO_THROW(apply_calibration(base, j, "x")) << key;
  }
  // The ceilings hold a file's values, not a profile: --sensitivity scales a value read at its
  // ceiling by 1.2, and that variant must still simulate (helper-21).
  HardwareProfile scaled = apply_calibration(base, nlohmann::json::parse(R"({"intra_node_bytes_per_s": 1e18})"), "x");
  scaled.intra_node_bytes_per_s *= 1.2;
  EXPECT_NO_THROW(validate_profile(scaled));
  // The key split on 2026-11-28: a file written before would charge its whole value on every
  // virtual stage and the first and last stages' parts again; refused, naming its successors.
  try {
    apply_calibration(base, nlohmann::json::parse(R"({"microbatch_overhead_s": 3.429e-4})"), "old.json");
    ADD_FAILURE() << "the old key was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("microbatch_every_stage_s"), std::string::npos) << e.what();
  }
  // the name goes into every result's source "simulated:<cost model>@<name>": a safe name only
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"name": "h100@lab"})"), "x"), InputError);
  EXPECT_THROW(apply_calibration(base, nlohmann::json::parse(R"({"name": ""})"), "x"), InputError);
  EXPECT_EQ(apply_calibration(base, nlohmann::json::parse(R"({"name": "h100-lab_2.1"})"), "x").calibration, "h100-lab_2.1");
}

TEST(Hardware, ProfileJsonRoundTripsAndCommittedFileMatches) {
  const auto base = hardware_preset("h100-sxm");
  const auto again = apply_calibration(hardware_preset("h100-sxm"), profile_to_json(base), "rt");
  EXPECT_EQ(profile_to_json(again), profile_to_json(base));
  const std::string here = __FILE__;
  const std::string file = here.substr(0, here.find("impl/cost/tests")) +
                           "results/calibration/h100-sxm-public.json";
  const auto loaded = load_calibration_file(hardware_preset("h100-sxm"), file);
  EXPECT_EQ(loaded.calibration, "h100-sxm-public");
  EXPECT_EQ(profile_to_json(loaded), profile_to_json(base));
  // The file writes out every key of the profile (a calibration may list only some: a key missing
  // from the committed profile would still load, as the built-in value).
  std::ifstream in(file);
  const auto committed = nlohmann::json::parse(in);
  const auto written = profile_to_json(base);
  for (const auto& [key, value] : written.items()) EXPECT_TRUE(committed.contains(key)) << key;
}

// ---- time model on the unit profile ------------------------------------------------------
// Model: tests/unit_model.h (fwd GEMM 196,608 flops/token/layer, attention 256 per token^2 per
// layer, logits 256 per token).
using testing::unit_model;

TEST(TimeModel, SingleSequenceNoCp) {
  const auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  const auto st = group_stage_times(cm, l, 1, 0, 0);
  // fwd: 2*(196,608*1000 + 256*1000^2) + 256*1000 (logits) = 905,472,000 flops at 1e12.
  EXPECT_NEAR(st.fwd.compute_s, 905472000e-12, 1e-15);
  // bwd: 2*(2*196,608,000 + 2.5*256,000,000) + 2*256,000 = 2,066,944,000 flops.
  EXPECT_NEAR(st.bwd.compute_s, 2066944000e-12, 1e-15);
  EXPECT_EQ(st.fwd.comm_exposed_s, 0.0);
  EXPECT_EQ(st.bwd.comm_exposed_s, 0.0);
  EXPECT_EQ(st.p2p_s, 0.0);  // pp = 1
}

TEST(TimeModel, RingCp2ExposesCommNotHiddenByAttention) {
  const auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  const auto st = group_stage_times(cm, l, 2, 0, 0);
  // Per layer: T = 500; KV bytes = 2*500*1*128*2 = 256,000 -> 2.56e-4 s; step attention
  // 256*500^2 = 6.4e7 flops -> 6.4e-5 s. Exposed fwd = 1.92e-4 (step 0's KV send); bwd, as TE
  // orders it: step 0 sends KV, step 1 (the last) dKV, each under 2.5x the step's compute
  // -> 2 x (2.56e-4 - 1.6e-4) = 1.92e-4 (KV + dKV under step 0 alone exposed 3.52e-4). Two layers.
  EXPECT_NEAR(st.fwd.comm_exposed_s, 2 * 1.92e-4, 1e-12);
  EXPECT_NEAR(st.bwd.comm_exposed_s, 2 * 1.92e-4, 1e-12);
  // Compute: half the tokens and half the attention of the k = 1 case (zigzag balance).
  const auto one = group_stage_times(cm, l, 1, 0, 0);
  EXPECT_NEAR(st.fwd.compute_s, one.fwd.compute_s / 2, 1e-15);
  EXPECT_NEAR(st.bwd.compute_s, one.bwd.compute_s / 2, 1e-15);
}

TEST(TimeModel, AllGatherIsNotOverlapped) {
  auto cm = unit_model();
  cm.training.cp_comm = CpComm::all_gather;
  const std::vector<int64_t> l{1000};
  const auto st = group_stage_times(cm, l, 2, 0, 0);
  EXPECT_NEAR(st.fwd.comm_exposed_s, 2 * 2.56e-4, 1e-12);
  EXPECT_NEAR(st.bwd.comm_exposed_s, 2 * 2 * 2.56e-4, 1e-12);
}

TEST(TimeModel, LatencyOverlapsTheStepLikeTheBytes) {
  auto cm = unit_model();
  cm.hardware.intra_node_bytes_per_s = 1e15;  // the bytes take no time
  cm.hardware.intra_node_latency_s = 1e-5;    // below every step's compute (>= 0.25 ms here)
  const std::vector<int64_t> l{4000};
  EXPECT_DOUBLE_EQ(group_stage_times(cm, l, 4, 0, 0).fwd.comm_exposed_s, 0.0);
  // A latency above the steps' compute is exposed by its excess: one more second of latency is
  // 2 layers x 1 s more for each transfer: k-1 in the forward, k in the backward (KV on step 0,
  // KV + dKV on steps 1..k-2, dKV on step k-1).
  cm.hardware.intra_node_latency_s = 1.0;
  const auto one = group_stage_times(cm, l, 4, 0, 0);
  cm.hardware.intra_node_latency_s = 2.0;
  const auto two = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(two.fwd.comm_exposed_s - one.fwd.comm_exposed_s, 2 * 3 * 1.0, 1e-9);
  EXPECT_NEAR(two.bwd.comm_exposed_s - one.bwd.comm_exposed_s, 2 * 4 * 1.0, 1e-9);
  // Bytes on a link slow enough to expose every transfer: the forward moves KV on k-1 = 3 steps,
  // the backward KV, KV + dKV, KV + dKV, dKV = 6 KV buffers (T = 1000: 512,000 B each), so
  // halving the bandwidth exposes 2 layers x 3 (fwd) and x 6 (bwd) buffers' time once more.
  cm.hardware.intra_node_latency_s = 0;
  cm.hardware.intra_node_bytes_per_s = 1e6;
  const auto fast = group_stage_times(cm, l, 4, 0, 0);
  cm.hardware.intra_node_bytes_per_s = 5e5;
  const auto slow = group_stage_times(cm, l, 4, 0, 0);
  EXPECT_NEAR(slow.fwd.comm_exposed_s - fast.fwd.comm_exposed_s, 2 * 3 * 512000 / 1e6, 1e-9);
  EXPECT_NEAR(slow.bwd.comm_exposed_s - fast.bwd.comm_exposed_s, 2 * 6 * 512000 / 1e6, 1e-9);
}

TEST(TimeModel, RecomputeAddsTheLayerForward) {
  auto cm = unit_model();
  const std::vector<int64_t> l{1000};
  const auto plain = group_stage_times(cm, l, 1, 0, 0);
  cm.training.recompute_full = true;
  const auto rc = group_stage_times(cm, l, 1, 0, 0);
  EXPECT_NEAR(rc.bwd.recompute_s, 2 * (196608000 + 256000000) * 1e-12, 1e-15);  // no logits
  EXPECT_NEAR(rc.bwd.compute_s, plain.bwd.compute_s + rc.bwd.recompute_s, 1e-15);
  EXPECT_DOUBLE_EQ(rc.fwd.compute_s, plain.fwd.compute_s);
}

TEST(TimeModel, CrossNodeGroupsUseInterNodeLink) {
  auto cm = unit_model(8);
  cm.cluster.gpus_per_node = 4;
  EXPECT_FALSE(group_crosses_nodes(cm.cluster, 0, 4));
  EXPECT_TRUE(group_crosses_nodes(cm.cluster, 2, 4));
  EXPECT_TRUE(group_crosses_nodes(cm.cluster, 0, 8));
  cm.hardware.inter_node_bytes_per_s = 1e8;  // 10x slower
  const std::vector<int64_t> l{1000};
  const auto in_node = group_stage_times(cm, l, 2, 0, 0);
  const auto across = group_stage_times(cm, l, 2, 3, 0);  // ranks 3,4: GPUs 3 and 4
  EXPECT_NEAR(across.fwd.comm_exposed_s, 2 * (2.56e-3 - 6.4e-5), 1e-12);
  EXPECT_GT(across.fwd.comm_exposed_s, 5 * in_node.fwd.comm_exposed_s);
  // TP=2: pool rank j owns GPUs 2j, 2j+1; a 4-rank group spans 8 GPUs.
  cm.cluster.gpus = 16;
  cm.cluster.tp = 2;
  cm.cluster.gpus_per_node = 8;
  EXPECT_FALSE(group_crosses_nodes(cm.cluster, 2, 2));
  EXPECT_TRUE(group_crosses_nodes(cm.cluster, 0, 8));
  EXPECT_EQ(gpu_id(cm.cluster, 1, 3, 1), (1 * 8 + 3) * 2 + 1);
}

// group_stage_times_all computes each distinct CP link's layer times once: every field of every
// virtual stage must equal group_stage_times of that stage (StageTimes' defaulted ==, exact).
// Pool 6 on 8-GPU nodes at PP 4 puts a 6-rank group inside node 0 on stage 0 and across nodes 0
// and 1 on stage 1, so the stages' links differ (checked below); H100 tables and a Llama-3-8B
// width exercise the attention tables. Also at TP 2 (every group of 6 crosses nodes then) and
// with 30 layers, which do not split evenly over the 8 virtual stages.
TEST(TimeModel, AllStagesEqualEachStage) {
  CostModel cm{model_preset("llama3-8b"), hardware_preset("h100-sxm"), ClusterConfig{}, {}};
  cm.model.layers = 30;
  cm.cluster.pp = 4;
  cm.cluster.vpp = 2;
  cm.cluster.gpus_per_node = 8;
  const std::vector<int64_t> lengths{8191, 3, 1300, 40000, 128};
  int checked = 0;
  for (const int tp : {1, 2}) {
    cm.cluster.tp = tp;
    cm.cluster.gpus = 24 * tp;
    for (const bool recompute : {false, true}) {
      cm.training.recompute_full = recompute;
      for (const char* backend : {"fa3", "cudnn"}) {
        cm.training.attention_backend = backend;
        for (const QkvFormat format : {QkvFormat::thd, QkvFormat::bshd}) {
          for (const auto& [first, k] : std::vector<std::pair<int, int>>{{0, 1}, {3, 1}, {0, 2}, {4, 2}, {0, 6}}) {
            const auto all = group_stage_times_all(cm, lengths, k, first, format);
            ASSERT_EQ(all.size(), 8u);
            for (int v = 0; v < 8; ++v) {
              EXPECT_TRUE(all[static_cast<size_t>(v)] == group_stage_times(cm, lengths, k, first, v, format))
                  << "v " << v << " k " << k << " first " << first << " " << backend;
              ++checked;
            }
            if (k == 6 && tp == 1) {  // stage 0 (v 0, 4) inside a node, stage 1 (v 1, 5) across two
              EXPECT_FALSE(group_crosses_nodes(cm.cluster, 0, first, k));
              EXPECT_TRUE(group_crosses_nodes(cm.cluster, 1, first, k));
              EXPECT_GT(all[1].fwd.comm_exposed_s + all[1].bwd.comm_exposed_s,
                        all[0].fwd.comm_exposed_s + all[0].bwd.comm_exposed_s);
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 2 * 2 * 5 * 8);
}

TEST(TimeModel, AttnTermsMemoGivesTheSameTimes) {
  // Every field of every stage equal with and without the memo, on repeated and new (length, k)
  // pairs, for both layouts and backends, groups across nodes (pool 6 on 8-GPU nodes at PP 4) and
  // the all-gather CP (which does not read it).
  CostModel cm{model_preset("llama3-8b"), hardware_preset("h100-sxm"), ClusterConfig{}, {}};
  cm.cluster.pp = 4;
  cm.cluster.gpus = 24;
  cm.cluster.gpus_per_node = 8;
  int checked = 0;
  for (const char* backend : {"fa3", "cudnn"}) {
    for (const CpComm comm : {CpComm::ring, CpComm::all_gather}) {
      cm.training.attention_backend = backend;
      cm.training.cp_comm = comm;
      AttnTermsMemo memo(cm);
      for (int rep = 0; rep < 2; ++rep) {  // the second pass reads every pair from the memo
        for (const QkvFormat format : {QkvFormat::thd, QkvFormat::bshd}) {
          for (const auto& [first, k] : std::vector<std::pair<int, int>>{{0, 1}, {2, 2}, {0, 6}, {4, 2}}) {
            const std::vector<int64_t> lengths{8191, 3, 1300, 40000, 128, 1300};
            const auto plain = group_stage_times_all(cm, lengths, k, first, format);
            const auto memoised = group_stage_times_all(cm, lengths, k, first, format, &memo);
            ASSERT_EQ(plain.size(), memoised.size());
            for (size_t v = 0; v < plain.size(); ++v) EXPECT_TRUE(plain[v] == memoised[v]) << backend << " k " << k << " v " << v;
            ++checked;
          }
        }
      }
      // One entry per distinct (length, k) of the ring (5 lengths x sizes 1, 2, 6); with all-gather CP
      // only k = 1's (a single rank runs the ring's one diagonal step).
      EXPECT_EQ(memo.entries(), comm == CpComm::ring ? 15u : 5u) << backend;
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 2 * 2 * 4);
  // A memo of 2 entries clears whenever a third pair comes and still answers exactly.
  cm.training.cp_comm = CpComm::ring;
  AttnTermsMemo small(cm, 2);
  const std::vector<int64_t> three{8191, 3, 1300};
  for (int rep = 0; rep < 2; ++rep) {
    const auto plain = group_stage_times_all(cm, three, 2, 0, QkvFormat::thd);
    const auto memoised = group_stage_times_all(cm, three, 2, 0, QkvFormat::thd, &small);
    for (size_t v = 0; v < plain.size(); ++v) EXPECT_TRUE(plain[v] == memoised[v]) << "v " << v;
    EXPECT_LE(small.entries(), 2u);
  }
  AttnTermsMemo other(cm);
  const CostModel copy = cm;
  const std::vector<int64_t> one{100};
  EXPECT_THROW(group_stage_times_all(copy, one, 1, 0, QkvFormat::thd, &other), Error);
}

TEST(TimeModel, LayersAndLogitsPerVirtualStage) {
  auto cm = unit_model(4, 2);
  cm.model.layers = 5;
  EXPECT_EQ(layers_of_virtual_stage(cm.model, cm.cluster, 0), 3);
  EXPECT_EQ(layers_of_virtual_stage(cm.model, cm.cluster, 1), 2);
  const std::vector<int64_t> l{1000};
  const auto first = group_stage_times(cm, l, 1, 0, 0);
  const auto last = group_stage_times(cm, l, 1, 0, 1);
  const double layer_fwd = (196608000 + 256000000) * 1e-12;
  EXPECT_NEAR(first.fwd.compute_s, 3 * layer_fwd, 1e-15);
  EXPECT_NEAR(last.fwd.compute_s, 2 * layer_fwd + 256000e-12, 1e-15);
  // p2p: T*h*2 bytes = 1000*128*2 = 256,000 B at 1e9 B/s.
  EXPECT_NEAR(first.p2p_s, 2.56e-4, 1e-15);
  // A packed plan's blocking shape exchange costs one latency of the link, a padded one's none.
  cm.hardware.intra_node_latency_s = 1e-5;
  const auto thd = group_stage_times(cm, l, 1, 0, 0, QkvFormat::thd);
  const auto bshd = group_stage_times(cm, l, 1, 0, 0, QkvFormat::bshd);
  EXPECT_NEAR(thd.p2p_s, 2.56e-4 + 1e-5, 1e-15);
  EXPECT_EQ(thd.p2p_shape_s, 1e-5);
  EXPECT_NEAR(bshd.p2p_s, 2.56e-4 + 1e-5, 1e-15);
  EXPECT_EQ(bshd.p2p_shape_s, 0.0);
}

TEST(TimeModel, GradSyncFromTheFlags) {
  auto cm = unit_model(2);
  // params = 2 layers * 98,560 + 2*1*128 (embedding + output) + 128 = 197,504.
  EXPECT_DOUBLE_EQ(total_params(cm.model), 197504.0);
  const double p = 197504;
  // Defaults as Megatron's --bf16 without --use-distributed-optimizer: one fp32 all-reduce,
  // 2 (n-1)/n of the buffer per rank, nothing gathered, no overlap.
  auto g = grad_sync_time(cm, 0);
  EXPECT_NEAR(g.reduce_s, 2 * 0.5 * p * 4 / 1e9, 1e-15);
  EXPECT_EQ(g.gather_s, 0.0);
  EXPECT_FALSE(g.overlap);
  // Distributed optimizer, bf16 reduce: reduce-scatter (n-1)/n x 2 B, then the bf16 param all-gather.
  cm.training.distributed_optimizer = true;
  cm.training.grad_reduce_fp32 = false;
  cm.training.overlap_grad_reduce = true;
  g = grad_sync_time(cm, 0);
  EXPECT_NEAR(g.reduce_s, 0.5 * p * 2 / 1e9, 1e-15);
  EXPECT_NEAR(g.gather_s, 0.5 * p * 2 / 1e9, 1e-15);
  EXPECT_TRUE(g.overlap);
  // Pool across nodes: min(NVLink, NICs per node x NIC).
  cm.cluster.gpus = 8;
  cm.cluster.gpus_per_node = 4;
  cm.hardware.inter_node_bytes_per_s = 1e8;
  EXPECT_NEAR(grad_sync_time(cm, 0).gather_s, 7.0 / 8 * p * 2 / 1e8, 1e-12);  // unit profile: 1 NIC per node
  cm.cluster.nics_per_node = 4;
  EXPECT_NEAR(grad_sync_time(cm, 0).gather_s, 7.0 / 8 * p * 2 / 4e8, 1e-12);
  {
    // TP 2 over 16 GPUs: the same pool of 8, each rank on 2 GPUs holding half the params; the two
    // TP ranks' collectives run at once and share the node's 4 NICs: 2e8 B/s each.
    auto t = cm;
    t.cluster.tp = 2;
    t.cluster.gpus = 16;
    ASSERT_EQ(t.cluster.pool(), 8);
    EXPECT_NEAR(pool_collective_bytes_per_s(t, 0, 8), 2e8, 1e-6);
    EXPECT_NEAR(grad_sync_time(t, 0).gather_s, 7.0 / 8 * (p / 2) * 2 / 2e8, 1e-12);
  }
  cm.cluster.nics_per_node = 64;  // capped by NVLink (1e9)
  EXPECT_NEAR(grad_sync_time(cm, 0).gather_s, 7.0 / 8 * p * 2 / 1e9, 1e-12);
  // Latency: (n-1) per collective, 2 (n-1) for the all-reduce.
  cm.hardware.inter_node_latency_s = 1e-3;
  cm.training.distributed_optimizer = false;
  EXPECT_NEAR(grad_sync_time(cm, 0).reduce_s, 2 * 7.0 / 8 * p * 2 / 1e9 + 14 * 1e-3, 1e-12);
  cm.cluster.gpus = 1;
  EXPECT_EQ(grad_sync_time(cm, 0).reduce_s, 0.0);
}

// What overlap cannot hide (GradSyncTime, helper-51's review): without VPP a later stage's first
// forward waits for its whole gather (one bucket), the first stage's for its embedding bucket;
// that bucket's reduce follows the last backward. The NaN check reads the stage's grad buffer.
TEST(TimeModel, GradSyncPartsNoOverlapHides) {
  auto cm = unit_model(2);
  cm.cluster.pp = 2;
  cm.cluster.gpus = 4;  // pool 2 per stage
  cm.training.distributed_optimizer = true;
  cm.training.overlap_grad_reduce = true;
  const double emb0 = embedding_params(cm.model) / stage_params(cm, 0);
  ASSERT_GT(emb0, 0.0);
  ASSERT_LT(emb0, 1.0);
  auto g0 = grad_sync_time(cm, 0), g1 = grad_sync_time(cm, 1);
  EXPECT_DOUBLE_EQ(g0.gather_waited_s, emb0 * g0.gather_s);
  EXPECT_DOUBLE_EQ(g0.reduce_tail_s, emb0 * g0.reduce_s);
  EXPECT_DOUBLE_EQ(g1.gather_waited_s, g1.gather_s);
  EXPECT_EQ(g1.reduce_tail_s, 0.0);  // no embedding there (its reduce follows the cool-down anyway)
  EXPECT_EQ(g0.check_s, 0.0);        // the check is off in the cost model unless the scenario sets it
  // With VPP the interleaved schedule dispatches chunks 0 and 1 at its start: the first stage's
  // first forward waits for all of chunk 0 (embedding + its layers), a later stage's is hidden.
  cm.cluster.vpp = 2;
  cm.model.layers = 4;
  g0 = grad_sync_time(cm, 0);
  const double chunk0 = (embedding_params(cm.model) + layer_params(cm.model)) / stage_params(cm, 0);
  ASSERT_LT(chunk0, 1.0);
  EXPECT_NEAR(g0.gather_waited_s, chunk0 * g0.gather_s, 1e-18);
  EXPECT_EQ(grad_sync_time(cm, 1).gather_waited_s, 0.0);
  EXPECT_GT(g0.reduce_tail_s, 0.0);
  // Without overlap nothing is split off: reduce and gather are exposed whole.
  cm.training.overlap_grad_reduce = false;
  g0 = grad_sync_time(cm, 0);
  EXPECT_EQ(g0.gather_waited_s + g0.reduce_tail_s, 0.0);
  // NaN check: one read of the stage's grad buffer in its dtype (the unit profile has free
  // memory-bound ops: a bandwidth is set here).
  cm.training.check_for_nan_in_grad = true;
  EXPECT_EQ(grad_sync_time(cm, 1).check_s, 0.0);
  cm.hardware.hbm_bytes_per_s = 1e9;
  {
    auto one = cm;  // a pool of one still checks (finish_grad_sync calls start_grad_sync)
    one.cluster.gpus = 2;
    ASSERT_EQ(one.cluster.pool(), 1);
    EXPECT_DOUBLE_EQ(grad_sync_time(one, 1).check_s, 4.0 * stage_params(one, 1) / 1e9);
  }
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 1).check_s, 4.0 * stage_params(cm, 1) / cm.hardware.hbm_bytes_per_s);
  cm.training.grad_reduce_fp32 = false;
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 1).check_s, 2.0 * stage_params(cm, 1) / cm.hardware.hbm_bytes_per_s);
}

// Tied embeddings split over stages (GradSyncTime::embedding_s, helper-80's trial): the first
// and the last stage all-reduce the word embedding's main gradient, V x h / tp in the grad
// dtype, as a ring of two (the whole buffer each way, two latencies) over the link between them.
TEST(TimeModel, TiedEmbeddingGradientIsAllReducedBetweenTheEndStages) {
  auto cm = unit_model(8, 4);  // pp 4, pool 2, one node of 64 GPUs
  cm.model.layers = 4;         // one per stage
  cm.model.vocab = 1000;
  cm.hardware.intra_node_latency_s = 1e-4;
  cm.hardware.inter_node_latency_s = 1e-3;
  cm.hardware.inter_node_bytes_per_s = 1e8;
  for (int s = 0; s < 4; ++s) EXPECT_EQ(grad_sync_time(cm, s).embedding_s, 0.0) << "untied, stage " << s;
  cm.model.tied_embeddings = true;
  const double bytes = 1000.0 * 128 * 4;  // fp32 main grads (the default)
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 0).embedding_s, bytes / 1e9 + 2e-4);  // NVLink
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 3).embedding_s, bytes / 1e9 + 2e-4);
  EXPECT_EQ(grad_sync_time(cm, 1).embedding_s, 0.0);  // the middle stages take no part
  EXPECT_EQ(grad_sync_time(cm, 2).embedding_s, 0.0);
  EXPECT_EQ(tied_embedding_allreduce_s(cm, 2), 0.0);
  cm.training.grad_reduce_fp32 = false;  // --grad-reduce-in-bf16: a bf16 grad buffer
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 0).embedding_s, bytes / 2 / 1e9 + 2e-4);
  cm.training.grad_reduce_fp32 = true;
  // 4 GPUs per node: stage 0 is GPUs 0-1 (node 0), stage 3 GPUs 6-7 (node 1); a node's one NIC
  // is shared by the 2 of its GPUs that send (GPUs 2-5, the middle stages', idle here); with 4
  // NICs each of the 2 has two.
  cm.cluster.gpus_per_node = 4;
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 0).embedding_s, bytes / (1e8 / 2) + 2e-3);
  cm.cluster.nics_per_node = 4;
  EXPECT_DOUBLE_EQ(grad_sync_time(cm, 3).embedding_s, bytes / 2e8 + 2e-3);
  {
    // TP 2: each GPU holds, and all-reduces, half of the vocabulary; stage 0 is node 0 (GPUs
    // 0-3), stage 3 node 3: 4 GPUs share each node's 4 NICs.
    auto t = cm;
    t.cluster.tp = 2;
    t.cluster.gpus = 16;
    EXPECT_DOUBLE_EQ(grad_sync_time(t, 0).embedding_s, bytes / 2 / 1e8 + 2e-3);
    // 3 GPUs per node (stage 0: GPUs 0-3 over nodes 0-1, stage 3: GPUs 12-15 over nodes 4-5):
    // node 0 has 3 sending GPUs, the most; with 1 NIC, a third of it each.
    t.cluster.gpus_per_node = 3;
    t.cluster.nics_per_node = 1;
    EXPECT_DOUBLE_EQ(grad_sync_time(t, 0).embedding_s, bytes / 2 / (1e8 / 3) + 2e-3);
  }
  {
    // TP 1, 3 GPUs per node: stage 0 is GPUs 0-1 on node 0 (beside stage 1's GPU 2), stage 3 GPUs
    // 6-7 on node 2: at most 2 senders on a node, half the NIC each (a third, dividing by the
    // node's GPUs).
    auto t = cm;
    t.cluster.gpus_per_node = 3;
    t.cluster.nics_per_node = 1;
    EXPECT_DOUBLE_EQ(grad_sync_time(t, 0).embedding_s, bytes / (1e8 / 2) + 2e-3);
  }
  {
    auto one_node = cm;  // 8 GPUs per node: both end stages on one node again
    one_node.cluster.gpus_per_node = 8;
    EXPECT_DOUBLE_EQ(grad_sync_time(one_node, 0).embedding_s, bytes / 1e9 + 2e-4);
  }
  {
    auto pool1 = cm;  // a pool of one rank: no DP sync, the end stages' all-reduce all the same
    pool1.cluster.gpus = 4;
    ASSERT_EQ(pool1.cluster.pool(), 1);
    EXPECT_EQ(grad_sync_time(pool1, 0).reduce_s, 0.0);
    EXPECT_DOUBLE_EQ(grad_sync_time(pool1, 0).embedding_s, bytes / 1e9 + 2e-4);  // GPUs 0 and 3: one node
  }
  auto pp1 = unit_model(2, 1);  // one stage holds the one table: nothing to all-reduce
  pp1.model.tied_embeddings = true;
  EXPECT_EQ(grad_sync_time(pp1, 0).embedding_s, 0.0);
}

TEST(TimeModel, H100Llama13bSanity) {
  CostModel cm = testing::h100_llama13b_pp8_cp8();
  cm.training.recompute_full = true;
  // One 64k-token sequence on one GPU for one stage (5 layers): MFU must lie between the
  // attention and GEMM efficiencies (it is a mix of both).
  const std::vector<int64_t> l{65536};
  const auto st = group_stage_times(cm, l, 1, 0, 0);
  const double flops = 5 * 3 * (fwd_layer_gemm_flops_per_token(cm.model) * 65536 +
                                fwd_layer_attn_flops_per_token_sq(cm.model) * 65536.0 * 65536.0);
  const double mfu = flops / (st.fwd.total_s() + st.bwd.total_s()) / 989e12;
  EXPECT_GT(mfu, 0.35);
  EXPECT_LT(mfu, 0.62);
  // CP8 inside one node: the 8k-token local KV send (168 MB/layer... per step 2*8192*5120*2 B)
  // is hidden by the attention of the step.
  const auto cp8 = group_stage_times(cm, l, 8, 0, 0);
  EXPECT_LT(cp8.fwd.comm_exposed_s, 0.05 * cp8.fwd.compute_s);
}

TEST(TimeModel, CrossEntropyIsChargedOnTheLastStageOnlyAtItsImplementationsBytes) {
  ClusterConfig c;
  c.gpus = 2;
  c.pp = 2;
  const std::vector<int64_t> l{4096};
  // Bytes per logit (hardware.cpp, derived from Megatron's and TE's kernels): 52 unfused, 32 fused
  // with torch.compile, 10 with TE's Triton kernels.
  for (const auto& [fusion, te, bytes] : {std::tuple{false, false, 52.0}, std::tuple{false, true, 52.0},
                                          std::tuple{true, false, 32.0}, std::tuple{true, true, 10.0}}) {
    SCOPED_TRACE(std::to_string(fusion) + " " + std::to_string(te));
    CostModel cm{model_preset("llama3-8b"), hardware_preset("h100-sxm"), c, {}};
    cm.training.cross_entropy_fusion = fusion;
    cm.training.cross_entropy_te = te;  // only with the fusion flag, as Megatron reads it
    auto no_loss = cm;
    no_loss.hardware.loss_bytes_per_token_vocab = 0;
    no_loss.hardware.loss_fused_bytes_per_token_vocab = 0;
    no_loss.hardware.loss_te_bytes_per_token_vocab = 0;
    // e.g. 52 B x 128256 x 4096 / 3.35e12 B/s = 8.15 ms, half in fwd and half in bwd.
    const double ce = bytes * 128256 * 4096 / 3.35e12;
    const auto last = group_stage_times(cm, l, 1, 0, 1);
    const auto last0 = group_stage_times(no_loss, l, 1, 0, 1);
    EXPECT_NEAR(last.fwd.compute_s - last0.fwd.compute_s, ce / 2, 1e-12);
    EXPECT_NEAR(last.bwd.compute_s - last0.bwd.compute_s, ce / 2, 1e-12);
    EXPECT_DOUBLE_EQ(group_stage_times(cm, l, 1, 0, 0).fwd.compute_s,
                     group_stage_times(no_loss, l, 1, 0, 0).fwd.compute_s);
    EXPECT_NEAR(sequence_compute_s(cm, 4096, 4096) - sequence_compute_s(no_loss, 4096, 4096), ce, 1e-12);
  }
}

TEST(TimeModel, ClusterValidation) {
  ClusterConfig c;
  c.gpus = 12;
  c.pp = 8;
  EXPECT_THROW(validate_cluster(c), InputError);
  c.gpus = 64;
  c.cp = 8;
  EXPECT_NO_THROW(validate_cluster(c));
  EXPECT_EQ(c.pool(), 8);
  EXPECT_EQ(c.dp(), 1);
}

// Megatron's layout rules, each at the edge: Llama-13B (40 layers, 40 heads = groups, FFN 13824).
TEST(TimeModel, LayoutValidation) {
  const ModelConfig m = model_preset("llama-13b");
  ASSERT_EQ(m.layers, 40);
  ASSERT_EQ(m.heads, 40);
  ClusterConfig c;
  c.gpus = 64;
  c.pp = 8;
  c.vpp = 5;  // 40 = 8 x 5: one layer per virtual stage
  EXPECT_NO_THROW(validate_layout(m, c));
  c.vpp = 2;  // 40 / 16 is not whole
  EXPECT_THROW(validate_layout(m, c), InputError);
  c.vpp = 1;
  c.pp = 3;
  EXPECT_THROW(validate_layout(m, c), InputError);
  c.pp = 1;
  c.tp = 3;  // 40 heads
  EXPECT_NE([&] {
    try {
      validate_layout(m, c);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  }().find("\"tp\"=3 does not divide the model's 40 attention heads"), std::string::npos);
  c.tp = 4;  // 40 heads, 40 groups, FFN 13824 = 4 x 3456
  EXPECT_NO_THROW(validate_layout(m, c));
  ModelConfig gqa = model_preset("llama3-8b");  // 32 heads, 8 groups
  c.tp = 16;
  EXPECT_THROW(validate_layout(gqa, c), InputError);  // 16 divides the 32 heads, not the 8 groups
  c.tp = 8;
  EXPECT_NO_THROW(validate_layout(gqa, c));
  gqa.ffn = 14340;  // not a multiple of 8
  EXPECT_THROW(validate_layout(gqa, c), InputError);
}

}  // namespace
}  // namespace dcp::cost

namespace dcp::cost {
namespace {

TEST(Hardware, CalibrationFileMustNameItself) {
  // Without "name" the results would keep the built-in label while using the file's numbers.
  const auto path = std::filesystem::temp_directory_path() / ("dcp_calib_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"schema": "dcpbench.calibration.v1", "profile": "h100-sxm", "peak_flops_per_s": 5e14})";
  try {
    load_calibration_file(hardware_preset("h100-sxm"), path.string());
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"name\" is missing"), std::string::npos) << e.what();
  }
  std::ofstream(path) << R"({"schema": "dcpbench.calibration.v1", "name": "mine", "obtained": "measured",)"
                      << R"( "profile": "h100-sxm", "peak_flops_per_s": 5e14})";
  const auto p = load_calibration_file(hardware_preset("h100-sxm"), path.string());
  EXPECT_EQ(p.calibration, "mine");
  EXPECT_EQ(p.obtained, "measured");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace dcp::cost
