// The Mamba-style mixer (mamba.h): its backward against finite differences in float64, CP by
// all-to-all equal to CP = 1 for group sizes 1, 2, 4, 8 on awkward lengths (float64 and float32),
// group switching of one instance across micro-batches of sizes 8, 2, 1, 4, and the rejection of
// a CP size that does not divide the heads.
// Tolerances: attn/tolerances.h. CP moves rows between ranks and splits the heads; the scan of a
// head is the same sequence of operations on every CP size, so only dB/dC (summed over heads on
// their ranks, then over ranks) and the parameter gradients (summed over ranks) are reordered:
// ulp-level, far below 1e-10 in float64 and 1e-5 in float32, while a wrong row, head slice or
// missing sum is O(1) relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "attn/tolerances.h"
#include "comm/group_registry.h"
#include "comm/thread_comm.h"
#include "model/mamba.h"
#include "model/tests/fd_check.h"

namespace dcp::model {
namespace {

using testing::dot;
using testing::fd_check;
using testing::kFdTol;
using testing::random_vec;

ModelConfig mamba_config(int heads, int head_dim, int state, int hidden) {
  ModelConfig c;
  c.hidden = hidden;
  c.mamba_heads = heads;
  c.mamba_head_dim = head_dim;
  c.mamba_state = state;
  c.init_std = 0.5;  // large weights so every term of the backward matters
  c.seed = 5;
  return c;
}

// After finalize(): dt_bias in [-1, 1] (softplus ~ 0.3..1.3, decays well inside (0, 1), so the
// A_log and dt terms are O(1) in the checks) and D in [0.5, 1.5] (not all ones). A pure function
// of the names, so every rank and both dtypes get the same values.
template <typename T>
void spread_params(ParamStore<T>& p) {
  for (size_t i = 0; i < p.infos().size(); ++i) {
    const auto& info = p.infos()[i];
    auto v = p.value(static_cast<ParamId>(i));
    const bool dtb = info.name.ends_with(".dt_bias"), dd = info.name.ends_with(".D");
    if (!dtb && !dd) continue;
    const auto r = random_vec(info.size, 100 + i);
    for (int64_t e = 0; e < info.size; ++e) v[e] = static_cast<T>(dtb ? r[e] : 1.0 + 0.5 * r[e]);
  }
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// max |a - b| / max |ref| (compare.h's measure).
template <typename T>
double rel_err(std::span<const T> a, std::span<const T> ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - static_cast<double>(ref[i])));
    den = std::max(den, std::abs(static_cast<double>(ref[i])));
  }
  return den > 0 ? num / den : num;
}

// ---------------------------------------------------------------------------------------------
// (1) finite differences, CP = 1.

TEST(MambaMixerFd, BackwardMatchesFiniteDifferences) {
  comm::run_threads(1, [](comm::Communicator& g) {
    auto k = make_cpu_kernels<double>();
    const ModelConfig c = mamba_config(/*heads=*/3, /*head_dim=*/2, /*state=*/4, /*hidden=*/5);
    ParamStore<double> p(c.seed);
    MambaMixer<double> m("mamba", c, p, *k);
    p.finalize();
    spread_params(p);
    // A 1-token sequence, odd lengths, padding after each and a longer padded tail (pad_to).
    for (const auto& [lengths, pad_to] :
         std::vector<std::pair<std::vector<int32_t>, int64_t>>{{{1, 5, 3}, 0}, {{7, 1}, 10}}) {
      SCOPED_TRACE(::testing::Message() << "pad_to " << pad_to);
      auto psp = make_packed_seq_params(lengths, 1, &g, pad_to);
      const auto mb = MicroBatchView::of(psp);
      const int64_t n = mb.rows * c.hidden;
      auto x = random_vec(n, 61);
      const auto dy = random_vec(n, 62);
      std::vector<double> y(n), dx(n);
      auto f = [&] {
        m.forward(mb, x, y);
        return dot(dy, y);
      };
      f();
      p.zero_grads();
      m.backward(mb, dy, dx);
      const std::vector<double> grads(p.grads().begin(), p.grads().end());
      const auto rx = fd_check(f, x, dx);
      EXPECT_LT(rx.rel_err, kFdTol) << "dx: " << rx.str();
      std::printf("[mamba fd] pad_to=%lld dx rel_err=%.2e\n", static_cast<long long>(pad_to),
                  rx.rel_err);
      for (size_t i = 0; i < p.infos().size(); ++i) {
        const auto& info = p.infos()[i];
        std::span<const double> gi(grads.data() + info.offset, info.size);
        const auto rp = fd_check(f, p.value(static_cast<ParamId>(i)), gi);
        EXPECT_LT(rp.rel_err, kFdTol) << info.name << ": " << rp.str();
        EXPECT_GT(rp.max_analytic, 0) << info.name << " has an all-zero gradient";
        std::printf("[mamba fd] pad_to=%lld %s rel_err=%.2e\n", static_cast<long long>(pad_to),
                    info.name.c_str(), rp.rel_err);
      }
      // Padding rows are outside the scan: output 0 and dx exactly 0 although their dy is not.
      const auto real = attn::real_token_mask(mb.thd);
      for (int64_t t = 0; t < mb.rows; ++t)
        if (!real[t])
          for (int e = 0; e < c.hidden; ++e) {
            EXPECT_EQ(y[t * c.hidden + e], 0.0) << "padding row " << t;
            EXPECT_EQ(dx[t * c.hidden + e], 0.0) << "padding row " << t;
          }
    }
  });
}

TEST(MambaMixerFd, StateRestartsAtEverySequenceAndIgnoresPadding) {
  // Outputs of a sequence depend only on its own real rows: changing another sequence or any
  // padding row leaves them bitwise unchanged, and a sequence's output does not depend on where
  // in the batch it sits.
  comm::run_threads(1, [](comm::Communicator& g) {
    auto k = make_cpu_kernels<double>();
    const ModelConfig c = mamba_config(2, 3, 4, 4);
    ParamStore<double> p(c.seed);
    MambaMixer<double> m("mamba", c, p, *k);
    p.finalize();
    spread_params(p);
    auto psp = make_packed_seq_params({3, 5}, 1, &g);  // rows 0-2 real, 3 pad, 4-8 real, 9 pad
    const auto mb = MicroBatchView::of(psp);
    const int h = c.hidden;
    auto x = random_vec(mb.rows * h, 71);
    std::vector<double> y0(x.size()), y1(x.size());
    m.forward(mb, x, y0);
    for (int e = 0; e < h; ++e) {
      x[3 * h + e] += 1.0;  // padding of sequence 0
      x[9 * h + e] -= 2.0;  // padding of sequence 1
      x[0 * h + e] += 0.5;  // first token of sequence 0
    }
    m.forward(mb, x, y1);
    for (int64_t i = 4 * h; i < 9 * h; ++i) EXPECT_EQ(y0[i], y1[i]) << "sequence 1 row " << i / h;
    double moved = 0;
    for (int64_t i = 0; i < 3 * h; ++i) moved = std::max(moved, std::abs(y0[i] - y1[i]));
    EXPECT_GT(moved, 1e-3) << "sequence 0 did not see its own first token";
    // Sequence 1 alone gives the same rows.
    auto psp1 = make_packed_seq_params({5}, 1, &g);
    const auto mb1 = MicroBatchView::of(psp1);
    std::vector<double> x1(x.begin() + 4 * h, x.begin() + 10 * h), ya(x1.size());
    m.forward(mb1, x1, ya);
    for (int64_t i = 0; i < 5 * h; ++i) EXPECT_EQ(ya[i], y1[4 * h + i]);
  });
}

// ---------------------------------------------------------------------------------------------
// (2) CP equality.

template <typename T>
struct Result {
  std::vector<T> y, dx, grads;
};

// Runs one forward/backward of a fresh mixer over `psp` (any CP size) on this rank, on inputs
// given for the whole batch in sequence order; gradients are summed over the group.
template <typename T>
Result<T> run_rank(const ModelConfig& c, const PackedSeqParams& psp, const std::vector<T>& xg,
                   const std::vector<T>& dyg, MambaMixer<T>* mixer = nullptr,
                   ParamStore<T>* store = nullptr) {
  auto k = make_cpu_kernels<T>();
  std::unique_ptr<ParamStore<T>> own_p;
  std::unique_ptr<MambaMixer<T>> own_m;
  if (!mixer) {
    own_p = std::make_unique<ParamStore<T>>(c.seed);
    own_m = std::make_unique<MambaMixer<T>>("mamba", c, *own_p, *k);
    own_p->finalize();
    spread_params(*own_p);
    mixer = own_m.get();
    store = own_p.get();
  }
  const auto mb = MicroBatchView::of(psp);
  const auto x = attn::shard_rows<T>(xg, c.hidden, mb.thd, psp.cp_size, mb.cp_rank);
  const auto dy = attn::shard_rows<T>(dyg, c.hidden, mb.thd, psp.cp_size, mb.cp_rank);
  Result<T> r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  store->zero_grads();
  mixer->forward(mb, x, r.y);
  mixer->backward(mb, dy, r.dx);
  r.grads.assign(store->grads().begin(), store->grads().end());
  psp.cp_group->all_reduce<T>(r.grads);
  return r;
}

// The CP = 1 result of the batch laid out as `psp` (same padded boundaries), whole batch.
template <typename T>
Result<T> reference(const ModelConfig& c, const PackedSeqParams& psp, const std::vector<T>& xg,
                    const std::vector<T>& dyg) {
  Result<T> ref;
  comm::run_threads(1, [&](comm::Communicator& one) {
    PackedSeqParams p1 = psp;
    p1.cp_size = 1;
    p1.cp_group = &one;
    ref = run_rank<T>(c, p1, xg, dyg);
  });
  return ref;
}

// Checks every rank of a group of psp.cp_size against `ref`; returns the group's worst error.
template <typename T>
double check_against(const ModelConfig& c, const PackedSeqParams& psp, const Result<T>& ref,
                     const Result<T>& got, const std::string& what) {
  const auto mb = MicroBatchView::of(psp);
  const double tol = attn::tolerance_for<T>().rel_to_max;
  const auto ys = attn::shard_rows<T>(ref.y, c.hidden, mb.thd, psp.cp_size, mb.cp_rank);
  const auto dxs = attn::shard_rows<T>(ref.dx, c.hidden, mb.thd, psp.cp_size, mb.cp_rank);
  const double ey = rel_err<T>(got.y, ys), edx = rel_err<T>(got.dx, dxs);
  EXPECT_LE(ey, tol) << what << " rank " << mb.cp_rank << ": output";
  EXPECT_LE(edx, tol) << what << " rank " << mb.cp_rank << ": dx";
  EXPECT_EQ(got.grads.size(), ref.grads.size());
  double eg = 0;
  // Per parameter, relative to that parameter's largest gradient.
  ParamStore<T> layout(c.seed);
  auto k = make_cpu_kernels<T>();
  MambaMixer<T> shape("mamba", c, layout, *k);
  for (const auto& info : layout.infos()) {
    const std::span<const T> a(got.grads.data() + info.offset, info.size);
    const std::span<const T> b(ref.grads.data() + info.offset, info.size);
    const double e = rel_err<T>(a, b);
    EXPECT_LE(e, tol) << what << " rank " << mb.cp_rank << ": gradient of " << info.name;
    eg = std::max(eg, e);
  }
  std::vector<double> worst{ey, edx, eg};
  psp.cp_group->all_reduce<double>(worst, comm::ReduceOp::max);
  return std::max({worst[0], worst[1], worst[2]});
}

template <typename T>
void cp_matches_cp1() {
  const ModelConfig c = mamba_config(/*heads=*/8, /*head_dim=*/2, /*state=*/3, /*hidden=*/4);
  for (int cp : {2, 4, 8}) {  // (cp 1 would be the reference run again: nothing to compare)
    const std::vector<std::vector<int32_t>> cases{
        {1, 2 * cp - 1, 2 * cp, 2 * cp + 1},  // around the 2*cp chunk multiple
        {13 * cp + 5},                        // one long sequence, padded tail
        {3, 1, 2, 5, 1, 1, 4, 2, 7, 1, 3, 2},  // many short ones
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const std::string what = "cp " + std::to_string(cp) + " case " + std::to_string(ci);
      SCOPED_TRACE(what);
      // The layout of the batch at this cp; the reference runs it at CP = 1.
      const auto proto = make_packed_seq_params(cases[ci], cp, nullptr);
      const int64_t total = proto.cu_seqlens_padded.back();
      const auto xg = cast<T>(random_vec(total * c.hidden, 1000 + cp * 10 + ci));
      const auto dyg = cast<T>(random_vec(total * c.hidden, 2000 + cp * 10 + ci));
      const auto ref = reference<T>(c, proto, xg, dyg);
      double worst = 0;
      comm::run_threads(cp, [&](comm::Communicator& g) {
        PackedSeqParams psp = proto;
        psp.cp_group = &g;
        const auto got = run_rank<T>(c, psp, xg, dyg);
        const double w = check_against<T>(c, psp, ref, got, what);
        if (g.rank() == 0) worst = w;
      });
      std::printf("[mamba cp] %s cp=%d case=%zu worst rel err %.2e\n",
                  sizeof(T) == 8 ? "f64" : "f32", cp, ci, worst);
    }
  }
}

TEST(MambaMixerCp, Float64EveryCpSizeMatchesCp1) { cp_matches_cp1<double>(); }
TEST(MambaMixerCp, Float32EveryCpSizeMatchesCp1) { cp_matches_cp1<float>(); }

TEST(MambaMixerCp, HeadSlicesOfPerHeadGradientsStayOnTheirRank) {
  // Rank r's dt_bias / A_log / D gradients are nonzero only in its heads' slice (before the sum).
  const ModelConfig c = mamba_config(8, 2, 3, 4);
  const int cp = 4;
  const auto proto = make_packed_seq_params({9, 3}, cp, nullptr);
  const int64_t total = proto.cu_seqlens_padded.back();
  const auto xg = random_vec(total * c.hidden, 81), dyg = random_vec(total * c.hidden, 82);
  comm::run_threads(cp, [&](comm::Communicator& g) {
    PackedSeqParams psp = proto;
    psp.cp_group = &g;
    auto k = make_cpu_kernels<double>();
    ParamStore<double> p(c.seed);
    MambaMixer<double> m("mamba", c, p, *k);
    p.finalize();
    const auto mb = MicroBatchView::of(psp);
    const auto x = attn::shard_rows<double>(xg, c.hidden, mb.thd, cp, mb.cp_rank);
    const auto dy = attn::shard_rows<double>(dyg, c.hidden, mb.thd, cp, mb.cp_rank);
    std::vector<double> y(x.size()), dx(x.size());
    m.forward(mb, x, y);
    m.backward(mb, dy, dx);
    const int hl = c.mamba_heads / cp;
    for (size_t i = 0; i < p.infos().size(); ++i) {
      const auto& info = p.infos()[i];
      if (info.size != c.mamba_heads) continue;
      const auto gr = p.grad(static_cast<ParamId>(i));
      for (int h = 0; h < c.mamba_heads; ++h) {
        if (h / hl == g.rank()) EXPECT_NE(gr[h], 0.0) << info.name << " head " << h;
        else EXPECT_EQ(gr[h], 0.0) << info.name << " head " << h << " on rank " << g.rank();
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// (3) one instance, four micro-batches of CP sizes 8, 2, 1, 4 on an 8-rank world.

TEST(MambaMixerGroupSwitch, OneInstanceAcrossSizes8214MatchesFreshCp1Runs) {
  const ModelConfig c = mamba_config(8, 2, 3, 4);
  comm::run_threads(8, [&](comm::Communicator& world) {
    comm::GroupRegistry reg(world);
    comm::Communicator* own = &reg.group(2);  // the static group it was built with
    auto k = make_cpu_kernels<double>();
    ParamStore<double> p(c.seed);
    MambaMixer<double> m("mamba", c, p, *k, own);
    p.finalize();
    spread_params(p);
    EXPECT_EQ(m.cp_group(), own);
    const int sizes[] = {8, 2, 1, 4};
    for (int step = 0; step < 4; ++step) {
      const int cp = sizes[step];
      comm::Communicator& grp = reg.group(cp);
      const int gi = world.rank() / cp;  // which group of this size: its batch differs
      std::vector<int32_t> lengths{2 * cp + 1 + gi, 1, 3 + step};
      auto psp = make_packed_seq_params(lengths, cp, &grp);
      const int64_t total = psp.cu_seqlens_padded.back();
      const auto xg = random_vec(total * c.hidden, 500 + 10 * step + gi);
      const auto dyg = random_vec(total * c.hidden, 600 + 10 * step + gi);
      // Fresh CP = 1 run of the same batch on this rank's single-rank group.
      PackedSeqParams p1 = psp;
      p1.cp_size = 1;
      p1.cp_group = &reg.group(1);
      const auto ref = run_rank<double>(c, p1, xg, dyg);
      const auto got = run_rank<double>(c, psp, xg, dyg, &m, &p);
      EXPECT_EQ(m.cp_group(), own) << "after step " << step << " (cp " << cp << ")";
      check_against<double>(c, psp, ref, got, "step " + std::to_string(step));
      // A forward that throws inside the scope (wrong output size) still restores the group.
      const auto mb = MicroBatchView::of(psp);
      std::vector<double> x(mb.rows * c.hidden), bad(1);
      EXPECT_THROW(m.forward(mb, x, bad), dcp::Error);
      EXPECT_EQ(m.cp_group(), own) << "after a throwing forward at step " << step;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// (4) a CP size that does not divide the heads.

TEST(MambaMixerGroupSwitch, CpSizeNotDividingHeadsIsRejectedAndGroupKept) {
  const ModelConfig c = mamba_config(/*heads=*/6, 2, 3, 4);
  comm::run_threads(4, [&](comm::Communicator& world) {
    auto pair = world.split(world.rank() / 2, world.rank());  // own group of 2 (divides 6)
    auto k = make_cpu_kernels<double>();
    ParamStore<double> p(c.seed);
    MambaMixer<double> m("blocks.1.mamba", c, p, *k, pair.get());
    p.finalize();
    auto psp = make_packed_seq_params({5, 9}, 4, &world);
    const auto mb = MicroBatchView::of(psp);
    std::vector<double> x(mb.rows * c.hidden), y(x.size());
    for (int pass = 0; pass < 2; ++pass) {
      try {
        if (pass == 0) m.forward(mb, x, y);
        else m.backward(mb, x, y);
        ADD_FAILURE() << "cp 4 with 6 heads was accepted";
      } catch (const dcp::InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("blocks.1.mamba"), std::string::npos) << msg;
        EXPECT_NE(msg.find("CP size 4"), std::string::npos) << msg;
        EXPECT_NE(msg.find("mamba_heads = 6"), std::string::npos) << msg;
      }
      EXPECT_EQ(m.cp_group(), pair.get());
    }
    // The size it divides works on the same instance.
    auto psp2 = make_packed_seq_params({5, 9}, 2, pair.get());
    const auto mb2 = MicroBatchView::of(psp2);
    std::vector<double> x2 = random_vec(mb2.rows * c.hidden, 9), y2(x2.size());
    EXPECT_NO_THROW(m.forward(mb2, x2, y2));
    // A static group that does not divide the heads is rejected at construction.
    ParamStore<double> p4(c.seed);
    EXPECT_THROW(MambaMixer<double>("m4", c, p4, *k, &world), dcp::InputError);
  });
}

}  // namespace
}  // namespace dcp::model
