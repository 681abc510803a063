// See layer_cuda.h.
#include "model/cuda/layer_cuda.h"

#include "attn/cuda/device_array.h"
#include "core/cuda_check.h"
#include "model/cuda/layer_launch.h"

#include <vector>

namespace dcp::model {

using attn::cuda::DeviceArray;

namespace {
template <class T>
DeviceArray<T> up(std::span<const T> x) {
  return DeviceArray<T>(x);
}
template <class T>
DeviceArray<T> poisoned(size_t n) {
  DeviceArray<T> d(n);
  d.poison();
  return d;
}
void finish(cudaError_t launch) {
  DCP_CUDA_CHECK(launch);
  DCP_CUDA_CHECK(cudaDeviceSynchronize());
}
}  // namespace

void rmsnorm_fwd_cuda(attn::Half h, std::span<const uint16_t> x, std::span<const uint16_t> g, std::span<uint16_t> y,
                      std::span<float> rstd, int64_t n, int d, double eps) {
  DCP_CHECK(x.size() == static_cast<size_t>(n * d) && y.size() == x.size() && g.size() == static_cast<size_t>(d) &&
                rstd.size() == static_cast<size_t>(n),
            "rmsnorm_fwd_cuda: sizes");
  auto dx = up(x), dg = up(g);
  auto dy = poisoned<uint16_t>(y.size());
  auto dr = poisoned<float>(rstd.size());
  finish(gpu::rmsnorm_fwd({dx.get(), dg.get(), dy.get(), dr.get(), n, d, static_cast<float>(eps)}, h == attn::Half::bf16,
                          nullptr));
  dy.to_host(y);
  dr.to_host(rstd);
}

void rmsnorm_bwd_cuda(attn::Half h, std::span<const uint16_t> x, std::span<const uint16_t> g,
                      std::span<const float> rstd, std::span<const uint16_t> dy, std::span<uint16_t> dx,
                      std::span<float> dg, int64_t n, int d) {
  DCP_CHECK(x.size() == static_cast<size_t>(n * d) && dy.size() == x.size() && dx.size() == x.size() &&
                g.size() == static_cast<size_t>(d) && dg.size() == g.size() && rstd.size() == static_cast<size_t>(n),
            "rmsnorm_bwd_cuda: sizes");
  auto d_x = up(x), d_g = up(g), d_dy = up(dy);
  auto d_r = up(rstd);
  auto d_dg = up(std::span<const float>(dg));  // accumulates
  auto d_dx = poisoned<uint16_t>(dx.size());
  finish(gpu::rmsnorm_bwd({d_x.get(), d_g.get(), d_r.get(), d_dy.get(), d_dx.get(), d_dg.get(), n, d},
                          h == attn::Half::bf16, nullptr));
  d_dx.to_host(dx);
  d_dg.to_host(dg);
}

void swiglu_fwd_cuda(attn::Half h, std::span<const uint16_t> gate_up, std::span<uint16_t> out, int64_t n, int f) {
  DCP_CHECK(gate_up.size() == static_cast<size_t>(n * 2 * f) && out.size() == static_cast<size_t>(n * f),
            "swiglu_fwd_cuda: sizes");
  auto gu = up(gate_up);
  auto o = poisoned<uint16_t>(out.size());
  finish(gpu::swiglu_fwd({gu.get(), nullptr, o.get(), nullptr, n, f}, h == attn::Half::bf16, nullptr));
  o.to_host(out);
}

void swiglu_bwd_cuda(attn::Half h, std::span<const uint16_t> gate_up, std::span<const uint16_t> dout,
                     std::span<uint16_t> dgate_up, int64_t n, int f) {
  DCP_CHECK(gate_up.size() == static_cast<size_t>(n * 2 * f) && dgate_up.size() == gate_up.size() &&
                dout.size() == static_cast<size_t>(n * f),
            "swiglu_bwd_cuda: sizes");
  auto gu = up(gate_up), go = up(dout);
  auto dgu = poisoned<uint16_t>(dgate_up.size());
  finish(gpu::swiglu_bwd({gu.get(), go.get(), nullptr, dgu.get(), n, f}, h == attn::Half::bf16, nullptr));
  dgu.to_host(dgate_up);
}

void rope_cuda(attn::Half h, std::span<uint16_t> x, std::span<const int32_t> pos, int64_t n, int heads, int head_dim,
               double theta, bool inverse) {
  DCP_CHECK(x.size() == static_cast<size_t>(n * heads * head_dim) && pos.size() == static_cast<size_t>(n),
            "rope_cuda: sizes");
  auto dx = up(std::span<const uint16_t>(x));
  auto dp = up(pos);
  finish(gpu::rope({dx.get(), dp.get(), n, heads, head_dim, theta, inverse}, h == attn::Half::bf16, nullptr));
  dx.to_host(x);
}

void add_cuda(attn::Half h, std::span<const uint16_t> a, std::span<const uint16_t> b, std::span<uint16_t> y) {
  DCP_CHECK(a.size() == b.size() && y.size() == a.size(), "add_cuda: sizes");
  auto da = up(a), db = up(b);
  auto dy = poisoned<uint16_t>(y.size());
  finish(gpu::add({da.get(), db.get(), dy.get(), static_cast<int64_t>(a.size())}, h == attn::Half::bf16, nullptr));
  dy.to_host(y);
}

double cross_entropy_cuda(attn::Half h, std::span<const uint16_t> logits, std::span<const int32_t> labels,
                          std::span<const uint8_t> mask, double scale, std::span<uint16_t> dlogits, int64_t n, int vocab) {
  DCP_CHECK(logits.size() == static_cast<size_t>(n * vocab) && dlogits.size() == logits.size() &&
                labels.size() == static_cast<size_t>(n) && mask.size() == static_cast<size_t>(n),
            "cross_entropy_cuda: sizes");
  for (int64_t i = 0; i < n; ++i)
    DCP_CHECK(!mask[i] || (labels[i] >= 0 && labels[i] < vocab), "cross_entropy_cuda: label ", labels[i],
              " outside the vocabulary of ", vocab, " at row ", i);
  auto dl = up(logits);
  auto dlab = up(labels);
  auto dm = up(mask);
  auto dd = poisoned<uint16_t>(dlogits.size());
  auto rows = poisoned<float>(static_cast<size_t>(n));
  finish(gpu::cross_entropy({dl.get(), dlab.get(), dm.get(), static_cast<float>(scale), dd.get(), rows.get(), n, vocab},
                            h == attn::Half::bf16, nullptr));
  dd.to_host(dlogits);
  std::vector<float> r(static_cast<size_t>(n));
  rows.to_host(r);
  double loss = 0;
  for (float x : r) loss += x;
  return loss;
}

}  // namespace dcp::model
