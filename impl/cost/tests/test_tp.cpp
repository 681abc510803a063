// Tensor parallelism with sequence parallelism in the cost model (cost/time_model.h "TP",
// cost/memory.h): its collectives' time, where the backward hides them, their host calls, the
// whole-sequence transients, the node rule, and that TP divides every other per-GPU cost.
#include "core/error.h"
#include "cost/flops.h"
#include "cost/hardware.h"
#include "cost/memory.h"
#include "cost/time_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace dcp::cost {
namespace {

// 2 layers, h 256, FFN 320 with SwiGLU (m = 3 matrices), 4 heads of 64 (MHA), vocab 8, on the
// unit profile (1e12 FLOP/s, efficiencies 1, NVLink 1e9 B/s, no latency, no host costs,
// memory-bound ops free). Forward GEMM FLOPs per token, all different:
//   QKV 2 h (q + 2 kv) = 2 * 256 * 768 = 393,216;  FC1 2 h (m - 1) F = 2 * 256 * 640 = 327,680;
//   FC2 2 h F = 163,840;  output layer 2 h V = 4,096.
CostModel tp_model(int tp, int layers = 2) {
  ModelConfig m{"tp", layers, 256, 320, 4, 4, 64, 8, true};
  ClusterConfig c;
  c.tp = tp;
  c.gpus = tp;  // a pool of one rank
  c.gpus_per_node = 8;
  return CostModel{m, hardware_preset("unit"), c, {}};
}

TEST(TensorParallel, CollectivesHandValuesWhereTheBackwardHidesSomeOfThem) {
  auto cm = tp_model(2);
  cm.hardware.intra_node_latency_s = 1e-6;
  // T = 1000 tokens: one all-gather or reduce-scatter = (tp - 1) (T h 2 / tp / bw + latency)
  //   = 1 * (1000 * 256 * 2 / 2 / 1e9 + 1e-6) = 257 us.
  const TpLayerComm c = tp_layer_comm(cm, 1000, 1000);
  EXPECT_NEAR(c.collective_s, 257e-6, 1e-15);
  EXPECT_NEAR(c.fwd_exposed_s, 4 * 257e-6, 1e-15);
  // Backward: 2 synchronous gathers, plus each asynchronous one's excess over its GEMM (dgrad or
  // wgrad = the forward GEMM's FLOPs / tp) of the column-parallel linears: QKV 393,216 * 1000 / 2
  // / 1e12 = 196.608 us, FC1 163.84 us: 2 * 257 + 2 * (257 - 196.608) + 2 * (257 - 163.84)
  // = 821.104 us. (Under FC2's GEMMs, 81.92 us, or without SwiGLU's 2, it would differ.)
  EXPECT_NEAR(c.bwd_exposed_s, 821.104e-6, 1e-15);

  // Faster links: every asynchronous one fits under its GEMM, only the 2 synchronous ones remain.
  cm.hardware.intra_node_bytes_per_s = 1e10;
  cm.hardware.intra_node_latency_s = 0;
  const TpLayerComm fast = tp_layer_comm(cm, 1000, 1000);
  EXPECT_NEAR(fast.collective_s, 25.6e-6, 1e-15);
  EXPECT_NEAR(fast.bwd_exposed_s, 2 * 25.6e-6, 1e-15);

  // tp 4 (NVLink back at 1e9 B/s): 3 steps of a quarter each: 3 * 1000 * 256 * 2 / 4 / 1e9 = 384 us.
  EXPECT_NEAR(tp_layer_comm(tp_model(4), 1000, 1000).collective_s, 3 * 1000 * 256 * 2 / 4 / 1e9, 1e-15);
  EXPECT_EQ(tp_layer_comm(tp_model(1), 1000, 1000).collective_s, 0.0);
}

TEST(TensorParallel, StageTimesChargeTheCollectivesTheirHostCallsAndTheRecompute) {
  auto cm = tp_model(2);
  cm.hardware.intra_node_latency_s = 1e-6;
  const std::vector<int64_t> one{1000};
  const TpLayerComm c = tp_layer_comm(cm, 1000, 1000);
  // One stage, first and last: 2 layers, no CP, and once per micro-batch the embedding's
  // reduce-scatter and gradient all-gather, the output layer's all-gather and, beyond its dgrad
  // and wgrad GEMMs (2 h V T / tp = 4,096 * 1000 / 2 / 1e12 = 2.048 us each), its re-gather and
  // reduce-scatter.
  const double head_gemm = 4096.0 * 1000 / 2 / 1e12;
  const double head_bwd = 2 * (c.collective_s - head_gemm);
  StageTimes st = group_stage_times(cm, one, 1, 0, 0);
  EXPECT_NEAR(st.fwd.comm_exposed_s, 2 * c.fwd_exposed_s + 2 * c.collective_s, 1e-15);
  EXPECT_NEAR(st.bwd.comm_exposed_s, 2 * c.bwd_exposed_s + c.collective_s + head_bwd, 1e-15);
  EXPECT_EQ(st.fwd.overhead_s, 0.0);  // no host costs on the unit profile

  // With learned position embeddings the embedding all-reduces: twice a reduce-scatter's bytes.
  cm.model.position_embeddings = 4096;
  st = group_stage_times(cm, one, 1, 0, 0);
  EXPECT_NEAR(st.fwd.comm_exposed_s, 2 * c.fwd_exposed_s + 3 * c.collective_s, 1e-15);
  cm.model.position_embeddings = 0;

  // Full recompute runs the layers' forward collectives again in the backward (not the
  // embedding's or the output layer's).
  cm.training.recompute_full = true;
  st = group_stage_times(cm, one, 1, 0, 0);
  EXPECT_NEAR(st.bwd.comm_exposed_s, 2 * (c.bwd_exposed_s + c.fwd_exposed_s) + c.collective_s + head_bwd, 1e-15);

  // Host: 4 calls per layer forward, 10 backward, the embedding's 1 and 1, the output layer's 1
  // and 4, at tp_collective_host_s each; the pass takes max(GPU, host), the excess as overhead.
  // Full recompute repeats the layers' forward calls only: 20 + 8 + 1 + 4.
  cm.hardware.tp_collective_host_s = 1e-3;
  st = group_stage_times(cm, one, 1, 0, 0);
  EXPECT_NEAR(st.bwd.total_s(), (2 * 10 + 2 * 4 + 1 + 4) * 1e-3, 1e-12);
  cm.training.recompute_full = false;
  st = group_stage_times(cm, one, 1, 0, 0);
  EXPECT_NEAR(st.fwd.total_s(), (2 * 4 + 1 + 1) * 1e-3, 1e-12);
  EXPECT_NEAR(st.bwd.total_s(), (2 * 10 + 1 + 4) * 1e-3, 1e-12);
  // At tp 1 the key costs nothing.
  auto one_tp = tp_model(1);
  one_tp.hardware.tp_collective_host_s = 1e-3;
  EXPECT_EQ(group_stage_times(one_tp, one, 1, 0, 0).fwd.overhead_s, 0.0);
}

// With VPP the embedding's collectives run on virtual stage 0 only and the output layer's on the
// last, not on every chunk of the first and the last pipeline stage.
TEST(TensorParallel, EndCollectivesOnTheFirstAndLastVirtualStageOnly) {
  auto cm = tp_model(2, 4);
  cm.cluster.pp = 2;
  cm.cluster.vpp = 2;
  cm.cluster.gpus = 4;
  const std::vector<int64_t> one{1000};
  const TpLayerComm c = tp_layer_comm(cm, 1000, 1000);
  const double head_gemm = 4096.0 * 1000 / 2 / 1e12;
  for (int v = 0; v < 4; ++v) {
    ASSERT_EQ(layers_of_virtual_stage(cm.model, cm.cluster, v), 1);
    const StageTimes st = group_stage_times(cm, one, 1, 0, v);
    const double end_fwd = v == 0 || v == 3 ? c.collective_s : 0.0;
    const double end_bwd = v == 0 ? c.collective_s : v == 3 ? 2 * (c.collective_s - head_gemm) : 0.0;
    EXPECT_NEAR(st.fwd.comm_exposed_s, c.fwd_exposed_s + end_fwd, 1e-15) << v;
    EXPECT_NEAR(st.bwd.comm_exposed_s, c.bwd_exposed_s + end_bwd, 1e-15) << v;
  }
}

// Less its own collectives, tp 2 halves every per-GPU time of tp 1: GEMMs, attention,
// the ring's KV transfers (KV heads / tp), logits. Pipeline p2p moves T h 2 / tp.
TEST(TensorParallel, TpDividesEveryCostButItsOwnCollectives) {
  for (const int k : {1, 2, 4}) {
    auto one = tp_model(1);
    auto two = tp_model(2);
    for (auto* cm : {&one, &two}) {
      cm->cluster.gpus = cm->cluster.tp * 2 * k;  // pp 2, a pool of k
      cm->cluster.pp = 2;
      cm->hardware.intra_node_bytes_per_s = 1e9;
    }
    // TP's collectives share NVLink with the ring, so rather than free them, take their exposed
    // parts (tp_layer_comm, once per layer: one layer per stage here) off the tp 2 times.
    const std::vector<int64_t> lengths{3000, 1000, 520};
    for (int v = 0; v < 2; ++v) {
      ASSERT_EQ(layers_of_virtual_stage(two.model, two.cluster, v), 1);
      const StageTimes a = group_stage_times(one, lengths, k, 0, v);
      const StageTimes b = group_stage_times(two, lengths, k, 0, v);
      double tokens = 0;
      for (auto l : lengths) tokens += static_cast<double>(l) / k;
      const TpLayerComm c = tp_layer_comm(two, tokens, tokens);
      // Stage 0 also runs the embedding's two collectives, stage 1 the output layer's (its two
      // backward ones beyond the 2 h V T / tp dgrad and wgrad GEMMs).
      const double head_gemm = 4096.0 * tokens / 2 / 1e12;
      const double end_fwd = c.collective_s;
      const double end_bwd = v == 0 ? c.collective_s : 2 * (c.collective_s - head_gemm);
      EXPECT_NEAR(b.fwd.compute_s, a.fwd.compute_s / 2, 1e-12 * a.fwd.compute_s) << k << " " << v;
      EXPECT_NEAR(b.bwd.compute_s, a.bwd.compute_s / 2, 1e-12 * a.bwd.compute_s) << k << " " << v;
      EXPECT_NEAR(b.fwd.comm_exposed_s - c.fwd_exposed_s - end_fwd, a.fwd.comm_exposed_s / 2, 1e-15) << k << " " << v;
      EXPECT_NEAR(b.bwd.comm_exposed_s - c.bwd_exposed_s - end_bwd, a.bwd.comm_exposed_s / 2, 1e-15) << k << " " << v;
      if (k > 1) {
        EXPECT_GT(a.fwd.comm_exposed_s, 0.0);  // the ring's transfers are part of the check
      }
      EXPECT_NEAR(b.p2p_s, a.p2p_s / 2, 1e-15) << k << " " << v;
    }
  }
}

// The lower bound's per-sequence work (sequence_compute_split) keeps the bandwidth time of TP's
// synchronous collectives, which every plan pays on every token: 4 per layer forward, 2 backward
// (+ 4 with full recompute), (tp - 1) L h 2 / tp / bw each over the group, whatever its size;
// no latency, none of the asynchronous ones.
TEST(TensorParallel, LowerBoundWorkKeepsTheSynchronousCollectives) {
  auto cm = tp_model(2);
  cm.hardware.intra_node_latency_s = 1e-6;
  auto free = cm;
  free.hardware.intra_node_bytes_per_s = 1e18;
  const double c = 1000.0 * 256 * 2 / 2 / 1e9 - 1000.0 * 256 * 2 / 2 / 1e18;  // 256 us for L = 1000, less "free"'s
  for (const int k : {1, 2, 4}) {
    const SequenceCompute a = sequence_compute_split(cm, 1000, 1000, k), b = sequence_compute_split(free, 1000, 1000, k);
    EXPECT_NEAR(a.layer_fwd_s - b.layer_fwd_s, 4 * c, 1e-12) << k;
    EXPECT_NEAR(a.layer_bwd_s - b.layer_bwd_s, 2 * c, 1e-12) << k;
    EXPECT_EQ(a.head_fwd_s, b.head_fwd_s);
  }
  cm.training.recompute_full = free.training.recompute_full = true;
  EXPECT_NEAR(sequence_compute_split(cm, 1000, 1000, 1).layer_bwd_s - sequence_compute_split(free, 1000, 1000, 1).layer_bwd_s,
              6 * c, 1e-12);
  // Never above what the time model charges the sequence alone on one rank.
  const std::vector<int64_t> one{1000};
  const StageTimes st = group_stage_times(cm, one, 1, 0, 0);
  const SequenceCompute sc = sequence_compute_split(cm, 1000, 1000, 1);
  EXPECT_LE(2 * sc.layer_fwd_s + sc.head_fwd_s, st.fwd.compute_s + st.fwd.comm_exposed_s);
  EXPECT_LE(2 * sc.layer_bwd_s + sc.head_bwd_s, st.bwd.compute_s + st.bwd.comm_exposed_s);
}

TEST(TensorParallel, GroupsMustStayOnOneNode) {
  auto cm = tp_model(8);
  cm.cluster.gpus = 16;
  cm.cluster.gpus_per_node = 4;
  EXPECT_THROW(validate_cluster(cm.cluster), InputError);
  cm.cluster.gpus_per_node = 12;  // 8 does not divide 12: the second group spans two nodes
  EXPECT_THROW(validate_cluster(cm.cluster), InputError);
  cm.cluster.gpus_per_node = 8;
  EXPECT_NO_THROW(validate_cluster(cm.cluster));
}

TEST(TensorParallel, SequenceParallelTransients) {
  // h 256, tp 2: the forward's gathered input 2h = 512 B per token, the column-parallel backward's
  // re-gathered input and whole dgrad 4h = 1024 B; the layer output's gradient 2h / tp = 256 B;
  // the MLP's gradients 2 (m - 1) F / tp = 2 * 640 / 2 = 640 B. The backward's SP transient and
  // the MLP's gradients are not live together (max, not sum).
  auto cm = tp_model(2);
  EXPECT_EQ(sp_forward_bytes_per_token(cm), 512.0);
  EXPECT_EQ(sp_backward_bytes_per_token(cm), 1024.0);
  EXPECT_EQ(layer_transient_bytes_per_token(cm, 1), 512.0);
  EXPECT_EQ(layer_backward_transient_bytes_per_token(cm, 1), 256.0 + 1024.0);
  // With ring CP 4 the forward's CP buffers (/ tp) are the larger: (4 (2*2*256 + 2*256 + 4*4) +
  // 2 (256 + 2*256)) / 2 = (6208 + 1536) / 2 = 3872 B per token.
  EXPECT_EQ(layer_transient_bytes_per_token(cm, 4), 3872.0);
  // Full recompute: the re-materialised activations (2 (4h + (q + 2kv) + q + (m - 1) F + F) +
  // 4 heads) / tp = (2 * 3008 + 16) / 2 = 3016, + 512 in the forward; + max(640, 1024) + the
  // output's gradient 256 in the backward (which also holds those up to the attention:
  // (2 (2h + q + 2kv) + 16) / 2 = 1288, + 1024 = 2312, the smaller).
  cm.training.recompute_full = true;
  EXPECT_EQ(layer_transient_bytes_per_token(cm, 1), 3016.0 + 512.0);
  EXPECT_EQ(layer_backward_transient_bytes_per_token(cm, 1), 3016.0 + 1024.0 + 256.0);
  // A row-parallel linear's backward (FC2 here) holds its gathered output gradient 2h and its
  // input gradient 2F / tp: with GeLU's F = 4h = 1024 at tp 2 that is 512 + 1024 = 1536 > 4h.
  auto gelu = tp_model(2);
  gelu.model.swiglu = false;
  gelu.model.ffn = 1024;
  EXPECT_EQ(sp_backward_bytes_per_token(gelu), 1536.0);
  EXPECT_EQ(layer_backward_transient_bytes_per_token(gelu, 1), 256.0 + 1536.0);  // MLP's 2F/tp = 1024 smaller
  // The output layer's gathered input, 2h per token (resident on the last stage).
  EXPECT_EQ(head_gather_bytes_per_token(cm), 512.0);
  // None at tp 1: the output's gradient 512 + the MLP's gradients 2 * 640 = 1280.
  auto one = tp_model(1);
  EXPECT_EQ(sp_forward_bytes_per_token(one), 0.0);
  EXPECT_EQ(head_gather_bytes_per_token(one), 0.0);
  EXPECT_EQ(layer_transient_bytes_per_token(one, 1), 0.0);
  EXPECT_EQ(layer_backward_transient_bytes_per_token(one, 1), 512.0 + 1280.0);
}

}  // namespace
}  // namespace dcp::cost
