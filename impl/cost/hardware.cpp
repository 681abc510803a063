// Built-in hardware profiles, curve interpolation and calibration files (see hardware.h).
//
// Every h100-sxm number carries its source. Where no public measurement exists the number is
// marked [estimate] (or [derived], when computed from sourced numbers and stated counts) with the
// reasoning, so that a calibration file can replace it and `dcpbench run --sensitivity` can vary it.
#include "cost/hardware.h"

#include "core/error.h"
#include "core/json_io.h"
#include "core/text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace dcp::cost {
namespace {

constexpr double kH100PeakFlops = 989e12;  // H100 SXM dense BF16 tensor peak (NVIDIA datasheet)

// TFLOP/s table -> efficiency curve.
Curve tflops_curve(std::initializer_list<std::pair<double, double>> pts) {
  Curve c;
  for (auto [x, tf] : pts) c.points.push_back({x, tf * 1e12 / kH100PeakFlops});
  return c;
}

// ---- host floor anchors (issue 8 "launch floor") ----
// One PyTorch op issued from Python on an H100 DGX host: torch.nn.Linear forward (bf16, hidden
// 2048, 8192 tokens) took 13.48 us of CPU time on an H100 DGX (Xeon 8480C), TransformerEngine
// issue #2053 (2025-08), table "CPU runtime".
constexpr double kTorchOpHostS = 13.5e-6;
// One TransformerEngine module call: the same issue measured te.Linear at 2.7x the CPU time of
// torch.nn.Linear on the same host (GH200: 90.53 vs 33.17 us); [derived] 2.7 x 13.5 us. That
// ratio is the Grace system's (the issue is about Grace's TE overhead; its x86 H100 DGX te.Linear
// row is not in the excerpt we could read), and TE has cut its CPU time since (TE #2126,
// 2026-01-03: a bf16 TE Linear "nearly the same" as torch's): so probably high for today's TE on
// x86. With the TE module at the torch op's time, Megatron's example steps are 4-8% shorter and
// its speedups move by < 1% (helper-27's what-if); --sensitivity varies host_layer_s +-20%.
constexpr double kTeModuleHostS = 2.7 * kTorchOpHostS;

HardwareProfile h100_sxm() {
  HardwareProfile p;
  p.name = "h100-sxm";
  p.calibration = "h100-sxm-public";
  p.obtained = "public";
  p.peak_flops_per_s = kH100PeakFlops;
  // GEMM efficiency vs tokens (M) for hidden-size K, N (~4k-14k):
  //   8192 and above: 798 TFLOP/s for an 8192^3 bf16 cuBLAS GEMM -> 0.807. [estimate]: the figure
  //   the project's specification (issue 3) gives for this profile; we cite no public measurement
  //   of it, and the one public timing at hand (TE #2053, below) is lower for a narrower shape.
  //   Below: [estimate]s by judgement, no rule derives them: under the weight-read roofline
  //   (weights read once per GEMM: intensity ~ M FLOP/byte, so at HBM 3.35 TB/s the ceiling is
  //   3.35e12*M FLOP/s, 429 TFLOP/s at M=128), 0.70 of it at 128 tokens, then 495 / 640 / 710 /
  //   750 / 780 TFLOP/s at 256 ... 4096 (tile and wave quantization lower short GEMMs), reaching
  //   the 8192^3 figure at 8192. --sensitivity scales the whole curve (gemm_efficiency; +-10% on
  //   the points below 8192 alone moved Megatron-example speedups by <= 0.01 and Llama-13B, whose
  //   micro-batches hold >= 8192 tokens per rank, not at all: helper-66, 2026-12-07).
  //   Shape-independent, so optimistic for small K, N: TransformerEngine issue #2053 timed
  //   torch.nn.Linear with hidden 2048 at 8192 tokens on an H100 DGX at 100.06 us of GPU time,
  //   68.7 GFLOP, i.e. 687 TFLOP/s where this curve reads 798 (the Megatron example's hidden
  //   2048 layers, README); a measured calibration (dcpbench calibrate) replaces the curve.
  p.gemm_efficiency = tflops_curve({{128, 300}, {256, 495}, {512, 640}, {1024, 710},
                                    {2048, 750}, {4096, 780}, {8192, 798}});
  // FA2 / FA3 / cuDNN tables over (query, key) length with the kernels' tile sizes
  // (attention_table.cpp names every source).
  p.attention_tables = h100_attention_tables();
  p.intra_node_bytes_per_s = 450e9;  // NVLink 4: 900 GB/s bidirectional = 450 GB/s per direction
  p.intra_node_latency_s = 10e-6;    // [estimate] NCCL p2p small-message latency incl. launch
  p.inter_node_bytes_per_s = 50e9;   // ConnectX-7 NDR 400 Gb/s = 50 GB/s per NIC per direction
  p.inter_node_latency_s = 20e-6;    // [estimate] IB RDMA + NCCL proxy latency
  p.gpus_per_node = 8;               // HGX/DGX H100
  p.nics_per_node = 8;               // DGX H100: one ConnectX-7 compute NIC per GPU

  // Host floors [derived] from the two anchors above and op counts of Megatron's TE layer spec
  // (TELayerNormColumnParallelLinear for QKV, TEDotProductAttention, TERowParallelLinear for the
  // projection, TELayerNormColumnParallelLinear + TERowParallelLinear for the MLP: 5 TE modules)
  // plus 8 torch glue ops (QKV split/views, rotary or position add, 2 bias-dropout-adds, the
  // activation, 2 reshapes):
  p.host_layer_fwd_s = 5 * kTeModuleHostS + 8 * kTorchOpHostS;  // 290 us
  //   backward: TE modules run Python autograd Functions (same order as forward); the glue ops'
  //   backward runs in autograd's C++ engine, taken as half a Python op.
  p.host_layer_bwd_s = 5 * kTeModuleHostS + 4 * kTorchOpHostS;  // 236 us
  // The CP ring of TE's p2p attention (AttnFuncWithCPAndKVP2P) [derived: op counts of its source
  // (helper-44's count of 2026-11-29, summarised here; TransformerEngine d0067d0 line numbers,
  // transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py), times the
  // anchors above]. Rule: 1 op = anything that goes through the PyTorch dispatcher or the CUDA
  // runtime and enqueues or allocates (a kernel, copy, fill, empty/cat/clone, a tex.* call, each
  // isend/irecv, req.wait(), event record/wait, wait_stream; a `with torch.cuda.stream` block 2);
  // views and no-op casts 0; a torch.compile'd helper (jit_fuser, TE's default) 1; each step's
  // attention kernel call 1 TE module. Path: bf16, causal, k >= 4 on an H100 (batch_p2p_comm off,
  // 1421-1423), pad_between_seqs False (Megatron passes the same tensor as cu_seqlens and
  // cu_seqlens_padded: d0067d0 dot_product_attention.py:2016-2020), the flash path (FA3) that
  // Megatron's example and the Llama-13B scenarios run. Host = ring_call + (k - 1) ring_step per
  // pass and layer:
  //   THD forward, per step after the first (16.5 on average over ranks): a stream block 2 (1700),
  //   2 waits (1702-1703), empty_like + isend + irecv 3 (1706-1707), 2 cu_seqlens // k (721-722,
  //   750-751, 787-788), read-halves (2 on lower-triangle steps 770-771, 1 on upper ones 805: 1.5),
  //   the LSE correction's wait_event + stream block + record_event 4 (1917-1968) and its
  //   correction 1 (1945 / 1950), the output correction 1 (tex.thd_out_correction after the loop,
  //   2001 / 2020). Per call: the diagonal step (11: no waits, read-halves or wait_event), 2
  //   cu_seqlens_padded // k (1447-1448), the Event (1680), the KV cat (1690), the LSE clone
  //   (1938), torch.zeros of the output (1943), wait_stream (1970), less the last step's
  //   empty_like, isend, irecv and record_event (4): 14. (16.5 k - 2.5 in all; until 2026-11-29
  //   12 k.)
  //   THD backward, per step after the first (14.5): 2 waits at the top (2462-2463), isend + irecv
  //   (2493), the dq accumulation 1 (2665-2693), 2 waits (2718-2719), the dk and dv accumulations
  //   2 (2756-2802), 3 empty_like on the flash path (1285), read-halves (2 lower 1095-1096, 3
  //   upper 1111: 2.5). Per call: the diagonal step (12) and, once, the second-half LSE read
  //   (2281), dq_buffer and 2 comm buffers (2396-2399), the KV copy (2401), the 3 zero-fills past
  //   the last sequence (2869-2871, below), less step 0's 2 waits,
  //   as in the TE of January 2026 (0f0e229b5) the scenarios' runs used: 18. d0067d0 adds a
  //   9-op arange / mask-fill epilogue (2930-2941): a calibration for a newer TE adds 9 ops here.
  //   (14.5 k + 3.5 in all; until 2026-11-29 18 k.)
  //   bshd (a padded plan; Megatron hands TE sbhd, which the flash path turns into bshd): its halves
  //   are views, so no read-halves and no cu_seqlens divisions, and its corrections are compiled
  //   helpers: forward 13 per step after the first, 10 per call (13 k - 3); backward 12 and 16
  //   (12 k + 4, incl. the dq split into copy_ + add_ on ranks below k - 1, 2673-2677, and rank 0's
  //   dkv split, 2761-2769). (Until 2026-11-29 10.5 k and 15.5 k.)
  //   The cuDNN (fused) path, cudnn_ring_* and cudnn_bshd_ring_*: THD forward 18.5 per step (a
  //   cu_seqlens_padded // 2, 884 / 913, and an LSE transpose copy, 1926), 15 per call (18.5 k -
  //   3.5); backward 12.5 per step (a cu_seqlens_padded // 2, 1175 / 1182; no empty_likes) and 14
  //   per call (12.5 k + 1.5; no zero-fills); sbhd, which the fused path keeps (its halves views
  //   too): forward 13 and 10 (13 k - 3), backward 9 and 13 (9 k + 4).
  //   Averages over the ranks; a lock-stepped ring runs each step at its slowest rank's pace, 0.5
  //   op more per step (lower-triangle steps in the forward, upper in the backward) [not charged].
  //   At k = 2 TE batches each step's send and receive on an H100 (batch_p2p_comm, 1421-1423): 1
  //   call and 1 wait fewer per step than charged [not charged]. Of the 16.5 forward ops per
  //   step, 8 are stream switches, event records and waits, and request waits, cheaper than an
  //   nn.Linear call: the unit likely overstates them (the profile below would settle it).
  //   Not charged either:
  //   the sbhd -> bshd transposes TE's flash-attention backend makes around a bshd call, k = 1
  //   included (backends.py:941-944, 1369: .contiguous() copies, though at b = 1, the padded
  //   baseline's one sequence per micro-batch, a transpose alone is already contiguous).
  p.ring_step_fwd_s = 16.5 * kTorchOpHostS + kTeModuleHostS;       // 259 us
  p.ring_call_fwd_s = 14 * kTorchOpHostS + kTeModuleHostS;         // 225 us
  p.ring_step_bwd_s = 14.5 * kTorchOpHostS + kTeModuleHostS;       // 232 us
  p.ring_call_bwd_s = 18 * kTorchOpHostS + kTeModuleHostS;         // 279 us
  p.bshd_ring_step_fwd_s = 13 * kTorchOpHostS + kTeModuleHostS;    // 212 us
  p.bshd_ring_call_fwd_s = 10 * kTorchOpHostS + kTeModuleHostS;    // 171 us
  p.bshd_ring_step_bwd_s = 12 * kTorchOpHostS + kTeModuleHostS;    // 198 us
  p.bshd_ring_call_bwd_s = 16 * kTorchOpHostS + kTeModuleHostS;    // 252 us
  p.cudnn_ring_step_fwd_s = 18.5 * kTorchOpHostS + kTeModuleHostS;       // 286 us
  p.cudnn_ring_call_fwd_s = 15 * kTorchOpHostS + kTeModuleHostS;         // 239 us
  p.cudnn_ring_step_bwd_s = 12.5 * kTorchOpHostS + kTeModuleHostS;       // 205 us
  p.cudnn_ring_call_bwd_s = 14 * kTorchOpHostS + kTeModuleHostS;         // 225 us
  p.cudnn_bshd_ring_step_fwd_s = 13 * kTorchOpHostS + kTeModuleHostS;    // 212 us
  p.cudnn_bshd_ring_call_fwd_s = 10 * kTorchOpHostS + kTeModuleHostS;    // 171 us
  p.cudnn_bshd_ring_step_bwd_s = 9 * kTorchOpHostS + kTeModuleHostS;     // 158 us
  p.cudnn_bshd_ring_call_bwd_s = 13 * kTorchOpHostS + kTeModuleHostS;    // 212 us
  // The THD backward on the flash path zero-fills dq, dk, dv past cu_seqlens_padded[-1] by slicing
  // with a device scalar (dq[cu_seqlens_q_padded[-1]:].fill_(0), d0067d0 2869-2871, 0f0e229b5
  // 2649-2651): 3 GPU -> CPU syncs per call (even where nothing is filled: Megatron passes
  // cu_seqlens as cu_seqlens_padded, so the slices are empty, but indexing reads the scalar).
  // After each the GPU idles while the host issues the next op, a fill_ counted in
  // ring_call_bwd_s [derived: one op, 13.5 us; the sync's own return latency not charged]; so a
  // GPU-bound pass is longer by it, a host-bound one not (cost::ring_host). Not on the fused
  // path, nor on bshd.
  p.thd_flash_ring_bwd_sync_s = 3 * kTorchOpHostS;                // 41 us
  // The unit (13.5 us, an nn.Linear call) may overstate stream switches, events, request waits and
  // compiled calls (views are not counted), so the fix for all of it is a profile: host time =
  // a + b k from TE's NVTX ranges (AttnFuncWithCPAndKVP2P.forward / .backward) at k = 2, 4, 8 on a
  // machine with TE and k GPUs; ci/device-run.sh measures our own kernels, not TE's ring.
  // Main-gradient add [derived]: Megatron's DDP backward hook issues param.main_grad.add_(param.grad)
  // for every parameter no fused wgrad GEMM accumulated (norms, biases, embeddings; every one with
  // --no-gradient-accumulation-fusion; Megatron-LM 192cbc3554 distributed_data_parallel.py:466-470):
  // one PyTorch op per such parameter tensor per backward pass (cost::grad_add).
  p.grad_add_host_s = kTorchOpHostS;  // 13.5 us
  // Tensor parallelism's collectives (sequence parallelism, tp > 1) [derived]: TE issues each
  // all-gather and reduce-scatter of its TP linears as one torch.distributed call from Python
  // (gather_along_first_dim / reduce_scatter_along_first_dim, TransformerEngine d0067d0
  // pytorch/module/layernorm_linear.py:309-313, 450, 787-791, 904-907; linear.py:572; base.py:1709),
  // and an async one's handle.wait() as one more: by the ring's op rule above, one op each. Per
  // layer: forward 4 calls, backward 2 synchronous gathers + 2 x (an async gather and its wait +
  // an async reduce-scatter and its wait) = 10; per micro-batch the embedding's 1 and 1 on the
  // first virtual stage, the output layer's 1 and 4 on the last (cost::group_stage_times).
  p.tp_collective_host_s = kTorchOpHostS;  // 13.5 us
  // Per micro-batch [derived], half charged to each pass: on every virtual stage get_batch and
  // PackedSeqParams (cu_seqlens, THD slicing: ~10 ops) and 1 op of schedule glue; on the first
  // virtual stage the embedding besides (~3 ops); on the last the output layer (1 TE module: it is
  // Megatron's own ColumnParallelLinear, gpt_model.py at d98e8a64dd, a Python module around a
  // custom autograd Function, charged at a TE module's cost [estimate]), the
  // loss (~6 ops) and 1 module of loss glue. 20 ops + 2 modules in all on a one-stage pipeline.
  // (Until 2026-11-28 all of it was charged on every virtual stage, also where no embedding or
  // loss runs: 195 us per micro-batch too much on each middle stage and per extra VPP chunk, which
  // tilted --tune against VPP, helper-27.)
  p.microbatch_every_stage_s = 11 * kTorchOpHostS;                      // 149 us
  p.microbatch_first_stage_s = 3 * kTorchOpHostS;                       // 40 us
  p.microbatch_last_stage_s = 6 * kTorchOpHostS + 2 * kTeModuleHostS;   // 154 us
  // Per iteration [derived, op count estimated]: train_step's zero_grad, grad-norm
  // (multi_tensor_l2norm + all-reduce, then the .item() of reduce_max_stat after the optimizer
  // step: cost::IterationTime), loss averaging + .item(), optimizer
  // multi-tensor launches, timers and --log-interval 1 logging: ~200 host ops.
  p.iteration_overhead_s = 200 * kTorchOpHostS;  // 2.7 ms
  // Sequence-packing data path per iteration [estimate]. Megatron runs it for the static
  // dp_balanced baseline as for dynamic CP: DefaultDynamicCPScheduler inherits
  // DpBalancedScheduler.run (Megatron-LM 192cbc3554, the commit that added
  // examples/dynamic_context_parallel/benchmark_dcp.sh and its measurements:
  // megatron/core/datasets/data_schedule.py:164-349; still inherited at dev d48bd6be0a, where the
  // re-route became a per-key all-gather over DP, #6378), which gathers the lengths over DP,
  // calls the scheduler, re-routes the samples and builds the packed micro-batches; bshd (no
  // sequence packing) takes Megatron's ordinary data path and pays none of it. Host work of the
  // path for the few samples per DP rank of the Megatron example: _unpack_batch, the two length
  // syncs, the re-route's per-key packing and unpacking and build_packed_microbatches
  // (data_schedule_utils.py:45-211, 298-528), ~75 op equivalents (most of its few hundred calls
  // at 8 samples per rank are views and slices, far cheaper than a TE module's op). NVIDIA's
  // prototype with --async-hybrid-context-parallel-scheduler (the Llama-13B scenarios,
  // training.data_path "prefetch") does the scheduling and routing in a prefetch process and, in
  // the step, only casts its samples to the device, packs them and all-reduces two counters
  // (3b309c627e megatron/core/pipeline_parallel/data_schedule.py:430-460, 548-556): charged the
  // same host estimate, of the same order. Not valid for large batches, whose per-sample calls
  // grow with the samples per rank; for the Llama-13B scenarios (seconds per step) it is noise
  // either way. The schedulers' own Python time is not charged to any plan: the harness reports
  // planning time apart (README "Async planning"); NVIDIA's prototype hides its solver in a
  // background process, which is what the Llama-13B scenarios compare with: run_hybrid_cp.sh
  // (3b309c627e, lines 226-227) sets --async-hybrid-context-parallel-scheduler, whose sampler
  // MegatronSFTPrefetchDPBalancedSampler runs PipelineAwareBalancedHybridCPscheduler in a prefetch
  // process (legacy/data/data_samplers.py:220-226).
  p.packed_data_overhead_s = 75 * kTorchOpHostS;  // 1.0 ms
  // reroute_samples_to_dcp_ranks (Megatron-LM 192cbc3554 data_schedule_utils.py:298-414) runs one
  // all_to_all_single over the DP x CP group per sample key of MockVarlenDataset
  // (varlen_dataset.py): tokens int64 (8), labels int64 (8), loss_mask fp32 (4), position_ids
  // int64 (8) = 28 bytes per token, plus the two one-element keys original_seq_len and
  // padded_seq_len (kRerouteCollectives in time_model.cpp).
  p.reroute_bytes_per_token = 28;

  p.hbm_bytes_per_s = 3.35e12;       // H100 SXM HBM3 (datasheet)
  // [estimate] element-wise traffic per token per layer forward, in units of hidden x 1 byte:
  // 2 RMSNorm (read+write: 4h), 2 residual adds (6h), RoPE on q,k (4h), SwiGLU activation
  // (3*ffn ~ 8h for ffn/h ~ 2.7) = 22 h-values x 2 bytes (bf16) = 44.
  p.elementwise_bytes_per_token_hidden = 44;
  // Cross-entropy over the logits, bytes per logit [derived from the source, Megatron-LM main
  // d98e8a64dd megatron/core/tensor_parallel/cross_entropy.py and fusions/fused_cross_entropy.py,
  // TransformerEngine transformer_engine/{common,pytorch}/triton/cross_entropy.py before
  // 01bbe3eea, see below]; 4 = fp32, 2 = bf16.
  //   Unfused (VocabParallelCrossEntropy, one kernel per op): forward .float() r2 w4, max r4,
  //   in-place subtract r4 w4, exp r4 w4, sum r4, div_ r4 w4 = 38; backward mul_ by the output
  //   gradient r4 w4, and the cast of the fp32 gradient back to the bf16 logits r4 w2 = 14: 52.
  p.loss_bytes_per_token_vocab = 52;
  //   Fused, native (torch.compile on each of its functions, megatron/core/jit.py): the cast and
  //   max in one kernel r2 w4, subtract + exp + sum r4 w4, div_ r4 w4 = 22; the gradient's mul_
  //   and cast in one kernel that also writes back the mutated fp32 input r4 w4 w2 = 10: 32.
  p.loss_fused_bytes_per_token_vocab = 32;
  //   TE: online softmax r2, loss and gradient into the logits buffer r2 w2 = 6; the backward's
  //   element_mul_kernel by the per-token output gradient r2 w2 = 4 (skipped only when that
  //   gradient is the scalar 1.0): 10. That is TE's kernel until 01bbe3eea (PR #3193, 2026-07-09),
  //   the TE of the runs the scenarios that select it reproduce (NVIDIA's prototype, 2026-01).
  //   From 01bbe3eea on the gradient goes to a separate fp32 buffer, scaled there and cast back
  //   to bf16 by autograd: r2, r2 w4, r4 w4, r4 w2 = 22 (and 4 saved / 6 peak in memory, below);
  //   a calibration for a newer TE sets those keys.
  p.loss_te_bytes_per_token_vocab = 10;
  // THD ring side kernels per ring step after the first, bytes per local token [derived] from the
  // TE code above (bf16, 2 bytes per value; "half" kernels touch half the tokens; lower-triangle
  // steps read half of KV, upper ones half of Q, so per step on average):
  //   fwd: read-half r+w (KV: 4 B x kv / 2 steps of 2; Q: 2 B x q) -> 2*kv + 1*q;
  //        out correction: read out_i (1.5 q avg) + r+w the output (3 q avg) -> 4.5 q.
  p.thd_side_fwd_bytes_q = 5.5;
  p.thd_side_fwd_bytes_kv = 2.0;
  //   bwd: read-halves (KV, or q + out + dout) -> 2*kv + 3*q; dq correction r dq_ + r+w dq (4.5 q
  //        avg); dk/dv corrections (9 kv avg) -> 7.5 q + 11 kv. The non-fp8 backward has no
  //        per-step dKV send-buffer copy: its corrections write into the received buffer
  //        (context_parallel.py:2727, p2p_comm_buffers[(i + 1) % 2][1]), which the next step sends.
  //        (Until 2026-11-29 a send-buffer copy r+w 8 kv was charged per step, 19 kv: helper-39
  //        found it absent; the one KV copy per call is charged on the first step, below.)
  p.thd_side_bwd_bytes_q = 7.5;
  p.thd_side_bwd_bytes_kv = 11.0;
  // The first step (the diagonal, every token, no read-half) [derived, same TE code]: for THD the
  // forward's output correction runs for every step, i = 0 included (context_parallel.py:1981-2029:
  // tex.thd_out_correction for each i in range(cp_size); the bshd path's "init" variant is not
  // THD's), into an output zeroed first (torch.zeros, 1943): read out_0 2q + r+w the output 4q +
  // the zeroing 2q = 8q. Before its loop the forward concatenates K and V into its first send
  // buffer (torch.cat, 1690): r+w 8kv once per call. The backward's i = 0 writes its results too
  // (2655-2696: dq copy or thd_grad_correction "copy"; 2720-2800: dk, dv likewise): r+w dq 4q, r+w
  // dk and dv 8kv; and before its loop it copies KV into its first send buffer
  // (p2p_comm_buffers[0][0].copy_(kv), 2401): r+w 8kv, 16kv in all. Both copies are the same in
  // the bshd layout (the *_first_*_kv keys are charged to both). Until 2026-11-28 only the steps
  // after the first were charged (helper-27); until 2026-11-29 neither KV copy was (the backward's
  // was charged per step as a dKV send-buffer copy instead, above).
  p.thd_side_first_fwd_bytes_q = 8.0;
  p.thd_side_first_fwd_bytes_kv = 8.0;
  p.thd_side_first_bwd_bytes_q = 4.0;
  p.thd_side_first_bwd_bytes_kv = 16.0;
  // bshd (a padded plan: one sequence per group, b = 1) [derived, same TE code]: the halves are
  // views of [b, 2, s/2, h, d] (a slice of dimension 1 at b = 1 is contiguous, so even the fused
  // attention path's .contiguous(), 872-887 and 1172-1178, copies nothing), so none of the
  // read-half traffic above (2 kv + 1 q forward, 2 kv + 3 q backward per step); the corrections
  // are torch.compile'd element-wise functions (flash_attn_fwd_out_correction and its second-half
  // variant, 152-181; dq/dk/dv copy_ and add_ on halves, 2649-2810) that move the same bytes as
  // THD's kernels: 4.5 q forward, 4.5 q + 9 kv backward. The first forward step is
  // flash_attn_fwd_out_correction_init (139-149, used at i = 0 for bshd, 1981-1991): read out_0
  // 2q, write the output 2q = 4q, no zeroing and no read of the output. The first backward step
  // copies into dq, dk, dv as THD's does, and both passes copy KV into their first send buffer
  // as THD's do (thd_side_first_fwd_bytes_kv, thd_side_first_bwd_*).
  p.bshd_side_fwd_bytes_q = 4.5;
  p.bshd_side_fwd_bytes_kv = 0.0;
  p.bshd_side_bwd_bytes_q = 4.5;
  p.bshd_side_bwd_bytes_kv = 9.0;
  p.bshd_side_first_fwd_bytes_q = 4.0;
  // cuDNN (fused) attention on THD, bf16 [derived]: every call of TE's fused attention zeroes its
  // whole output, te_O.zero_() (csrc/extensions/attention.cpp, d0067d0 174-176, 0f0e229b5 157-159),
  // and its backward fills dQ, dK and dV with 0 (489-498 / 453-456) before cuDNN writes them:
  // 2 B per element written, per row of the call's Q (O; dQ) and of its KV (dK and dV: 2 + 2).
  // At cp = 1 once per call, in the ring once per step on the step's rows. Not on bshd or sbhd, not
  // on the flash-attention backends.
  p.thd_fused_fill_fwd_bytes_q = 2.0;
  p.thd_fused_fill_bwd_bytes_q = 2.0;
  p.thd_fused_fill_bwd_bytes_kv = 4.0;
  // Adam step with fp32 main params [derived]: read fp32 grad (4), r+w fp32 param (8), m (8),
  // v (8) = 28; the bf16 model copy is a separate kernel that reads the fp32 main param and writes
  // bf16 (6; Megatron-LM d98e8a64dd megatron/core/optimizer/optimizer.py
  // _copy_main_params_to_model_params, multi_tensor_scale); grad-norm reads the grads (4): 38 bytes
  // per param of the GPU's optimizer shard. Not charged: the gradient scaling of --clip-grad
  // (r4 w4), which Megatron runs only on the steps whose norm exceeds the clip value with the TE of
  // the runs the scenarios reproduce (the Megatron example's README names the NeMo 26.02 rc5
  // container, from before TE 2.14's tag of 2026-04-06). With TE >= 2.14 (multi_tensor_scale_tensor, 06a23e364, 2026-03-11)
  // Megatron rescales every gradient every step (clip_grads.py, clip_coeff a tensor): +8, 46 bytes. (Zeroing the grad buffer writes every param of the stage, not
  // only the shard: Megatron's zero_grad_buffer; cost::iteration_time charges it apart, and the
  // read + write that scales that buffer by 1/|DP x CP| or 1/tokens, which is not --clip-grad's.)
  p.optimizer_bytes_per_param = 38;

  // H100 SXM "80GB" HBM3 (datasheet): five 16 GiB stacks, 80 GiB (the driver reports ~79.6 GiB
  // total, the rest holding its own structures); the datasheet's GB are binary here.
  p.memory_bytes = 80.0 * 1024 * 1024 * 1024;
  // NVIDIA's prototype rejects a plan whose simulated peak exceeds 70 GiB on these GPUs (PR #2959
  // hotsim memory model, landscape §3.3; core/pipeline_parallel/data_schedule.py:2372 at 3b309c627e): the other 10 GiB are
  // context, NCCL buffers (here the communicators of every CP group size), cuBLAS/TE workspaces,
  // RoPE's cached fp32 tables (rotary_pos_embedding.py:150, an lru_cache of 32 lengths) and
  // allocator slack, none of them measured here. Likely an overestimate of what those take: the
  // hotsim model the 70 GiB cut applies to leaves out the logits, the norms' outputs and the CP
  // buffers (pipeline_simulator/hotsim/memory_model.py:72-83, model.py:116-130; helper-81's review), which this model
  // charges, so part of its 10 GiB margin covered them; the 80 GiB above are ~0.4 GiB more than
  // the driver offers, inside this reserve.
  p.memory_reserved_bytes = 10.0 * 1024 * 1024 * 1024;
  // Bytes per logit of the cross-entropy [derived from the source]. Megatron's vocab-parallel
  // cross-entropy, unfused or fused with the native implementation (the default,
  // model_parallel_config.py:325 at d98e8a64dd), converts the bf16 logits to fp32
  // (tensor_parallel/cross_entropy.py:25, `.float()`), then subtracts the max, exponentiates and
  // normalises in place (:42, :62-63, :76), and saves that fp32 softmax for the backward
  // (fusions/fused_cross_entropy.py:119); the backward turns it into the gradient in place and
  // casts it to bf16 (:82). So the forward holds bf16 logits + fp32 copy (2 + 4 = 6), 4 are kept
  // until the backward, and the backward holds fp32 + bf16 gradient (4 + 2 = 6). TE's fused
  // cross-entropy (--cross-entropy-fusion-impl te; TransformerEngine
  // pytorch/triton/cross_entropy.py, cross_entropy_forward, before 01bbe3eea as above) writes the
  // gradient into the bf16 logits buffer during the forward and keeps that buffer: 2 throughout.
  p.ce_fp32_saved_bytes_per_logit = 4;
  p.ce_fp32_peak_bytes_per_logit = 6;
  p.ce_te_saved_bytes_per_logit = 2;
  p.ce_te_peak_bytes_per_logit = 2;
  return p;
}

HardwareProfile unit_profile() {
  HardwareProfile p;
  p.name = "unit";
  p.calibration = "unit";
  p.obtained = "synthetic";
  p.peak_flops_per_s = 1e12;
  p.gemm_efficiency.points = {{1, 1.0}};
  for (const auto& backend : attention_backend_names()) {
    AttentionTable t;
    t.backend = backend;
    t.head_dim = 128;
    t.lengths = {1};
    t.fwd_causal = t.fwd_full = t.bwd = {1.0};
    t.fwd_tile_q = t.fwd_tile_k = t.bwd_tile_q = t.bwd_tile_k = 1;
    p.attention_tables.push_back(t);
  }
  p.intra_node_bytes_per_s = 1e9;
  p.inter_node_bytes_per_s = 1e9;
  p.gpus_per_node = 4;
  p.nics_per_node = 1;
  p.memory_bytes = 1e15;
  return p;
}

// Every double field of HardwareProfile by calibration key.
using ScalarField = double HardwareProfile::*;
const std::vector<std::pair<std::string, ScalarField>>& scalar_fields() {
  static const std::vector<std::pair<std::string, ScalarField>> f = {
      {"peak_flops_per_s", &HardwareProfile::peak_flops_per_s},
      {"intra_node_bytes_per_s", &HardwareProfile::intra_node_bytes_per_s},
      {"intra_node_latency_s", &HardwareProfile::intra_node_latency_s},
      {"inter_node_bytes_per_s", &HardwareProfile::inter_node_bytes_per_s},
      {"inter_node_latency_s", &HardwareProfile::inter_node_latency_s},
      {"grad_add_host_s", &HardwareProfile::grad_add_host_s},
      {"tp_collective_host_s", &HardwareProfile::tp_collective_host_s},
      {"host_layer_fwd_s", &HardwareProfile::host_layer_fwd_s},
      {"host_layer_bwd_s", &HardwareProfile::host_layer_bwd_s},
      {"ring_step_fwd_s", &HardwareProfile::ring_step_fwd_s},
      {"ring_step_bwd_s", &HardwareProfile::ring_step_bwd_s},
      {"bshd_ring_step_fwd_s", &HardwareProfile::bshd_ring_step_fwd_s},
      {"bshd_ring_step_bwd_s", &HardwareProfile::bshd_ring_step_bwd_s},
      {"ring_call_fwd_s", &HardwareProfile::ring_call_fwd_s},
      {"ring_call_bwd_s", &HardwareProfile::ring_call_bwd_s},
      {"bshd_ring_call_fwd_s", &HardwareProfile::bshd_ring_call_fwd_s},
      {"bshd_ring_call_bwd_s", &HardwareProfile::bshd_ring_call_bwd_s},
      {"cudnn_ring_step_fwd_s", &HardwareProfile::cudnn_ring_step_fwd_s},
      {"cudnn_ring_step_bwd_s", &HardwareProfile::cudnn_ring_step_bwd_s},
      {"cudnn_ring_call_fwd_s", &HardwareProfile::cudnn_ring_call_fwd_s},
      {"cudnn_ring_call_bwd_s", &HardwareProfile::cudnn_ring_call_bwd_s},
      {"cudnn_bshd_ring_step_fwd_s", &HardwareProfile::cudnn_bshd_ring_step_fwd_s},
      {"cudnn_bshd_ring_step_bwd_s", &HardwareProfile::cudnn_bshd_ring_step_bwd_s},
      {"cudnn_bshd_ring_call_fwd_s", &HardwareProfile::cudnn_bshd_ring_call_fwd_s},
      {"cudnn_bshd_ring_call_bwd_s", &HardwareProfile::cudnn_bshd_ring_call_bwd_s},
      {"thd_flash_ring_bwd_sync_s", &HardwareProfile::thd_flash_ring_bwd_sync_s},
      {"microbatch_every_stage_s", &HardwareProfile::microbatch_every_stage_s},
      {"microbatch_first_stage_s", &HardwareProfile::microbatch_first_stage_s},
      {"microbatch_last_stage_s", &HardwareProfile::microbatch_last_stage_s},
      {"iteration_overhead_s", &HardwareProfile::iteration_overhead_s},
      {"packed_data_overhead_s", &HardwareProfile::packed_data_overhead_s},
      {"reroute_bytes_per_token", &HardwareProfile::reroute_bytes_per_token},
      {"hbm_bytes_per_s", &HardwareProfile::hbm_bytes_per_s},
      {"elementwise_bytes_per_token_hidden", &HardwareProfile::elementwise_bytes_per_token_hidden},
      {"loss_bytes_per_token_vocab", &HardwareProfile::loss_bytes_per_token_vocab},
      {"loss_fused_bytes_per_token_vocab", &HardwareProfile::loss_fused_bytes_per_token_vocab},
      {"loss_te_bytes_per_token_vocab", &HardwareProfile::loss_te_bytes_per_token_vocab},
      {"thd_side_fwd_bytes_q", &HardwareProfile::thd_side_fwd_bytes_q},
      {"thd_side_fwd_bytes_kv", &HardwareProfile::thd_side_fwd_bytes_kv},
      {"thd_side_bwd_bytes_q", &HardwareProfile::thd_side_bwd_bytes_q},
      {"thd_side_bwd_bytes_kv", &HardwareProfile::thd_side_bwd_bytes_kv},
      {"thd_side_first_fwd_bytes_q", &HardwareProfile::thd_side_first_fwd_bytes_q},
      {"thd_side_first_fwd_bytes_kv", &HardwareProfile::thd_side_first_fwd_bytes_kv},
      {"thd_side_first_bwd_bytes_q", &HardwareProfile::thd_side_first_bwd_bytes_q},
      {"thd_side_first_bwd_bytes_kv", &HardwareProfile::thd_side_first_bwd_bytes_kv},
      {"bshd_side_fwd_bytes_q", &HardwareProfile::bshd_side_fwd_bytes_q},
      {"bshd_side_fwd_bytes_kv", &HardwareProfile::bshd_side_fwd_bytes_kv},
      {"bshd_side_bwd_bytes_q", &HardwareProfile::bshd_side_bwd_bytes_q},
      {"bshd_side_bwd_bytes_kv", &HardwareProfile::bshd_side_bwd_bytes_kv},
      {"bshd_side_first_fwd_bytes_q", &HardwareProfile::bshd_side_first_fwd_bytes_q},
      {"thd_fused_fill_fwd_bytes_q", &HardwareProfile::thd_fused_fill_fwd_bytes_q},
      {"thd_fused_fill_bwd_bytes_q", &HardwareProfile::thd_fused_fill_bwd_bytes_q},
      {"thd_fused_fill_bwd_bytes_kv", &HardwareProfile::thd_fused_fill_bwd_bytes_kv},
      {"optimizer_bytes_per_param", &HardwareProfile::optimizer_bytes_per_param},
      {"memory_bytes", &HardwareProfile::memory_bytes},
      {"memory_reserved_bytes", &HardwareProfile::memory_reserved_bytes},
      {"ce_fp32_saved_bytes_per_logit", &HardwareProfile::ce_fp32_saved_bytes_per_logit},
      {"ce_fp32_peak_bytes_per_logit", &HardwareProfile::ce_fp32_peak_bytes_per_logit},
      {"ce_te_saved_bytes_per_logit", &HardwareProfile::ce_te_saved_bytes_per_logit},
      {"ce_te_peak_bytes_per_logit", &HardwareProfile::ce_te_peak_bytes_per_logit},
  };
  return f;
}

const AttentionTable* find_table(const HardwareProfile& p, const std::string& backend, int head_dim,
                                 const AttentionTable** hi, double* w) {
  const AttentionTable* lo = nullptr;
  *hi = nullptr;
  *w = 0;
  std::vector<const AttentionTable*> mine;
  for (const auto& t : p.attention_tables)
    if (t.backend == backend) mine.push_back(&t);
  if (mine.empty()) {
    std::string known;
    for (const auto& t : p.attention_tables)
      if (known.find(t.backend) == std::string::npos) known += (known.empty() ? "" : ", ") + t.backend;
    throw InputError("attention backend \"" + backend + "\" has no table in profile " + p.name + " (known: " +
                     known + ")");
  }
  std::sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->head_dim < b->head_dim; });
  if (head_dim <= mine.front()->head_dim) return mine.front();
  if (head_dim >= mine.back()->head_dim) return mine.back();
  for (size_t i = 0; i + 1 < mine.size(); ++i) {
    if (head_dim >= mine[i]->head_dim && head_dim <= mine[i + 1]->head_dim) {
      lo = mine[i];
      *hi = mine[i + 1];
      *w = double(head_dim - lo->head_dim) / double((*hi)->head_dim - lo->head_dim);
      return lo;
    }
  }
  return mine.back();
}

void merge_points(Curve& curve, const nlohmann::json& j, const std::string& where) {
  DCP_REQUIRE(j.is_array(), where, " must be an array of [x, y] pairs");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    DCP_REQUIRE(e.is_array() && e.size() == 2 && e[0].is_number() && e[1].is_number(), where, "[",
                i, "] must be a pair of numbers, got ", e.dump());
    const double x = e[0].get<double>(), y = e[1].get<double>();
    auto it = std::find_if(curve.points.begin(), curve.points.end(),
                           [&](const CurvePoint& c) { return c.x == x; });
    if (it != curve.points.end())
      it->y = y;
    else
      curve.points.push_back({x, y});
  }
  std::sort(curve.points.begin(), curve.points.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.x < b.x; });
}

nlohmann::json curve_json(const Curve& c) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : c.points) a.push_back({p.x, p.y});
  return a;
}

void check_curve(const Curve& c, const std::string& what, const std::string& profile) {
  DCP_REQUIRE(!c.points.empty(), "profile ", profile, ": curve ", what, " is empty");
  for (size_t i = 0; i < c.points.size(); ++i) {
    const auto& p = c.points[i];
    DCP_REQUIRE(p.x > 0, "profile ", profile, ": ", what, "[", i, "] x=", p.x, " must be > 0");
    DCP_REQUIRE(p.y > 0 && p.y <= 1, "profile ", profile, ": ", what, "[", i, "] efficiency=", p.y,
                " must be in (0, 1]");
    if (i > 0)
      DCP_REQUIRE(p.x > c.points[i - 1].x, "profile ", profile, ": ", what, "[", i, "] x=", p.x,
                  " is not above the previous point");
  }
}

}  // namespace

double Curve::at(double x) const {
  DCP_CHECK(!points.empty(), "empty curve");
  if (x <= points.front().x) return points.front().y;
  if (x >= points.back().x) return points.back().y;
  auto hi = std::upper_bound(points.begin(), points.end(), x,
                             [](double v, const CurvePoint& p) { return v < p.x; });
  auto lo = hi - 1;
  const double t = (std::log2(x) - std::log2(lo->x)) / (std::log2(hi->x) - std::log2(lo->x));
  return lo->y + t * (hi->y - lo->y);
}

double HardwareProfile::gemm_efficiency_at(double tokens) const { return gemm_efficiency.at(tokens); }

double HardwareProfile::attn_efficiency(const std::string& backend, AttnKind kind, double q, double k,
                                        int head_dim) const {
  const AttentionTable* hi = nullptr;
  double w = 0;
  const AttentionTable* lo = find_table(*this, backend, head_dim, &hi, &w);
  const double a = lo->at(kind, q, k);
  return hi ? (1 - w) * a + w * hi->at(kind, q, k) : a;
}

double HardwareProfile::collective_inter_node_bytes_per_s() const {
  return std::min(intra_node_bytes_per_s, nics_per_node * inter_node_bytes_per_s);
}

std::vector<std::string> profile_scalar_keys() {
  std::vector<std::string> keys;
  for (const auto& [k, _] : scalar_fields()) keys.push_back(k);
  return keys;
}

double profile_scalar(const HardwareProfile& p, const std::string& key) {
  for (const auto& [k, f] : scalar_fields())
    if (k == key) return p.*f;
  DCP_FAIL("unknown profile scalar \"", key, "\"");
}

void set_profile_scalar(HardwareProfile& p, const std::string& key, double value) {
  for (const auto& [k, f] : scalar_fields()) {
    if (k == key) {
      p.*f = value;
      return;
    }
  }
  DCP_FAIL("unknown profile scalar \"", key, "\"");
}

HardwareProfile hardware_preset(const std::string& name) {
  if (name == "h100-sxm") return h100_sxm();
  if (name == "unit") return unit_profile();
  throw InputError("unknown hardware profile \"" + name + "\" (known: h100-sxm, unit)");
}

std::vector<std::string> hardware_preset_names() { return {"h100-sxm", "unit"}; }

namespace {
// The largest value a calibration file may set for a scalar, one per unit, far above any GPU, link
// or host, so that a typo such as 1e300 is refused rather than printed as a 300-digit step time
// (helper-20, 2026-12-06): 1e18 per second for a rate (1 EFLOP/s or 1 EB/s for one GPU or link), an
// hour for a time, 2^50 bytes (1 PiB) for a GPU's memory, 10^6 for a byte count per token, logit or
// parameter (the built-in ones are 2 to 52). Only a file's values are held to it: the --sensitivity
// variants scale the profile by 1.2 after it is read (helper-21).
double scalar_ceiling(const std::string& k) {
  if (k.ends_with("_per_s")) return 1e18;
  if (k.ends_with("_s")) return 3600.0;
  if (k == "memory_bytes" || k == "memory_reserved_bytes") return 0x1p50;
  return 1e6;
}
}  // namespace

void validate_profile(const HardwareProfile& p) {
  DCP_REQUIRE(p.peak_flops_per_s > 0, "profile ", p.name, ": peak_flops_per_s=", p.peak_flops_per_s,
              " must be > 0");
  DCP_REQUIRE(p.intra_node_bytes_per_s > 0, "profile ", p.name,
              ": intra_node_bytes_per_s=", p.intra_node_bytes_per_s, " must be > 0");
  DCP_REQUIRE(p.inter_node_bytes_per_s > 0, "profile ", p.name,
              ": inter_node_bytes_per_s=", p.inter_node_bytes_per_s, " must be > 0");
  // Every rate divides a volume (HBM bytes, link bytes, FLOPs) and must be > 0, but for
  // hbm_bytes_per_s, where 0 switches the memory-bound ops off (hardware.h; the "unit" test
  // profile's setting; a calibration file may not set it, apply_calibration, which also holds each
  // value a file sets to the ceiling of its unit, scalar_ceiling).
  for (const auto& [k, f] : scalar_fields()) {
    const bool rate = k.ends_with("_per_s") && k != "hbm_bytes_per_s";
    DCP_REQUIRE(std::isfinite(p.*f) && (rate ? p.*f > 0 : p.*f >= 0), "profile ", p.name, ": ", k, "=", p.*f,
                rate ? " must be > 0" : " must be >= 0");
  }
  DCP_REQUIRE(p.memory_bytes > p.memory_reserved_bytes, "profile ", p.name, ": memory_bytes=", p.memory_bytes,
              " must exceed memory_reserved_bytes=", p.memory_reserved_bytes);
  DCP_REQUIRE(p.gpus_per_node >= 1, "profile ", p.name, ": gpus_per_node=", p.gpus_per_node,
              " must be >= 1");
  DCP_REQUIRE(p.nics_per_node >= 1, "profile ", p.name, ": nics_per_node=", p.nics_per_node,
              " must be >= 1");
  check_curve(p.gemm_efficiency, "gemm_efficiency", p.name);
  DCP_REQUIRE(!p.attention_tables.empty(), "profile ", p.name, ": no attention tables");
  for (const auto& t : p.attention_tables) validate_attention_table(t, p.name);
}

HardwareProfile apply_calibration(const HardwareProfile& base, const nlohmann::json& j,
                                  const std::string& source) {
  DCP_REQUIRE(j.is_object(), source, ": calibration must be a JSON object");
  HardwareProfile p = base;
  for (const auto& [key, value] : j.items()) {
    const std::string at = source + ": \"" + key + "\"";
    const std::string name = key;  // (clang: a structured binding cannot be captured before C++20 P1091)
    const auto field = std::find_if(scalar_fields().begin(), scalar_fields().end(),
                                    [&](const auto& f) { return f.first == name; });
    if (key == "schema") {
      DCP_REQUIRE(value == "dcpbench.calibration.v1", at, "=", value.dump(),
                  " (expected \"dcpbench.calibration.v1\")");
    } else if (key == "name") {
      DCP_REQUIRE(value.is_string(), at, " must be a string");
      if (auto e = safe_name_error(value.get<std::string>()))  // it goes into "simulated:<model>@<name>"
        throw InputError(at + "=" + quote(value.get<std::string>()) + " " + *e);
      p.calibration = value.get<std::string>();
    } else if (key == "profile") {
      DCP_REQUIRE(value.is_string() && value.get<std::string>() == base.name, at, "=", value.dump(),
                  " does not match the profile \"", base.name, "\"");
    } else if (key == "obtained") {
      DCP_REQUIRE(value == "public" || value == "measured" || value == "synthetic", at, "=",
                  value.dump(), " (expected \"public\", \"measured\" or \"synthetic\")");
      p.obtained = value.get<std::string>();
    } else if (key == "comment" || key == "sources" || key == "script" || key == "device" || key == "date" ||
               key == "git_sha") {
      // free-form provenance
    } else if (key == "microbatch_overhead_s") {
      // Its value was the whole per-micro-batch cost charged on every virtual stage; read as the
      // every-stage part it would be charged again with the first and last stages' parts.
      throw InputError(at + ": was split on 2026-11-28 into microbatch_every_stage_s (every virtual "
                       "stage), microbatch_first_stage_s and microbatch_last_stage_s (whose sum is the old "
                       "value on a one-stage pipeline): set those instead");
    } else if (field != scalar_fields().end()) {
      DCP_REQUIRE(value.is_number(), at, "=", value.dump(), " must be a number");
      // 0 switches the memory-bound ops off (validate_profile): the unit test profile's setting,
      // never a measurement; from a file it read as "memory traffic is free" and shortened the
      // simulated step (helper-20, 2026-12-06).
      DCP_REQUIRE(key != "hbm_bytes_per_s" || value.get<double>() > 0, at, "=", value.dump(),
                  " must be > 0 (0 would leave every memory-bound op uncharged)");
      DCP_REQUIRE(value.get<double>() <= scalar_ceiling(key), at, "=", value.dump(), " is above the maximum ",
                  json_excerpt(nlohmann::json(scalar_ceiling(key))));
      p.*(field->second) = value.get<double>();
    } else if (key == "gpus_per_node" || key == "nics_per_node") {
      // range-checked, never wrapped (a JSON 2^40 would become 0)
      (key == "gpus_per_node" ? p.gpus_per_node : p.nics_per_node) = static_cast<int>(json_int(value, 1, 1 << 20, at));
    } else if (key == "gemm_efficiency") {
      merge_points(p.gemm_efficiency, value, at);
    } else if (key == "attention_tables") {
      DCP_REQUIRE(value.is_array(), at, " must be an array");
      for (size_t i = 0; i < value.size(); ++i) {
        AttentionTable t = attention_table_from_json(value[i], at + "[" + std::to_string(i) + "]");
        auto it = std::find_if(p.attention_tables.begin(), p.attention_tables.end(), [&](const AttentionTable& x) {
          return x.backend == t.backend && x.head_dim == t.head_dim;
        });
        if (it != p.attention_tables.end())
          *it = std::move(t);
        else
          p.attention_tables.push_back(std::move(t));
      }
    } else {
      throw InputError(at + " is not a known calibration key");
    }
  }
  validate_profile(p);
  return p;
}

HardwareProfile load_calibration_file(const HardwareProfile& base, const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  // A file's numbers label every result ("simulated:<model>@<name>"), so it must say its name and
  // how its numbers were obtained; otherwise results would carry the built-in profile's label.
  for (const char* key : {"name", "obtained"}) {
    DCP_REQUIRE(j.is_object() && j.contains(key), path, ": \"", key,
                "\" is missing (a calibration file must name itself and say how it was obtained)");
  }
  return apply_calibration(base, j, path);
}

nlohmann::json profile_to_json(const HardwareProfile& p) {
  nlohmann::json j;
  j["schema"] = "dcpbench.calibration.v1";
  j["name"] = p.calibration;
  j["profile"] = p.name;
  j["obtained"] = p.obtained;
  for (const auto& [k, f] : scalar_fields()) j[k] = p.*f;
  j["gpus_per_node"] = p.gpus_per_node;
  j["nics_per_node"] = p.nics_per_node;
  j["gemm_efficiency"] = curve_json(p.gemm_efficiency);
  j["attention_tables"] = nlohmann::json::array();
  for (const auto& t : p.attention_tables) j["attention_tables"].push_back(attention_table_to_json(t));
  return j;
}

}  // namespace dcp::cost
