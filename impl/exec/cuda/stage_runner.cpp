// See stage_runner.h.
#include "exec/cuda/stage_runner.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "attn/cuda/device_array.h"
#include "attn/cuda/flash_launch.h"
#include "attn/cuda/flash_ring_cuda.h"
#include "attn/cuda/thd_kernels.h"
#include "attn/flash_emu.h"
#include "attn/thd.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "core/nvtx.h"
#include "exec/cuda/gemm_lt.h"
#include "model/cuda/layer_launch.h"

namespace dcp::exec {

using attn::cuda::DeviceArray;

namespace {

// A growable device buffer of random values drawn on the device (attn/cuda/thd_kernels.h
// fill_uniform, a new seed per fill): 16-bit buffers bf16 in [-1, 1) (an fp16 run reads those
// bits as fp16 values of magnitude < 1.875: finite too), float ones in [-1, 1), integer ones 0.
// Random mantissas as in bench_attn_cuda and the PyTorch peers' inputs: until 2026-11-28 every
// 16-bit input was one repeated pattern (0x3C3C), on which a power-limited GPU clocks higher than
// on real data (H. He, "Strangely, Matrix Multiplications on GPUs Run Faster When Given
// 'Predictable' Data!", thonking.ai, 2024: on an A100 at its power limit, GEMMs on zeros up to
// ~15% faster than on random values), so measured times and the calibration made from them would
// have been optimistic (helper-28).
template <class T>
struct Buffer {
  DeviceArray<T> a;
  T* need(size_t n) {
    if (a.size() < n) {
      a = DeviceArray<T>();  // free the old one first (the largest buffers are T x vocab)
      a = DeviceArray<T>(n);
      static uint64_t seed = 0;
      if constexpr (std::is_same_v<T, uint16_t>) {
        DCP_CUDA_CHECK(attn::cuda::fill_uniform(a.get(), static_cast<int64_t>(n), ++seed, 1.0f, true, nullptr));
      } else if constexpr (std::is_same_v<T, float>) {
        DCP_CUDA_CHECK(attn::cuda::fill_uniform(a.get(), static_cast<int64_t>(n), ++seed, 1.0f, nullptr));
      } else {
        DCP_CUDA_CHECK(cudaMemset(a.get(), 0, n * sizeof(T)));
      }
    }
    return a.get();
  }
};

// An attention op's two THD batches on the device and the kernels' parameters over the buffers.
struct AttnPlan {
  attn::ThdBatch bq, bk;
  std::unique_ptr<attn::DeviceBatchPair> arrays;
  int64_t rows_q = 0, rows_k = 0;
  std::unique_ptr<DeviceArray<int64_t>> gather_rows;  // the read-half rows on the device (lower, upper)
};

}  // namespace

struct StageRunner::Impl {
  cost::ModelConfig model;
  attn::Half half;
  bool bf16;
  GemmLt gemm;
  Buffer<uint16_t> x, y, z, q, k, v, o, dq, dk, dv, dout, kv_copy;
  Buffer<float> f1, f2, f3;
  // The THD ring side kernels' buffers: gathered halves, fp32 step results and accumulators.
  Buffer<uint16_t> qg, og, dog, kg, vg;
  Buffer<float> lg, step32, out_acc, lse_acc, dq_acc, dk_acc, dv_acc;
  Buffer<float> main_grad;  // the wgrad GEMMs' fp32 accumulator (one buffer for every weight: only time matters)
  Buffer<int32_t> pos, labels;
  Buffer<uint8_t> mask;

  Impl(const cost::ModelConfig& m, attn::Half h) : model(m), half(h), bf16(h == attn::Half::bf16) {}

  // Everything a run needs that is not timed: the attention ops' batches on the device, the
  // loss's labels (0) and mask (1).
  std::vector<AttnPlan> prepare(const StageWork& w) {
    std::vector<AttnPlan> plans(w.ops.size());
    for (size_t i = 0; i < w.ops.size(); ++i) {
      const StageOp& op = w.ops[i];
      if (op.kind == OpKind::loss) {
        const size_t rows = static_cast<size_t>(op.rows);
        DCP_CUDA_CHECK(cudaMemset(mask.need(rows), 1, rows));
        DCP_CUDA_CHECK(cudaMemset(labels.need(rows), 0, rows * sizeof(int32_t)));
      }
      if (op.kind != OpKind::attention) continue;
      AttnPlan& p = plans[i];
      p.bq = attn::make_thd_batch(op.len_q, 1);
      p.bk = attn::make_thd_batch(op.len_k, 1);
      p.arrays = std::make_unique<attn::DeviceBatchPair>(p.bq, p.bk);
      p.rows_q = p.bq.total_tokens();
      p.rows_k = p.bk.total_tokens();
      if (op.gather_rows && !op.gather_rows->empty())
        p.gather_rows = std::make_unique<DeviceArray<int64_t>>(std::span<const int64_t>(*op.gather_rows));
    }
    return plans;
  }

  // Runs one op; its ring copy (a step with another rank's KV) between the events c0 and c1.
  void run(const StageOp& op, const AttnPlan& ap, cudaEvent_t c0, cudaEvent_t c1) {
    const bool backward = op.pass == Pass::bwd;
    switch (op.kind) {
      case OpKind::gemm:
        gemm.run(bf16, op.form, op.m, op.n, op.k, x.need(static_cast<size_t>(op.m * op.k)),
                 y.need(static_cast<size_t>(op.k * op.n)),
                 op.accumulate_fp32 ? static_cast<void*>(main_grad.need(static_cast<size_t>(op.m * op.n)))
                                    : static_cast<void*>(z.need(static_cast<size_t>(op.m * op.n))),
                 op.accumulate_fp32, nullptr);
        break;
      case OpKind::attention: {
        attn::AttnShape s;
        s.heads = op.heads;
        s.kv_heads = op.kv_heads;
        s.head_dim = op.head_dim;
        s.causal = op.step == attn::RingStep::diagonal;
        const size_t nq = static_cast<size_t>(ap.rows_q * s.q_row()), nk = static_cast<size_t>(ap.rows_k * s.kv_row());
        const size_t nl = static_cast<size_t>(ap.rows_q * s.heads);
        if (op.transfer_rows > 0) {  // KV of another rank of the group (its whole local block): a device copy
          const size_t sent = 2 * static_cast<size_t>(op.transfer_rows * s.kv_row());
          DCP_CUDA_CHECK(cudaEventRecord(c0, nullptr));
          DCP_CUDA_CHECK(cudaMemcpyAsync(kv_copy.need(sent), k.need(sent), sent * sizeof(uint16_t),
                                         cudaMemcpyDeviceToDevice, nullptr));
          DCP_CUDA_CHECK(cudaEventRecord(c1, nullptr));
        }
        // TransformerEngine's THD ring around the step (cp > 1; attn/flash_ring.h runs the same on
        // its virtual ranks): read-half before it, fp32 corrections after it.
        const bool ring = op.cp_size > 1;
        const bool lower = op.step == attn::RingStep::lower, upper = op.step == attn::RingStep::upper;
        const int64_t half = ap.gather_rows ? static_cast<int64_t>(ap.gather_rows->size()) : 0;
        const int64_t* rows = ap.gather_rows ? ap.gather_rows->get() : nullptr;
        const int64_t q_rows = upper ? half : op.local_rows;  // rows of this rank's Q side the step touches
        const int64_t k_rows = lower ? half : op.local_rows;  // of the KV side
        const int64_t qr = s.q_row(), kr = s.kv_row();
        const size_t nq_side = std::max(nq, static_cast<size_t>(q_rows * qr)),
                     nk_side = std::max(nk, static_cast<size_t>(k_rows * kr));
        const size_t nl_side = std::max(nl, static_cast<size_t>(q_rows * s.heads));
        const int64_t local = op.local_rows;
        if (ring && op.step == attn::RingStep::diagonal) {  // the group's first step: fresh accumulators
          if (!backward) {
            DCP_CUDA_CHECK(cudaMemsetAsync(out_acc.need(static_cast<size_t>(local * qr)), 0, local * qr * sizeof(float), nullptr));
            // -inf: no step merged yet, so the first merge takes the step's own result (a 0 here
            // merged it against a fake LSE of 0; helper-57's review, 2026-12-07). The replay times
            // its ops and checks no value: its backward reads f1, the buffer's own random LSE, not
            // this merged one, which moves no kernel's work (helper-59).
            DCP_CUDA_CHECK(attn::cuda::fill_value(lse_acc.need(static_cast<size_t>(local * s.heads)), local * s.heads,
                                                  -std::numeric_limits<float>::infinity(), nullptr));
          } else {
            DCP_CUDA_CHECK(cudaMemsetAsync(dq_acc.need(static_cast<size_t>(local * qr)), 0, local * qr * sizeof(float), nullptr));
            DCP_CUDA_CHECK(cudaMemsetAsync(dk_acc.need(static_cast<size_t>(local * kr)), 0, local * kr * sizeof(float), nullptr));
            DCP_CUDA_CHECK(cudaMemsetAsync(dv_acc.need(static_cast<size_t>(local * kr)), 0, local * kr * sizeof(float), nullptr));
          }
        }
        uint16_t *qs = q.need(nq_side), *ks = k.need(nk_side), *vs = v.need(nk_side);
        uint16_t *os = o.need(nq_side), *dos = dout.need(nq_side);
        float* ls = f1.need(nl_side);
        const auto gather16 = [&](const uint16_t* src, Buffer<uint16_t>& dst, int64_t row_elems) {
          DCP_CUDA_CHECK(attn::cuda::thd_gather_rows(src, dst.need(static_cast<size_t>(half * row_elems)), rows, half,
                                                     sizeof(uint16_t), row_elems, nullptr));
          return dst.a.get();
        };
        if (ring && lower) {  // src's front-half K and V (from the received block)
          const uint16_t* recv = kv_copy.need(std::max(2 * nk_side, static_cast<size_t>(2 * op.transfer_rows * kr)));
          ks = gather16(recv, kg, kr);
          vs = gather16(recv + static_cast<size_t>(op.transfer_rows * kr), vg, kr);
        }
        if (ring && upper) {  // this rank's back-half Q (and O, dO, LSE for the backward)
          qs = gather16(q.need(static_cast<size_t>(local * qr)), qg, qr);
          if (backward) {
            os = gather16(o.need(static_cast<size_t>(local * qr)), og, qr);
            dos = gather16(dout.need(static_cast<size_t>(local * qr)), dog, qr);
            DCP_CUDA_CHECK(attn::cuda::thd_gather_rows(f1.need(static_cast<size_t>(local * s.heads)),
                                                       lg.need(static_cast<size_t>(half * s.heads)), rows, half,
                                                       sizeof(float), s.heads, nullptr));
            ls = lg.a.get();
          }
        }
        if (!backward) {
          attn::flash::FwdParams p = attn::flash_fwd_params(ap.bq, ap.bk, s, nq, nk, nk, nq, nl);
          uint16_t* out_step = ring ? og.need(nq_side) : o.need(nq);
          // The step's LSE: the layer's own (f1, what the backward reads) without a ring, else a
          // step result merged into lse_acc.
          float* lse_step = ring ? f2.need(nl_side) : f1.need(nl_side);
          attn::bind_fwd(p, ap.arrays->arrays(), qs, ks, vs, out_step, lse_step);
          DCP_CUDA_CHECK(attn::flash::flash_fwd(p, bf16, attn::flash_fwd_grid(ap.bq), nullptr));
          if (ring) {  // the output/LSE correction into the rank's fp32 result, rounded after the last step
            DCP_CUDA_CHECK(attn::cuda::convert_to_f32(out_step, step32.need(nq_side), q_rows * qr, bf16, nullptr));
            DCP_CUDA_CHECK(attn::cuda::thd_lse_merge(step32.a.get(), lse_step, out_acc.need(static_cast<size_t>(local * qr)),
                                                     lse_acc.need(static_cast<size_t>(local * s.heads)),
                                                     upper ? rows : nullptr, q_rows, s.heads, s.head_dim, nullptr));
            if (op.last_step)
              DCP_CUDA_CHECK(attn::cuda::convert_from_f32(out_acc.a.get(), o.need(static_cast<size_t>(local * qr)),
                                                          local * qr, bf16, nullptr));
          }
        } else {
          attn::flash::BwdParams p = attn::flash_bwd_params(ap.bq, ap.bk, s, nq, nk, nk, nq, nl, nq, nq, nk, nk);
          attn::bind_bwd(p, ap.arrays->arrays(), qs, ks, vs, os, ls, dos, f2.need(nl_side), f3.need(nq_side),
                         dq.need(nq_side), dk.need(nk_side), dv.need(nk_side));
          DCP_CUDA_CHECK(attn::flash::flash_bwd(p, bf16, attn::flash_bwd_n_blocks(ap.bk), nullptr));
          if (ring) {  // the gradient corrections: the step's dQ, dK, dV added into fp32, rounded after the last step
            const auto add = [&](const uint16_t* g, Buffer<float>& acc, int64_t n, int64_t row_elems, const int64_t* at) {
              DCP_CUDA_CHECK(attn::cuda::convert_to_f32(g, step32.need(static_cast<size_t>(n * row_elems)), n * row_elems,
                                                        bf16, nullptr));
              DCP_CUDA_CHECK(attn::cuda::thd_add_rows(step32.a.get(), acc.need(static_cast<size_t>(local * row_elems)), at,
                                                      n, row_elems, nullptr));
            };
            add(dq.a.get(), dq_acc, q_rows, qr, upper ? rows : nullptr);
            add(dk.a.get(), dk_acc, k_rows, kr, lower ? rows : nullptr);
            add(dv.a.get(), dv_acc, k_rows, kr, lower ? rows : nullptr);
            if (op.last_step) {
              DCP_CUDA_CHECK(attn::cuda::convert_from_f32(dq_acc.a.get(), dq.need(static_cast<size_t>(local * qr)),
                                                          local * qr, bf16, nullptr));
              DCP_CUDA_CHECK(attn::cuda::convert_from_f32(dk_acc.a.get(), dk.need(static_cast<size_t>(local * kr)),
                                                          local * kr, bf16, nullptr));
              DCP_CUDA_CHECK(attn::cuda::convert_from_f32(dv_acc.a.get(), dv.need(static_cast<size_t>(local * kr)),
                                                          local * kr, bf16, nullptr));
            }
          }
        }
        break;
      }
      case OpKind::rmsnorm: {
        const int d = static_cast<int>(op.width);
        const size_t n = static_cast<size_t>(op.rows * op.width);
        if (!backward)
          DCP_CUDA_CHECK(model::gpu::rmsnorm_fwd({x.need(n), y.need(static_cast<size_t>(d)), z.need(n),
                                                  f1.need(static_cast<size_t>(op.rows)), op.rows, d, 1e-5f},
                                                 bf16, nullptr));
        else
          DCP_CUDA_CHECK(model::gpu::rmsnorm_bwd({x.need(n), y.need(static_cast<size_t>(d)),
                                                  f1.need(static_cast<size_t>(op.rows)), dout.need(n), z.need(n),
                                                  f2.need(static_cast<size_t>(d)), op.rows, d},
                                                 bf16, nullptr));
        break;
      }
      case OpKind::rope: {
        const int hd = static_cast<int>(model.head_dim_or_default());
        const size_t n = static_cast<size_t>(op.rows * op.width);
        DCP_CUDA_CHECK(model::gpu::rope({x.need(n), pos.need(static_cast<size_t>(op.rows)), op.rows,
                                         static_cast<int>(op.width / hd), hd, 10000.0, backward},
                                        bf16, nullptr));
        break;
      }
      case OpKind::swiglu: {
        const int f = static_cast<int>(op.width);
        const size_t n = static_cast<size_t>(op.rows * op.width);
        if (!backward)
          DCP_CUDA_CHECK(model::gpu::swiglu_fwd({x.need(2 * n), nullptr, z.need(n), nullptr, op.rows, f}, bf16, nullptr));
        else
          DCP_CUDA_CHECK(
              model::gpu::swiglu_bwd({x.need(2 * n), dout.need(n), nullptr, z.need(2 * n), op.rows, f}, bf16, nullptr));
        break;
      }
      case OpKind::residual: {
        const size_t n = static_cast<size_t>(op.rows * op.width);
        DCP_CUDA_CHECK(model::gpu::add({x.need(n), y.need(n), z.need(n), static_cast<int64_t>(n)}, bf16, nullptr));
        break;
      }
      case OpKind::loss: {
        if (backward) break;  // the fused kernel wrote dlogits with the loss
        const size_t n = static_cast<size_t>(op.rows * op.width);
        DCP_CUDA_CHECK(model::gpu::cross_entropy({x.need(n), labels.a.get(), mask.a.get(), 1.f, z.need(n),
                                                  f1.need(static_cast<size_t>(op.rows)), op.rows,
                                                  static_cast<int>(op.width)},
                                                 bf16, nullptr));
        break;
      }
    }
  }
};

StageRunner::StageRunner(const cost::ModelConfig& model, attn::Half half) : impl_(std::make_unique<Impl>(model, half)) {}
StageRunner::~StageRunner() = default;

namespace {

// NVTX name of the range an op belongs to: its layer and pass ("layer 3 fwd", "layer 3 recompute",
// "layer 3 bwd"), or the output layer and loss of the last stage ("output fwd", "output bwd").
std::string layer_range_name(const StageOp& op) {
  const char* pass = op.pass == Pass::fwd ? "fwd" : op.pass == Pass::recompute ? "recompute" : "bwd";
  return (op.layer < 0 ? std::string("output ") : "layer " + std::to_string(op.layer) + " ") + pass;
}

}  // namespace

MeasuredMicrobatch StageRunner::measure(const StageWork& work, int reps, const std::string& label) {
  DCP_REQUIRE(reps >= 1, "StageRunner: reps ", reps, " must be >= 1");
  // NVTX: one range per micro-batch (the caller's label) around all its runs, one per run, and one
  // per layer and pass inside each run (nsys shows where a micro-batch's time goes).
  const ScopedRange mb_range(label.empty() ? "micro-batch" : label.c_str());
  Impl& m = *impl_;
  const std::vector<AttnPlan> plans = m.prepare(work);
  // Every event is destroyed on every path (a CUDA error throws).
  struct Events {
    std::vector<cudaEvent_t> all;
    cudaEvent_t make() {
      cudaEvent_t e = nullptr;
      DCP_CUDA_CHECK(cudaEventCreate(&e));
      all.push_back(e);
      return e;
    }
    ~Events() {
      for (cudaEvent_t e : all) cudaEventDestroy(e);
    }
  } events;
  const cudaEvent_t start = events.make(), mid = events.make(), end = events.make();
  std::vector<cudaEvent_t> copy_ev;
  for (const auto& op : work.ops)
    if (op.kind == OpKind::attention && op.transfer_rows > 0)
      for (int e = 0; e < 2; ++e) copy_ev.push_back(events.make());
  std::vector<MeasuredMicrobatch> runs;
  for (int r = 0; r <= reps; ++r) {  // run 0 is the untimed warm-up
    const ScopedRange run_range(r == 0 ? "warm-up" : "timed run");
    std::optional<ScopedRange> layer_range;
    std::string layer_name;
    DCP_CUDA_CHECK(cudaDeviceSynchronize());
    DCP_CUDA_CHECK(cudaEventRecord(start, nullptr));
    bool fwd_done = false;
    size_t ce = 0;
    std::vector<bool> copy_fwd;
    for (size_t i = 0; i < work.ops.size(); ++i) {
      const StageOp& op = work.ops[i];
      if (!fwd_done && op.pass != Pass::fwd) {
        DCP_CUDA_CHECK(cudaEventRecord(mid, nullptr));
        fwd_done = true;
      }
      if (std::string name = layer_range_name(op); name != layer_name) {
        layer_range.reset();
        layer_name = std::move(name);
        layer_range.emplace(layer_name.c_str());
      }
      const bool copies = op.kind == OpKind::attention && op.transfer_rows > 0;
      m.run(op, plans[i], copies ? copy_ev[ce] : nullptr, copies ? copy_ev[ce + 1] : nullptr);
      if (copies) {
        copy_fwd.push_back(!fwd_done);
        ce += 2;
      }
    }
    layer_range.reset();
    if (!fwd_done) DCP_CUDA_CHECK(cudaEventRecord(mid, nullptr));
    DCP_CUDA_CHECK(cudaEventRecord(end, nullptr));
    DCP_CUDA_CHECK(cudaEventSynchronize(end));
    if (r == 0) continue;
    MeasuredMicrobatch x;
    float ms = 0;
    DCP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, mid));
    x.fwd_s = ms / 1e3;
    DCP_CUDA_CHECK(cudaEventElapsedTime(&ms, mid, end));
    x.bwd_s = ms / 1e3;
    for (size_t c = 0; c < copy_fwd.size(); ++c) {
      DCP_CUDA_CHECK(cudaEventElapsedTime(&ms, copy_ev[2 * c], copy_ev[2 * c + 1]));
      (copy_fwd[c] ? x.copy_fwd_s : x.copy_bwd_s) += ms / 1e3;
    }
    runs.push_back(x);
  }
  // The median run by total time.
  std::sort(runs.begin(), runs.end(),
            [](const MeasuredMicrobatch& a, const MeasuredMicrobatch& b) { return a.fwd_s + a.bwd_s < b.fwd_s + b.bwd_s; });
  return runs[runs.size() / 2];
}

}  // namespace dcp::exec
