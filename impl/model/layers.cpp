// See layers.h and layer.h.
#include "model/layers.h"

#include <algorithm>

#include "core/nvtx.h"

namespace dcp::model {

MicroBatchView MicroBatchView::of(const PackedSeqParams& psp) {
  DCP_CHECK(psp.cp_group != nullptr, "MicroBatchView: packed_seq_params has no cp_group");
  MicroBatchView v;
  v.psp = &psp;
  v.thd = psp.thd();
  v.cp_rank = psp.cp_group->rank();
  v.rows = v.thd.total_tokens() / psp.cp_size;
  v.positions = attn::zigzag_positions(v.thd, psp.cp_size, v.cp_rank);
  return v;
}

namespace {
void check_rows(const char* who, const MicroBatchView& mb, size_t got, int width) {
  DCP_CHECK(static_cast<int64_t>(got) == mb.rows * width, who, ": tensor has ", got,
            " elements, expected ", mb.rows, " rows x ", width);
}
}  // namespace

// --- RmsNorm ---

template <typename T>
RmsNorm<T>::RmsNorm(const std::string& name, int width, double eps, ParamStore<T>& p, Kernels<T>& k)
    : width_(width), eps_(eps), p_(p), k_(k),
      g_(p.add(name + ".weight", {width}, ParamInit::constant(1.0))) {}

template <typename T>
void RmsNorm<T>::forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) {
  check_rows("RmsNorm", mb, x.size(), width_);
  x_.assign(x.begin(), x.end());
  rstd_.resize(mb.rows);
  k_.rmsnorm_fwd(x.data(), p_.value(g_).data(), y.data(), rstd_.data(), mb.rows, width_, eps_);
}

template <typename T>
void RmsNorm<T>::backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) {
  check_rows("RmsNorm", mb, dy.size(), width_);
  k_.rmsnorm_bwd(x_.data(), p_.value(g_).data(), rstd_.data(), dy.data(), dx.data(),
                 p_.grad(g_).data(), mb.rows, width_);
}

// --- Mlp ---

template <typename T>
Mlp<T>::Mlp(const std::string& name, const ModelConfig& c, ParamStore<T>& p, Kernels<T>& k)
    : hidden_(c.hidden), ffn_(c.ffn), p_(p), k_(k),
      w_gate_up_(p.add(name + ".gate_up.weight", {2 * c.ffn, c.hidden}, ParamInit::normal_std(c.init_std))),
      w_down_(p.add(name + ".down.weight", {c.hidden, c.ffn}, ParamInit::normal_std(c.init_std))) {}

template <typename T>
void Mlp<T>::forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) {
  DCP_NVTX_RANGE();
  check_rows("Mlp", mb, x.size(), hidden_);
  x_.assign(x.begin(), x.end());
  gate_up_.resize(mb.rows * 2 * ffn_);
  act_.resize(mb.rows * ffn_);
  k_.linear_fwd(x.data(), p_.value(w_gate_up_).data(), gate_up_.data(), mb.rows, hidden_, 2 * ffn_);
  k_.swiglu_fwd(gate_up_.data(), act_.data(), mb.rows, ffn_);
  k_.linear_fwd(act_.data(), p_.value(w_down_).data(), y.data(), mb.rows, ffn_, hidden_);
}

template <typename T>
void Mlp<T>::backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) {
  DCP_NVTX_RANGE();
  check_rows("Mlp", mb, dy.size(), hidden_);
  std::vector<T> dact(mb.rows * ffn_), dgu(mb.rows * 2 * ffn_);
  k_.linear_bwd(act_.data(), p_.value(w_down_).data(), dy.data(), dact.data(),
                p_.grad(w_down_).data(), mb.rows, ffn_, hidden_);
  k_.swiglu_bwd(gate_up_.data(), dact.data(), dgu.data(), mb.rows, ffn_);
  k_.linear_bwd(x_.data(), p_.value(w_gate_up_).data(), dgu.data(), dx.data(),
                p_.grad(w_gate_up_).data(), mb.rows, hidden_, 2 * ffn_);
}

// --- Block ---

template <typename T>
Block<T>::Block(const std::string& name, const ModelConfig& c, std::unique_ptr<Layer<T>> mixer,
                ParamStore<T>& p, Kernels<T>& k)
    : hidden_(c.hidden), k_(k),
      norm1_(name + ".norm1", c.hidden, c.norm_eps, p, k),
      norm2_(name + ".norm2", c.hidden, c.norm_eps, p, k),
      mixer_(std::move(mixer)),
      mlp_(name + ".mlp", c, p, k) {
  DCP_CHECK(mixer_ != nullptr, "Block ", name, ": no mixer");
}

template <typename T>
void Block<T>::forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) {
  check_rows("Block", mb, x.size(), hidden_);
  const size_t n = x.size();
  n1_.resize(n);
  m_.resize(n);
  x1_.resize(n);
  n2_.resize(n);
  f_.resize(n);
  norm1_.forward(mb, x, n1_);
  mixer_->forward(mb, n1_, m_);
  k_.add(x.data(), m_.data(), x1_.data(), mb.rows * hidden_);
  norm2_.forward(mb, x1_, n2_);
  mlp_.forward(mb, n2_, f_);
  k_.add(x1_.data(), f_.data(), y.data(), mb.rows * hidden_);
}

// y = x1 + f(x1), x1 = x + m(x):  dx1 = dy + dNorm2(dMlp(dy));  dx = dx1 + dNorm1(dMixer(dx1)).
template <typename T>
void Block<T>::backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) {
  check_rows("Block", mb, dy.size(), hidden_);
  const int64_t n = mb.rows * hidden_;
  std::vector<T> a(n), b(n), dx1(n);
  mlp_.backward(mb, dy, a);
  norm2_.backward(mb, a, b);
  k_.add(dy.data(), b.data(), dx1.data(), n);
  mixer_->backward(mb, dx1, a);
  norm1_.backward(mb, a, b);
  k_.add(dx1.data(), b.data(), dx.data(), n);
}

template class RmsNorm<float>;
template class RmsNorm<double>;
template class Mlp<float>;
template class Mlp<double>;
template class Block<float>;
template class Block<double>;

}  // namespace dcp::model
