// See calibration_runner.h.
#include "exec/cuda/calibration_runner.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "attn/cuda/device_array.h"
#include "attn/cuda/event_timer.h"
#include "attn/cuda/flash_launch.h"
#include "attn/cuda/flash_ring_cuda.h"
#include "attn/cuda/thd_kernels.h"
#include "attn/flash_emu.h"
#include "attn/thd.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "exec/cuda/gemm_lt.h"

namespace dcp::exec {

using attn::cuda::DeviceArray;

namespace {

// Median seconds of `reps` timed calls of f after one untimed call. Each timed call is queued
// behind a 100 us busy wait, so the start event fires when the GPU reaches f's work with its
// launches already queued: on an idle GPU the start event fired at once and the host's launch
// latency (~5-10 us) was timed too, 5-10% of a 0.1 ms attention probe (helper-57's review;
// bench_attn_cuda's L2 flush hides it the same way). The wait is not in the timed region.
double median_s(const std::function<void()>& f, int reps) {
  f();
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
  attn::cuda::EventTimer timer;
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    DCP_CUDA_CHECK(attn::cuda::busy_wait(100 * 1000, nullptr));
    timer.start();
    f();
    t.push_back(timer.stop_s());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Random bf16 in [-1, 1) drawn on the device, a new seed per buffer (stage_runner.cpp's Buffer says
// why not one repeated pattern: the GPU clocks higher on predictable data; an fp16 probe reads
// the bits as fp16 values of magnitude < 1.875).
DeviceArray<uint16_t> filled16(size_t n) {
  static uint64_t seed = 1000;
  DeviceArray<uint16_t> d(n);
  DCP_CUDA_CHECK(attn::cuda::fill_uniform(d.get(), static_cast<int64_t>(n), ++seed, 1.0f, true, nullptr));
  return d;
}

}  // namespace

cost::CalibrationMeasurements measure_calibration(const cost::CalibrationPlan& plan, attn::Half half, int reps) {
  DCP_REQUIRE(reps >= 1, "measure_calibration: reps ", reps, " must be >= 1");
  const bool bf16 = half == attn::Half::bf16;
  cost::CalibrationMeasurements m;
  // GEMMs.
  {
    GemmLt gemm;
    int64_t most_a = 0, most_b = 0, most_c = 0;
    const int64_t top = static_cast<int64_t>(*std::max_element(plan.gemm_tokens.begin(), plan.gemm_tokens.end()));
    for (const auto& s : plan.gemm_shapes) {
      most_a = std::max(most_a, top * s.k);
      most_b = std::max(most_b, s.k * s.n);
      most_c = std::max(most_c, top * s.n);
    }
    DeviceArray<uint16_t> a = filled16(static_cast<size_t>(most_a)), b = filled16(static_cast<size_t>(most_b)),
                          c(static_cast<size_t>(most_c));
    for (double x : plan.gemm_tokens) {
      const auto tokens = static_cast<int64_t>(x);
      m.gemm_s.push_back(median_s(
          [&] {
            for (const auto& s : plan.gemm_shapes)  // a linear layer's forward: X [T, k] W^T, W [n, k]
              gemm.run(bf16, GemmForm::nt, tokens, s.n, s.k, a.get(), b.get(), c.get(), false, nullptr);
          },
          reps));
    }
  }
  // Attention.
  const auto& L = plan.attention.lengths;
  attn::AttnShape shape;
  shape.heads = plan.heads;
  shape.kv_heads = plan.kv_heads;
  shape.head_dim = plan.attention.head_dim;
  for (double q : L)
    for (double k : L) {
      const int64_t batch = plan.batch_of(q, k);
      const attn::ThdBatch bq = attn::make_thd_batch(std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(q)), 1);
      const attn::ThdBatch bk = attn::make_thd_batch(std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(k)), 1);
      const attn::DeviceBatchPair arrays(bq, bk);
      const size_t nq = static_cast<size_t>(bq.total_tokens() * shape.q_row());
      const size_t nk = static_cast<size_t>(bk.total_tokens() * shape.kv_row());
      const size_t nl = static_cast<size_t>(bq.total_tokens() * shape.heads);
      DeviceArray<uint16_t> dq_ = filled16(nq), dk_ = filled16(nk), dv_ = filled16(nk), o(nq), g = filled16(nq), gq(nq),
                            gk(nk), gv(nk);
      DeviceArray<float> lse(nl), delta(nl), acc(nq);
      for (const bool causal : {true, false}) {
        shape.causal = causal;
        attn::flash::FwdParams p = attn::flash_fwd_params(bq, bk, shape, nq, nk, nk, nq, nl);
        attn::bind_fwd(p, arrays.arrays(), dq_.get(), dk_.get(), dv_.get(), o.get(), lse.get());
        const attn::flash::FwdGrid grid = attn::flash_fwd_grid(bq);
        (causal ? m.fwd_causal_s : m.fwd_full_s)
            .push_back(median_s([&] { DCP_CUDA_CHECK(attn::flash::flash_fwd(p, bf16, grid, nullptr)); }, reps));
      }
      shape.causal = false;  // the backward probe has no mask (cost/calibrate.h); out, lse from the forward above
      attn::flash::BwdParams p = attn::flash_bwd_params(bq, bk, shape, nq, nk, nk, nq, nl, nq, nq, nk, nk);
      attn::bind_bwd(p, arrays.arrays(), dq_.get(), dk_.get(), dv_.get(), o.get(), lse.get(), g.get(), delta.get(),
                     acc.get(), gq.get(), gk.get(), gv.get());
      const int nb = attn::flash_bwd_n_blocks(bk);
      m.bwd_s.push_back(median_s([&] { DCP_CUDA_CHECK(attn::flash::flash_bwd(p, bf16, nb, nullptr)); }, reps));
    }
  // HBM.
  {
    DeviceArray<uint8_t> src(static_cast<size_t>(plan.copy_bytes)), dst(static_cast<size_t>(plan.copy_bytes));
    DCP_CUDA_CHECK(cudaMemset(src.get(), 1, src.size()));
    m.copy_s = median_s(
        [&] {
          DCP_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), src.size(), cudaMemcpyDeviceToDevice, nullptr));
        },
        reps);
  }
  return m;
}

}  // namespace dcp::exec
