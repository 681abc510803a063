// See gpu_layers.h.
#include "model/gpu_layers.h"

#include <vector>

#include "attn/cta_emu.h"
#include "core/error.h"
#include "model/gpu/layer_blocks.h"

namespace dcp::model {

namespace {

using attn::Half;
using attn::flash::Bf16;
using attn::flash::Fp16;

void check(bool ok, const char* what) { DCP_CHECK(ok, "GPU layer kernel (host): ", what); }

template <class F>
void by_type(Half h, F&& f) {
  if (h == Half::bf16) f(Bf16{});
  else f(Fp16{});
}

}  // namespace

void rmsnorm_fwd_emulated(Half h, std::span<const uint16_t> x, std::span<const uint16_t> g, std::span<uint16_t> y,
                          std::span<float> rstd, int64_t n, int d, double eps) {
  check(n >= 0 && d >= 1 && x.size() == static_cast<size_t>(n * d) && y.size() == x.size() &&
            g.size() == static_cast<size_t>(d) && rstd.size() == static_cast<size_t>(n),
        "rmsnorm_fwd sizes");
  const gpu::RmsNormFwdArgs a{x.data(), g.data(), y.data(), rstd.data(), n, d, static_cast<float>(eps)};
  by_type(h, [&](auto e) {
    using E = decltype(e);
    attn::emu::run_grid(static_cast<int>(gpu::row_blocks(n)), 1, 1, 8, [&](attn::emu::HostCtx& c, int b, int, int, uint16_t*) {
      gpu::rmsnorm_fwd_block<attn::emu::HostCtx, E>(c, a, b);
    });
  });
}

void rmsnorm_bwd_emulated(Half h, std::span<const uint16_t> x, std::span<const uint16_t> g, std::span<const float> rstd,
                          std::span<const uint16_t> dy, std::span<uint16_t> dx, std::span<float> dg, int64_t n, int d) {
  check(n >= 0 && d >= 1 && x.size() == static_cast<size_t>(n * d) && dy.size() == x.size() && dx.size() == x.size() &&
            g.size() == static_cast<size_t>(d) && dg.size() == g.size() && rstd.size() == static_cast<size_t>(n),
        "rmsnorm_bwd sizes");
  const gpu::RmsNormBwdArgs a{x.data(), g.data(), rstd.data(), dy.data(), dx.data(), dg.data(), n, d};
  by_type(h, [&](auto e) {
    using E = decltype(e);
    attn::emu::run_grid(static_cast<int>(gpu::row_blocks(n)), 1, 1, 8, [&](attn::emu::HostCtx& c, int b, int, int, uint16_t*) {
      gpu::rmsnorm_bwd_block<attn::emu::HostCtx, E>(c, a, b);
    });
  });
}

void swiglu_fwd_emulated(Half h, std::span<const uint16_t> gate_up, std::span<uint16_t> out, int64_t n, int f) {
  check(n >= 0 && f >= 1 && gate_up.size() == static_cast<size_t>(n * 2 * f) && out.size() == static_cast<size_t>(n * f),
        "swiglu_fwd sizes");
  const gpu::SwigluArgs a{gate_up.data(), nullptr, out.data(), nullptr, n, f};
  by_type(h, [&](auto e) {
    for (int64_t i = 0; i < n * f; ++i) gpu::swiglu_fwd_elem<decltype(e)>(a, i);
  });
}

void swiglu_bwd_emulated(Half h, std::span<const uint16_t> gate_up, std::span<const uint16_t> dout,
                         std::span<uint16_t> dgate_up, int64_t n, int f) {
  check(n >= 0 && f >= 1 && gate_up.size() == static_cast<size_t>(n * 2 * f) && dgate_up.size() == gate_up.size() &&
            dout.size() == static_cast<size_t>(n * f),
        "swiglu_bwd sizes");
  const gpu::SwigluArgs a{gate_up.data(), dout.data(), nullptr, dgate_up.data(), n, f};
  by_type(h, [&](auto e) {
    for (int64_t i = 0; i < n * f; ++i) gpu::swiglu_bwd_elem<decltype(e)>(a, i);
  });
}

void rope_emulated(Half h, std::span<uint16_t> x, std::span<const int32_t> pos, int64_t n, int heads, int head_dim,
                   double theta, bool inverse) {
  check(n >= 0 && heads >= 1 && head_dim >= 2 && head_dim % 2 == 0 && x.size() == static_cast<size_t>(n * heads * head_dim) &&
            pos.size() == static_cast<size_t>(n),
        "rope sizes");
  const gpu::RopeArgs a{x.data(), pos.data(), n, heads, head_dim, theta, inverse};
  by_type(h, [&](auto e) {
    for (int64_t i = 0; i < n * heads * (head_dim / 2); ++i) gpu::rope_elem<decltype(e)>(a, i);
  });
}

void add_emulated(Half h, std::span<const uint16_t> a, std::span<const uint16_t> b, std::span<uint16_t> y) {
  check(a.size() == b.size() && y.size() == a.size(), "add sizes");
  const gpu::AddArgs args{a.data(), b.data(), y.data(), static_cast<int64_t>(a.size())};
  by_type(h, [&](auto e) {
    for (int64_t i = 0; i < args.n; ++i) gpu::add_elem<decltype(e)>(args, i);
  });
}

double cross_entropy_emulated(Half h, std::span<const uint16_t> logits, std::span<const int32_t> labels,
                              std::span<const uint8_t> mask, double scale, std::span<uint16_t> dlogits, int64_t n,
                              int vocab) {
  check(n >= 0 && vocab >= 1 && logits.size() == static_cast<size_t>(n * vocab) && dlogits.size() == logits.size() &&
            labels.size() == static_cast<size_t>(n) && mask.size() == static_cast<size_t>(n),
        "cross_entropy sizes");
  for (int64_t i = 0; i < n; ++i)
    DCP_CHECK(!mask[i] || (labels[i] >= 0 && labels[i] < vocab), "cross_entropy: label ", labels[i],
              " outside the vocabulary of ", vocab, " at row ", i);
  std::vector<float> rows(static_cast<size_t>(n), 0.f);
  const gpu::CrossEntropyArgs a{logits.data(), labels.data(), mask.data(), static_cast<float>(scale), dlogits.data(),
                                rows.data(), n, vocab};
  by_type(h, [&](auto e) {
    using E = decltype(e);
    attn::emu::run_grid(static_cast<int>(gpu::row_blocks(n)), 1, 1, 8, [&](attn::emu::HostCtx& c, int b, int, int, uint16_t*) {
      gpu::cross_entropy_block<attn::emu::HostCtx, E>(c, a, b);
    });
  });
  double loss = 0;
  for (float r : rows) loss += r;
  return loss;
}

}  // namespace dcp::model
