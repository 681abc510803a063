// The whole model: gradient vs finite differences (float64), context parallelism does not change
// the math (every CP size and algorithm equals the single-rank run), every CP-aware module is back
// on its own group after a micro-batch (also when the forward throws), and the MTP roll.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "comm/group_registry.h"
#include "comm/thread_comm.h"
#include "core/rng.h"
#include "model/batch.h"
#include "model/model.h"
#include "model/optimizer.h"
#include "model/roll.h"
#include "model/tests/fd_check.h"

namespace dcp::model {
namespace {

using testing::fd_check;
using testing::rel_diff;
using testing::tensor_rel_diff;

ModelConfig tiny_config(attn::CpAlgo algo = attn::CpAlgo::ring) {
  ModelConfig c;
  c.vocab = 13;
  c.hidden = 8;
  c.ffn = 12;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.mixers = {MixerKind::attention, MixerKind::mamba};
  c.mamba_heads = 8;  // divisible by every CP size up to 8
  c.mamba_head_dim = 2;
  c.mamba_state = 3;
  c.mtp = true;
  c.mtp_loss_weight = 0.3;
  c.init_std = 0.3;
  c.attn_algo = algo;
  c.seed = 5;
  return c;
}

// Seeded token sequences of the given lengths.
std::vector<std::vector<int32_t>> make_seqs(const std::vector<int>& lengths, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int len : lengths) {
    std::vector<int32_t> s(len);
    for (auto& t : s) t = static_cast<int32_t>(rng.uniform_int(0, vocab - 1));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::span<const int32_t>> spans(const std::vector<std::vector<int32_t>>& seqs) {
  return {seqs.begin(), seqs.end()};
}

LossScale scale_for(const std::vector<std::vector<int32_t>>& seqs, double w) {
  int64_t nm = 0, nt = 0;
  for (const auto& s : seqs) {
    nm += main_targets(static_cast<int64_t>(s.size()));
    nt += mtp_targets(static_cast<int64_t>(s.size()));
  }
  return {1.0 / static_cast<double>(nm), w / static_cast<double>(nt)};
}

TEST(ModelFd, WholeModelGradientMatchesFiniteDifferences) {
  comm::run_threads(1, [](comm::Communicator& g) {
    const ModelConfig c = tiny_config();
    auto k = make_cpu_kernels<double>();
    Model<double> m(c, *k);
    const auto seqs = make_seqs({1, 5, 9, 2}, c.vocab, 1);
    const auto in = make_microbatch_input(spans(seqs), g);
    const LossScale sc = scale_for(seqs, c.mtp_loss_weight);
    auto f = [&] {
      const LossSums s = m.forward_backward(in, sc);
      return sc.main * s.main + sc.mtp * s.mtp;
    };
    m.params().zero_grads();
    f();
    const std::vector<double> grads(m.params().grads().begin(), m.params().grads().end());
    for (const auto& info : m.params().infos()) {
      const std::span<const double> an(grads.data() + info.offset, info.size);
      const auto r = fd_check(f, m.params().value(static_cast<ParamId>(&info - m.params().infos().data())), an, 60);
      EXPECT_LT(r.rel_err, 1e-6) << info.name << ": " << r.str();
      EXPECT_GT(r.max_analytic, 0) << info.name << " has an all-zero gradient";
    }
  });
}

// The MTP head reads the decoder's output after the final norm, as Megatron's (the final
// layernorm moves to the decoder's last layer when MTP is on, transformer_block.py
// has_final_layernorm_in_this_stage; gpt_model.py hands that output to self.mtp): the MTP loss
// depends on the final norm's weight and sends it a gradient of its own. (Until 2026-11-28 the
// head read the hidden state before the norm: neither held.)
TEST(ModelMtp, TheHeadReadsTheFinalNormsOutput) {
  comm::run_threads(1, [](comm::Communicator& g) {
    const ModelConfig c = tiny_config();
    auto k = make_cpu_kernels<double>();
    Model<double> m(c, *k);
    const auto seqs = make_seqs({7, 5, 9}, c.vocab, 3);
    const auto in = make_microbatch_input(spans(seqs), g);
    ParamId norm = -1;
    for (const auto& info : m.params().infos())
      if (info.name == "final_norm.weight") norm = static_cast<ParamId>(&info - m.params().infos().data());
    ASSERT_GE(norm, 0);
    auto norm_grad = [&](double w_mtp) {
      const LossScale sc = scale_for(seqs, w_mtp);
      m.params().zero_grads();
      const LossSums s = m.forward_backward(in, sc);
      const auto gr = m.params().grad(norm);
      return std::pair{s.mtp, std::vector<double>(gr.begin(), gr.end())};
    };
    const auto [mtp0, g_main] = norm_grad(0.0);  // the main loss's share alone
    const auto [mtp1, g_both] = norm_grad(1.0);
    EXPECT_EQ(mtp0, mtp1);
    EXPECT_GT(rel_diff(g_both, g_main), 1e-3) << "the MTP loss sends the final norm no gradient";
    // Not a uniform scale: the head's own hnorm would cancel it.
    const auto w = m.params().value(norm);
    for (size_t i = 0; i < w.size(); ++i) w[i] *= i % 2 ? 1.5 : 0.5;
    const auto [mtp_scaled, unused] = norm_grad(1.0);
    EXPECT_GT(std::abs(mtp_scaled - mtp1), 1e-3 * std::abs(mtp1)) << "the MTP loss ignores the final norm";
  });
}

struct CpRun {
  double main = 0, mtp = 0;
  int64_t main_rows = 0, mtp_rows = 0;
  std::vector<double> grads;  // summed over ranks
  std::vector<ParamInfo> tensors;
};

// Runs one micro-batch of `seqs` on a group of `cp` thread ranks; T = float or double. The loss
// is scaled by `scale` (default: the targets of `seqs`).
template <typename T>
CpRun run_cp(const ModelConfig& c, int cp, const std::vector<std::vector<int32_t>>& seqs,
             std::optional<LossScale> scale = std::nullopt) {
  CpRun out;
  comm::run_threads(cp, [&](comm::Communicator& g) {
    auto k = make_cpu_kernels<T>();
    Model<T> m(c, *k);
    const auto in = make_microbatch_input(spans(seqs), g);
    const LossSums s = m.forward_backward(in, scale.value_or(scale_for(seqs, c.mtp_loss_weight)));
    std::vector<double> grads(m.params().grads().begin(), m.params().grads().end());
    std::vector<double> sums{s.main, s.mtp, static_cast<double>(s.main_rows), static_cast<double>(s.mtp_rows)};
    g.all_reduce(std::span<double>(grads));
    g.all_reduce(std::span<double>(sums));
    if (g.rank() == 0)
      out = {sums[0], sums[1], static_cast<int64_t>(sums[2]), static_cast<int64_t>(sums[3]), grads, m.params().infos()};
  });
  return out;
}

struct CpCase {
  attn::CpAlgo algo;
  int cp;
};

class ModelCp : public ::testing::TestWithParam<CpCase> {};

// Lengths: 1, 2cp-1, 2cp, 2cp+1 for cp = 8 (15, 16, 17), a long one and short ones.
const std::vector<int> kLengths{1, 15, 16, 17, 70, 3, 2, 9};

// The row counts equal, the loss sums and the gradient (per tensor) within `tol` relative.
void expect_same_run(const CpRun& got, const CpRun& ref, double tol) {
  EXPECT_EQ(got.main_rows, ref.main_rows);
  EXPECT_EQ(got.mtp_rows, ref.mtp_rows);
  EXPECT_NEAR(got.main, ref.main, tol * ref.main);
  EXPECT_NEAR(got.mtp, ref.mtp, tol * ref.mtp);
  EXPECT_LT(tensor_rel_diff(ref.grads, got.grads, ref.tensors), tol);
}

TEST_P(ModelCp, EqualsSingleRankFloat64) {
  const ModelConfig c = tiny_config(GetParam().algo);
  const auto seqs = make_seqs(kLengths, c.vocab, 2);
  const CpRun ref = run_cp<double>(c, 1, seqs);
  // At cp 1 the run is the reference itself: only the counts below are checked there.
  if (GetParam().cp > 1) {
    expect_same_run(run_cp<double>(c, GetParam().cp, seqs), ref, 1e-10);
  }
  // The counts are the real targets of the batch: every sequence's len - 1 and len - 2.
  int64_t nm = 0, nt = 0;
  for (int l : kLengths) {
    nm += main_targets(l);
    nt += mtp_targets(l);
  }
  EXPECT_EQ(ref.main_rows, nm);
  EXPECT_EQ(ref.mtp_rows, nt);
}

// Packing is invisible to the math: the packed micro-batch's loss sums and gradient equal the sums
// over its samples, each run alone as a micro-batch of its own with the same (global) loss scale,
// so no attention, scan state, position or MTP roll crosses a sequence boundary anywhere in the
// model. (The single-rank reference of dcpbench converge packs every sample into one micro-batch
// and runs the same code as the strategies, so it could not see a leak that all share.)
TEST_P(ModelCp, PackedEqualsItsSamplesRunAloneFloat64) {
  const ModelConfig c = tiny_config(GetParam().algo);
  const auto seqs = make_seqs(kLengths, c.vocab, 3);
  const LossScale scale = scale_for(seqs, c.mtp_loss_weight);
  const CpRun packed = run_cp<double>(c, GetParam().cp, seqs, scale);
  CpRun alone;
  for (const auto& one : seqs) {
    const CpRun r = run_cp<double>(c, GetParam().cp, {one}, scale);
    alone.main += r.main;
    alone.mtp += r.mtp;
    alone.main_rows += r.main_rows;
    alone.mtp_rows += r.mtp_rows;
    if (alone.grads.empty()) alone.grads.assign(r.grads.size(), 0.0);
    for (size_t i = 0; i < r.grads.size(); ++i) alone.grads[i] += r.grads[i];
  }
  EXPECT_EQ(packed.main_rows, alone.main_rows);
  EXPECT_EQ(packed.mtp_rows, alone.mtp_rows);
  EXPECT_NEAR(packed.main, alone.main, 1e-10 * alone.main);
  EXPECT_NEAR(packed.mtp, alone.mtp, 1e-10 * alone.mtp);
  EXPECT_LT(tensor_rel_diff(alone.grads, packed.grads, packed.tensors), 1e-10);
}

TEST_P(ModelCp, EqualsSingleRankFloat32) {
  if (GetParam().cp == 1) GTEST_SKIP() << "cp 1 is the single-rank reference itself";
  const ModelConfig c = tiny_config(GetParam().algo);
  const auto seqs = make_seqs(kLengths, c.vocab, 3);
  const CpRun ref = run_cp<float>(c, 1, seqs);
  expect_same_run(run_cp<float>(c, GetParam().cp, seqs), ref, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Model, ModelCp,
                         ::testing::Values(CpCase{attn::CpAlgo::ring, 1}, CpCase{attn::CpAlgo::ring, 2},
                                           CpCase{attn::CpAlgo::ring, 4}, CpCase{attn::CpAlgo::ring, 8},
                                           CpCase{attn::CpAlgo::all_gather, 2},
                                           CpCase{attn::CpAlgo::all_gather, 8}),
                         [](const auto& info) {
                           return std::string(attn::cp_algo_name(info.param.algo)) + "_cp" +
                                  std::to_string(info.param.cp);
                         });

// Kernels that pass every call to `base`: the tests' wrappers override the calls they watch.
template <typename T>
class ForwardingKernels : public Kernels<T> {
 public:
  explicit ForwardingKernels(std::unique_ptr<Kernels<T>> base) : b_(std::move(base)) {}
  std::string name() const override { return "forwarding"; }
  void linear_fwd(const T* x, const T* w, T* y, int64_t n, int in, int out) override { b_->linear_fwd(x, w, y, n, in, out); }
  void linear_bwd(const T* x, const T* w, const T* dy, T* dx, T* dw, int64_t n, int in, int out) override { b_->linear_bwd(x, w, dy, dx, dw, n, in, out); }
  void rmsnorm_fwd(const T* x, const T* g, T* y, T* r, int64_t n, int d, double e) override { b_->rmsnorm_fwd(x, g, y, r, n, d, e); }
  void rmsnorm_bwd(const T* x, const T* g, const T* r, const T* dy, T* dx, T* dg, int64_t n, int d) override { b_->rmsnorm_bwd(x, g, r, dy, dx, dg, n, d); }
  void rope(T* x, const int32_t* p, int64_t n, int h, int hd, double th, bool inv) override { b_->rope(x, p, n, h, hd, th, inv); }
  void swiglu_fwd(const T* gu, T* o, int64_t n, int f) override { b_->swiglu_fwd(gu, o, n, f); }
  void swiglu_bwd(const T* gu, const T* d, T* dg, int64_t n, int f) override { b_->swiglu_bwd(gu, d, dg, n, f); }
  void embedding_fwd(const int32_t* t, const T* tb, T* o, int64_t n, int d) override { b_->embedding_fwd(t, tb, o, n, d); }
  void embedding_bwd(const int32_t* t, const T* d, T* dt, int64_t n, int dd) override { b_->embedding_bwd(t, d, dt, n, dd); }
  double cross_entropy(const T* l, const int32_t* lb, const uint8_t* m, double s, T* dl, int64_t n, int v) override { return b_->cross_entropy(l, lb, m, s, dl, n, v); }
  void add(const T* a, const T* b, T* y, int64_t n) override { b_->add(a, b, y, n); }
  void add_inplace(T* y, const T* x, int64_t n) override { b_->add_inplace(y, x, n); }
  void attention_fwd(attn::CpAlgo a, comm::Communicator& g, const attn::ThdBatch& b, const attn::AttnShape& s,
                     const T* q, const T* k, const T* v, T* o, T* l) override {
    b_->attention_fwd(a, g, b, s, q, k, v, o, l);
  }
  void attention_bwd(attn::CpAlgo a, comm::Communicator& g, const attn::ThdBatch& b, const attn::AttnShape& s,
                     const T* q, const T* k, const T* v, const T* o, const T* l, const T* d, T* dq, T* dk, T* dv) override {
    b_->attention_bwd(a, g, b, s, q, k, v, o, l, d, dq, dk, dv);
  }
  void silu_gate_fwd(const T* z, int64_t ldz, const T* y, T* o, int64_t n, int d) override { b_->silu_gate_fwd(z, ldz, y, o, n, d); }
  void silu_gate_bwd(const T* z, int64_t ldz, const T* y, const T* d, T* dz, int64_t lddz, T* dy, int64_t n, int dd) override {
    b_->silu_gate_bwd(z, ldz, y, d, dz, lddz, dy, n, dd);
  }
  void ssm_scan_fwd(const attn::ThdBatch& b, const T* xs, const T* dt, const T* B, const T* C, const T* dtb, const T* al,
                    const T* D, T* y, int h, int hd, int st) override {
    b_->ssm_scan_fwd(b, xs, dt, B, C, dtb, al, D, y, h, hd, st);
  }
  void ssm_scan_bwd(const attn::ThdBatch& b, const T* xs, const T* dt, const T* B, const T* C, const T* dtb, const T* al,
                    const T* D, const T* dy, T* dxs, T* ddt, T* dB, T* dC, T* ddtb, T* dal, T* dD, int h, int hd,
                    int st) override {
    b_->ssm_scan_bwd(b, xs, dt, B, C, dtb, al, D, dy, dxs, ddt, dB, dC, ddtb, dal, dD, h, hd, st);
  }
  void adamw(T* p, const T* g, T* m, T* v, int64_t n, const AdamWHyper& h, double wd, int st) override { b_->adamw(p, g, m, v, n, h, wd, st); }

 protected:
  std::unique_ptr<Kernels<T>> b_;
};

// Kernels that throw from the n-th attention forward: a failure inside a CP-aware module.
template <typename T>
class ThrowingKernels final : public ForwardingKernels<T> {
 public:
  ThrowingKernels(std::unique_ptr<Kernels<T>> base, int throw_at)
      : ForwardingKernels<T>(std::move(base)), throw_at_(throw_at) {}
  std::string name() const override { return "throwing"; }
  void attention_fwd(attn::CpAlgo a, comm::Communicator& g, const attn::ThdBatch& b, const attn::AttnShape& s,
                     const T* q, const T* k, const T* v, T* o, T* l) override {
    if (++calls_ == throw_at_) throw Error("deliberate failure in attention forward " + std::to_string(calls_));
    this->b_->attention_fwd(a, g, b, s, q, k, v, o, l);
  }

 private:
  int throw_at_;
  int calls_ = 0;
};

// Micro-batches with CP sizes 4, 2, 4 on a pool of 4: after each, every CP-aware module is
// back on its own (static) group; so it is after a forward that throws inside the first block's
// attention (1st attention forward) and inside the MTP head's attention (2nd), i.e. with the MTP
// head's own scope open too.
TEST(ModelGroups, EveryModuleReturnsToItsOwnGroupAlsoWhenTheForwardThrows) {
  comm::run_threads(4, [](comm::Communicator& world) {
    comm::GroupRegistry reg(world);
    // The modules' own group is the single-rank group; every micro-batch below switches them to
    // a larger one, so a scope that failed to restore (also while unwinding) would be seen.
    comm::Communicator& own = reg.group(1);
    const ModelConfig c = tiny_config();
    const auto seqs = make_seqs({6, 11, 3}, c.vocab, 4);
    for (int throw_at : {0, 1, 2}) {
      auto k = std::make_unique<ThrowingKernels<double>>(make_cpu_kernels<double>(), throw_at == 0 ? -1 : throw_at);
      Model<double> m(c, *k, &own);
      ASSERT_EQ(m.cp_modules().size(), 4u);  // block attention, Mamba mixer, MTP head, MTP attention
      for (int cp : {4, 2, 4}) {
        const auto in = make_microbatch_input(spans(seqs), reg.group(cp));
        if (throw_at == 0) {
          m.forward_backward(in, scale_for(seqs, c.mtp_loss_weight));
        } else {
          EXPECT_THROW(m.forward_backward(in, scale_for(seqs, c.mtp_loss_weight)), Error);
        }
        for (const CpAware* mod : m.cp_modules()) EXPECT_EQ(mod->cp_group(), &own) << "cp " << cp;
        if (throw_at != 0) break;  // the thrower's counter is spent; one failing call is the case
      }
    }
  });
}

// Kernels that record the tokens of every embedding forward and the labels and mask of every
// cross-entropy, in call order: the main model's, then the MTP head's.
template <typename T>
class RecordingKernels final : public ForwardingKernels<T> {
 public:
  using ForwardingKernels<T>::ForwardingKernels;
  std::string name() const override { return "recording"; }
  void embedding_fwd(const int32_t* t, const T* tb, T* o, int64_t n, int d) override {
    tokens.emplace_back(t, t + n);
    this->b_->embedding_fwd(t, tb, o, n, d);
  }
  double cross_entropy(const T* l, const int32_t* lb, const uint8_t* m, double s, T* dl, int64_t n, int v) override {
    labels.emplace_back(lb, lb + n);
    masks.emplace_back(m, m + n);
    return this->b_->cross_entropy(l, lb, m, s, dl, n, v);
  }
  std::vector<std::vector<int32_t>> tokens, labels;
  std::vector<std::vector<uint8_t>> masks;
};

// The MTP head (depth 1) embeds token t+1 and predicts token t+2 at row t of each packed sequence,
// on every CP rank (Megatron's multi_token_prediction.py rolls input_ids and labels left by one per
// depth), with a loss on exactly the rows t < L-2; the main head predicts token t+1. The expected
// rows are built here from the token values, not through roll_left_packed: MtpRoll checks that
// function against its own reference, and a head that did not roll its tokens or its labels passed
// every other test (helper-58's review). Tokens are distinct and never the padding value 0, so a
// row from the wrong position, sequence or padding is seen.
TEST(ModelMtp, TheHeadEmbedsTokenTPlusOneAndPredictsTokenTPlusTwo) {
  ModelConfig c = tiny_config();
  c.vocab = 64;
  std::vector<std::vector<int32_t>> seqs;
  int32_t next = 1;
  for (int len : {5, 3, 8, 1, 2, 9}) {  // lengths 1 and 2 have no MTP target
    seqs.emplace_back();
    for (int t = 0; t < len; ++t) seqs.back().push_back(next++);
  }
  for (const int cp : {1, 2, 4}) {
    SCOPED_TRACE(cp);
    comm::run_threads(cp, [&](comm::Communicator& g) {
      RecordingKernels<double> k(make_cpu_kernels<double>());
      Model<double> m(c, k);
      const auto in = make_microbatch_input(spans(seqs), g);
      m.forward_backward(in, scale_for(seqs, c.mtp_loss_weight));
      const attn::ThdBatch thd = in.psp.thd();
      // Global rows (padded THD layout); -1: no expectation (padding).
      std::vector<int32_t> main_lab(thd.total_tokens(), -1), tok(thd.total_tokens(), -1),
          lab(thd.total_tokens(), -1), mask(thd.total_tokens(), 0);
      for (size_t j = 0; j < seqs.size(); ++j) {
        const int64_t o = thd.cu_seqlens_padded[j], len = static_cast<int64_t>(seqs[j].size());
        for (int64_t t = 0; t + 1 < len; ++t) {
          main_lab[o + t] = seqs[j][t + 1];
          tok[o + t] = seqs[j][t + 1];
        }
        for (int64_t t = 0; t + 2 < len; ++t) {
          lab[o + t] = seqs[j][t + 2];
          mask[o + t] = 1;
        }
      }
      const auto shard = [&](const std::vector<int32_t>& v) { return attn::shard_rows<int32_t>(v, 1, thd, cp, g.rank()); };
      const auto want_main = shard(main_lab), want_tok = shard(tok), want_lab = shard(lab), want_mask = shard(mask);
      // Every rank reaches the all_reduce below, also when a check fails (a rank that returned
      // early would leave the others waiting for its deadline).
      size_t n = want_tok.size();
      const bool shapes = k.tokens.size() == 2 && k.labels.size() == 2 && k.tokens[1].size() == n &&
                          k.labels[0].size() == n && k.labels[1].size() == n;
      EXPECT_TRUE(shapes) << "rank " << g.rank() << ": " << k.tokens.size() << " embedding and " << k.labels.size()
                          << " cross-entropy forwards (expected 2 and 2) or rows other than " << n;
      if (!shapes) n = 0;
      int64_t rows = 0;
      for (size_t i = 0; i < n; ++i) {
        SCOPED_TRACE("rank " + std::to_string(g.rank()) + " row " + std::to_string(i));
        if (want_main[i] >= 0) {
          EXPECT_EQ(k.labels[0][i], want_main[i]) << "main head";
        } else {
          EXPECT_EQ(k.masks[0][i], 0) << "main head: a row without a next token has no loss";
        }
        if (want_tok[i] >= 0) {
          EXPECT_EQ(k.tokens[1][i], want_tok[i]) << "MTP embedding input";
        }
        EXPECT_EQ(k.masks[1][i], want_mask[i]) << "MTP loss mask";
        if (want_mask[i]) {
          EXPECT_EQ(k.labels[1][i], want_lab[i]) << "MTP target";
        }
        rows += k.masks[1][i];
      }
      std::vector<int64_t> all{rows};
      g.all_reduce(std::span<int64_t>(all));
      EXPECT_EQ(all[0], 3 + 1 + 6 + 0 + 0 + 7) << "the MTP targets of lengths 5, 3, 8, 1, 2, 9";
    });
  }
}

// --- MTP roll ---

attn::ThdBatch batch_of(const std::vector<int32_t>& lengths, int cp) { return attn::make_thd_batch(lengths, cp); }

// Token value = 1000 * (sequence + 1) + position: a leaked value names its sequence.
std::vector<int32_t> labelled_tokens(const attn::ThdBatch& b) {
  std::vector<int32_t> x(b.total_tokens(), -1);
  for (int j = 0; j < b.batch(); ++j)
    for (int32_t t = 0; t < b.padded_seqlen(j); ++t) x[b.cu_seqlens_padded[j] + t] = 1000 * (j + 1) + t;
  return x;
}

class MtpRoll : public ::testing::TestWithParam<int> {};

TEST_P(MtpRoll, CpRollEqualsTheGlobalPerSequenceRoll) {
  const int cp = GetParam();
  // Lengths that are not multiples of 2*cp (and some that are), a zero-length sequence, length 1.
  const std::vector<int32_t> lengths{7, 1, 0, 2 * cp, 2 * cp + 1, 33, 5};
  const auto b = batch_of(lengths, cp);
  const auto x = labelled_tokens(b);
  const auto ref = roll_left_packed_ref(b, x, 0);
  comm::run_threads(cp, [&](comm::Communicator& g) {
    const auto local = attn::shard_rows<int32_t>(x, 1, b, cp, g.rank());
    const auto got = roll_left_packed(g, b, local, 0);
    const auto want = attn::shard_rows<int32_t>(ref, 1, b, cp, g.rank());
    EXPECT_EQ(got, want) << "rank " << g.rank() << " of " << cp;
  });
}

INSTANTIATE_TEST_SUITE_P(Model, MtpRoll, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& info) { return "cp" + std::to_string(info.param); });

// Megatron PRs #4494/#4495 (landscape §4): chunks located with the UNPADDED cu_seqlens leak
// tokens across sequence boundaries when lengths are not multiples of 2*cp. Here every rolled
// value of sequence j comes from sequence j (or is the fill), and the boundaries used are the
// padded ones: the last row of every padded sequence receives the fill.
TEST(MtpRoll, NothingRollsAcrossASequenceBoundary_MegatronPR4494) {
  const int cp = 2;
  const std::vector<int32_t> lengths{5, 3, 7};  // none a multiple of 2*cp = 4
  const auto b = batch_of(lengths, cp);
  const auto x = labelled_tokens(b);
  comm::run_threads(cp, [&](comm::Communicator& g) {
    const auto rows = attn::zigzag_rows(b, cp, g.rank());
    const auto local = attn::shard_rows<int32_t>(x, 1, b, cp, g.rank());
    const auto got = roll_left_packed(g, b, local, 0);
    for (size_t i = 0; i < rows.size(); ++i) {
      int j = 0;
      while (b.cu_seqlens_padded[j + 1] <= rows[i]) ++j;
      const bool last_row = rows[i] == b.cu_seqlens_padded[j + 1] - 1;
      if (last_row) {
        EXPECT_EQ(got[i], 0) << "row " << rows[i];
      } else {
        EXPECT_EQ(got[i] / 1000, j + 1) << "row " << rows[i] << " got a value of another sequence";
        EXPECT_EQ(got[i], x[rows[i] + 1]);
      }
    }
  });
  // What the unpadded boundaries would have given: sequence 0 (5 real tokens) and its padding
  // (8 rows at 2*cp = 4) span different row ranges, so a roll on cu_seqlens / cp mixes them.
  EXPECT_NE(b.cu_seqlens[1], b.cu_seqlens_padded[1]);
}

}  // namespace
}  // namespace dcp::model

namespace dcp::model {
namespace {

// RoPE positions of a shard: every local row's position inside its sequence, restarting at 0 per
// sequence and following the zigzag chunks (front chunk r, back chunk 2cp-1-r), on awkward lengths.
TEST(ModelPositions, ShardPositionsAreTheGlobalPositionsOfItsRows) {
  for (int cp : {1, 2, 4, 8}) {
    const std::vector<int32_t> lengths{1, 2 * cp - 1, 2 * cp, 2 * cp + 1, 37};
    comm::run_threads(cp, [&](comm::Communicator& g) {
      const PackedSeqParams psp = make_packed_seq_params(lengths, cp, &g);
      const MicroBatchView mb = MicroBatchView::of(psp);
      const auto thd = psp.thd();
      const auto rows = attn::zigzag_rows(thd, cp, g.rank());
      ASSERT_EQ(static_cast<int64_t>(rows.size()), mb.rows);
      for (size_t i = 0; i < rows.size(); ++i) {
        int j = 0;
        while (thd.cu_seqlens_padded[j + 1] <= rows[i]) ++j;
        EXPECT_EQ(mb.positions[i], rows[i] - thd.cu_seqlens_padded[j]) << "cp " << cp << " row " << rows[i];
      }
    });
  }
}

// AdamW against the update written out by hand for two steps (torch.optim.AdamW's formula).
TEST(ModelOptimizer, AdamWMatchesTheHandComputedUpdate) {
  auto k = make_cpu_kernels<double>();
  ParamStore<double> p(1);
  const ParamId w = p.add("w", {1, 2}, ParamInit::constant(0.5));
  const ParamId g = p.add("g", {2}, ParamInit::constant(-1.0));
  p.finalize();
  AdamWHyper h;
  h.lr = 0.1;
  h.weight_decay = 0.2;
  AdamW<double> opt(p, h);
  const double grads[2][2] = {{0.3, -2.0}, {0.1, 0.5}};
  double pw = 0.5, pg = -1.0, mw = 0, vw = 0, mg = 0, vg = 0;
  for (int t = 1; t <= 2; ++t) {
    p.grad(w)[0] = grads[t - 1][0];
    p.grad(w)[1] = grads[t - 1][1];
    p.grad(g)[0] = p.grad(g)[1] = grads[t - 1][0];
    opt.step(p, *k);
    const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
    // w (2-D, decays): element 0 only, by hand.
    mw = 0.9 * mw + 0.1 * grads[t - 1][0];
    vw = 0.999 * vw + 0.001 * grads[t - 1][0] * grads[t - 1][0];
    pw = pw * (1 - 0.1 * 0.2) - 0.1 * (mw / bc1) / (std::sqrt(vw / bc2) + 1e-8);
    // g (1-D norm weight): no weight decay.
    mg = 0.9 * mg + 0.1 * grads[t - 1][0];
    vg = 0.999 * vg + 0.001 * grads[t - 1][0] * grads[t - 1][0];
    pg = pg - 0.1 * (mg / bc1) / (std::sqrt(vg / bc2) + 1e-8);
    EXPECT_NEAR(p.value(w)[0], pw, 1e-15) << "step " << t;
    EXPECT_NEAR(p.value(g)[0], pg, 1e-15) << "step " << t;
  }
}

}  // namespace
}  // namespace dcp::model
