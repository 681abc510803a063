// Every layer's hand-written backward against central finite differences in float64
// (fd_check.h explains the 1e-6 bound), on packed batches with awkward lengths (1, odd, a
// padded tail), and the kernels' own identities (RoPE inverse, CE gradient).
#include <gtest/gtest.h>

#include <memory>

#include "comm/thread_comm.h"
#include "model/attention.h"
#include "model/kernels.h"
#include "model/layers.h"
#include "model/tests/fd_check.h"

namespace dcp::model {
namespace {

using testing::dot;
using testing::fd_check;
using testing::kFdTol;
using testing::random_vec;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab = 11;
  c.hidden = 6;
  c.ffn = 5;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.init_std = 0.5;  // large weights so every term of the backward matters in the check
  c.seed = 3;
  return c;
}

// Runs fn(group) on a single-rank thread world (attention needs a group even at CP = 1).
void with_single_rank(const std::function<void(comm::Communicator&)>& fn) {
  comm::run_threads(1, fn);
}

// f(x, params) = <dy, layer(x)>: checks dL/dx and every parameter's gradient.
void check_layer_grads(Layer<double>& layer, ParamStore<double>& p, const MicroBatchView& mb,
                       int width, uint64_t seed) {
  const int64_t n = mb.rows * width;
  auto x = random_vec(n, seed);
  const auto dy = random_vec(n, seed + 1);
  std::vector<double> y(n), dx(n);
  auto f = [&] {
    layer.forward(mb, x, y);
    return dot(dy, y);
  };
  f();
  p.zero_grads();
  layer.backward(mb, dy, dx);
  const std::vector<double> grads(p.grads().begin(), p.grads().end());
  const auto rx = fd_check(f, x, dx);
  EXPECT_LT(rx.rel_err, kFdTol) << layer.kind() << " dx: " << rx.str();
  for (const auto& info : p.infos()) {
    std::span<const double> g(grads.data() + info.offset, info.size);
    const auto rp = fd_check(f, p.value(static_cast<ParamId>(&info - p.infos().data())), g);
    EXPECT_LT(rp.rel_err, kFdTol) << info.name << ": " << rp.str();
    EXPECT_GT(rp.max_analytic, 0) << info.name << " has an all-zero gradient";
  }
}

PackedSeqParams psp_for(comm::Communicator& g, std::vector<int32_t> lengths, int64_t pad_to = 0) {
  return make_packed_seq_params(lengths, g.size(), &g, pad_to);
}

TEST(ModelLayers, RmsNormBackwardMatchesFiniteDifferences) {
  with_single_rank([](comm::Communicator& g) {
    auto k = make_cpu_kernels<double>();
    ParamStore<double> p(1);
    RmsNorm<double> norm("n", 7, 1e-5, p, *k);
    p.finalize();
    for (double& v : p.values()) v = 0.5 + v;  // not all ones
    auto psp = psp_for(g, {3, 1, 4});
    const auto mb = MicroBatchView::of(psp);
    p.values()[0] = 1.7;
    check_layer_grads(norm, p, mb, 7, 11);
  });
}

TEST(ModelLayers, MlpBackwardMatchesFiniteDifferences) {
  with_single_rank([](comm::Communicator& g) {
    auto k = make_cpu_kernels<double>();
    const ModelConfig c = small_config();
    ParamStore<double> p(c.seed);
    Mlp<double> mlp("mlp", c, p, *k);
    p.finalize();
    auto psp = psp_for(g, {5, 2});
    check_layer_grads(mlp, p, MicroBatchView::of(psp), c.hidden, 21);
  });
}

class AttentionFd : public ::testing::TestWithParam<attn::CpAlgo> {};

TEST_P(AttentionFd, BackwardMatchesFiniteDifferences) {
  with_single_rank([](comm::Communicator& g) {
    auto k = make_cpu_kernels<double>();
    ModelConfig c = small_config();
    c.attn_algo = GetParam();
    ParamStore<double> p(c.seed);
    Attention<double> att("att", c, p, *k);
    p.finalize();
    // Lengths 1, 6 and 9 with padding between and after: RoPE positions restart per sequence.
    auto psp = psp_for(g, {1, 6, 9});
    check_layer_grads(att, p, MicroBatchView::of(psp), c.hidden, 31);
  });
}

INSTANTIATE_TEST_SUITE_P(ModelLayers, AttentionFd,
                         ::testing::Values(attn::CpAlgo::ring, attn::CpAlgo::all_gather),
                         [](const auto& info) { return std::string(attn::cp_algo_name(info.param)); });

TEST(ModelLayers, BlockBackwardMatchesFiniteDifferences) {
  with_single_rank([](comm::Communicator& g) {
    auto k = make_cpu_kernels<double>();
    const ModelConfig c = small_config();
    ParamStore<double> p(c.seed);
    Block<double> block("b0", c, std::make_unique<Attention<double>>("b0.att", c, p, *k), p, *k);
    p.finalize();
    auto psp = psp_for(g, {7, 3});
    check_layer_grads(block, p, MicroBatchView::of(psp), c.hidden, 41);
  });
}

TEST(ModelKernels, RopeInverseUndoesRopeAndKeepsNorms) {
  auto k = make_cpu_kernels<double>();
  const int heads = 3, hd = 6;
  const std::vector<int32_t> pos{0, 5, 17, 1000};
  auto x = random_vec(4 * heads * hd, 5);
  const auto x0 = x;
  k->rope(x.data(), pos.data(), 4, heads, hd, 10000.0, false);
  // Position 0 is the identity; others rotate (the vector changes, its norm does not).
  for (int e = 0; e < heads * hd; ++e) EXPECT_DOUBLE_EQ(x[e], x0[e]);
  double n0 = 0, n1 = 0, moved = 0;
  for (size_t i = heads * hd; i < x.size(); ++i) {
    n0 += x0[i] * x0[i];
    n1 += x[i] * x[i];
    moved = std::max(moved, std::abs(x[i] - x0[i]));
  }
  EXPECT_NEAR(n0, n1, 1e-12);
  EXPECT_GT(moved, 1e-2);
  k->rope(x.data(), pos.data(), 4, heads, hd, 10000.0, true);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], x0[i], 1e-14);
}

TEST(ModelKernels, RopeRelativePositionIsWhatTheDotProductSees) {
  // <R(p) a, R(p + d) b> depends on d only: the property RoPE exists for.
  auto k = make_cpu_kernels<double>();
  const int hd = 8;
  const auto a = random_vec(hd, 1), b = random_vec(hd, 2);
  auto score = [&](int32_t p, int32_t d) {
    std::vector<double> qa(a), kb(b);
    const int32_t pq = p + d, pk = p;
    k->rope(qa.data(), &pq, 1, 1, hd, 10000.0, false);
    k->rope(kb.data(), &pk, 1, 1, hd, 10000.0, false);
    return dot(qa, kb);
  };
  EXPECT_NEAR(score(0, 3), score(40, 3), 1e-12);
  EXPECT_GT(std::abs(score(0, 3) - score(0, 4)), 1e-6);
}

TEST(ModelKernels, CrossEntropyGradientMatchesFiniteDifferences) {
  auto k = make_cpu_kernels<double>();
  const int n = 5, vocab = 7;
  auto logits = random_vec(n * vocab, 3, 2.0);
  const std::vector<int32_t> labels{0, 6, 3, -100, 2};
  const std::vector<uint8_t> mask{1, 1, 1, 0, 1};
  std::vector<double> dl(n * vocab), scratch(n * vocab);
  const double scale = 0.25;
  const double loss = k->cross_entropy(logits.data(), labels.data(), mask.data(), scale, dl.data(), n, vocab);
  EXPECT_GT(loss, 0);
  auto f = [&] {
    return scale * k->cross_entropy(logits.data(), labels.data(), mask.data(), 1.0, scratch.data(), n, vocab);
  };
  const auto r = fd_check(f, logits, dl);
  EXPECT_LT(r.rel_err, kFdTol) << r.str();
  for (int v = 0; v < vocab; ++v) EXPECT_EQ(dl[3 * vocab + v], 0.0) << "masked row has a gradient";
}

TEST(ModelKernels, SwigluAndEmbeddingBackward) {
  auto k = make_cpu_kernels<double>();
  const int n = 3, f = 4, d = 5, vocab = 6;
  auto gu = random_vec(n * 2 * f, 8, 3.0);
  const auto dout = random_vec(n * f, 9);
  std::vector<double> out(n * f), dgu(n * 2 * f);
  k->swiglu_bwd(gu.data(), dout.data(), dgu.data(), n, f);
  auto fs = [&] {
    k->swiglu_fwd(gu.data(), out.data(), n, f);
    return dot(dout, out);
  };
  const auto r = fd_check(fs, gu, dgu);
  EXPECT_LT(r.rel_err, kFdTol) << r.str();

  auto table = random_vec(vocab * d, 10);
  const std::vector<int32_t> tok{2, 5, 2};
  const auto de = random_vec(n * d, 11);
  std::vector<double> emb(n * d), dtable(vocab * d, 0.0);
  k->embedding_bwd(tok.data(), de.data(), dtable.data(), n, d);
  auto fe = [&] {
    k->embedding_fwd(tok.data(), table.data(), emb.data(), n, d);
    return dot(de, emb);
  };
  const auto re = fd_check(fe, table, dtable);
  EXPECT_LT(re.rel_err, kFdTol) << re.str();
  for (int j = 0; j < d; ++j) EXPECT_EQ(dtable[0 * d + j], 0.0);  // token 0 never appears
}

}  // namespace
}  // namespace dcp::model
