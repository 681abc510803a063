// See attention.h.
#include "model/attention.h"

#include "core/nvtx.h"

namespace dcp::model {

template <typename T>
Attention<T>::Attention(const std::string& name, const ModelConfig& c, ParamStore<T>& p,
                        Kernels<T>& k, comm::Communicator* own_group)
    : CpAware(own_group), c_(c), p_(p), k_(k),
      wq_(p.add(name + ".q.weight", {c.q_width(), c.hidden}, ParamInit::normal_std(c.init_std))),
      wk_(p.add(name + ".k.weight", {c.kv_width(), c.hidden}, ParamInit::normal_std(c.init_std))),
      wv_(p.add(name + ".v.weight", {c.kv_width(), c.hidden}, ParamInit::normal_std(c.init_std))),
      wo_(p.add(name + ".o.weight", {c.hidden, c.q_width()}, ParamInit::normal_std(c.init_std))) {
  shape_.heads = c.heads;
  shape_.kv_heads = c.kv_heads;
  shape_.head_dim = c.head_dim;
  shape_.causal = true;
}

template <typename T>
void Attention<T>::forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) {
  DCP_NVTX_RANGE();
  CpGroupScope scope(*this, *mb.psp);
  const int64_t n = mb.rows;
  const int h = c_.hidden, qw = c_.q_width(), kw = c_.kv_width();
  DCP_CHECK(static_cast<int64_t>(x.size()) == n * h && static_cast<int64_t>(y.size()) == n * h,
            "Attention: x has ", x.size(), " elements, y ", y.size(), ", expected ", n, " x ", h);
  x_.assign(x.begin(), x.end());
  q_.resize(n * qw);
  kk_.resize(n * kw);
  v_.resize(n * kw);
  o_.resize(n * qw);
  lse_.resize(n * c_.heads);
  k_.linear_fwd(x.data(), p_.value(wq_).data(), q_.data(), n, h, qw);
  k_.linear_fwd(x.data(), p_.value(wk_).data(), kk_.data(), n, h, kw);
  k_.linear_fwd(x.data(), p_.value(wv_).data(), v_.data(), n, h, kw);
  k_.rope(q_.data(), mb.positions.data(), n, c_.heads, c_.head_dim, c_.rope_theta, false);
  k_.rope(kk_.data(), mb.positions.data(), n, c_.kv_heads, c_.head_dim, c_.rope_theta, false);
  k_.attention_fwd(c_.attn_algo, *cp_group(), mb.thd, shape_, q_.data(), kk_.data(), v_.data(),
                   o_.data(), lse_.data());
  k_.linear_fwd(o_.data(), p_.value(wo_).data(), y.data(), n, qw, h);
}

template <typename T>
void Attention<T>::backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) {
  DCP_NVTX_RANGE();
  CpGroupScope scope(*this, *mb.psp);
  const int64_t n = mb.rows;
  const int h = c_.hidden, qw = c_.q_width(), kw = c_.kv_width();
  DCP_CHECK(static_cast<int64_t>(dy.size()) == n * h && static_cast<int64_t>(dx.size()) == n * h,
            "Attention backward: dy has ", dy.size(), " elements, expected ", n, " x ", h);
  std::vector<T> dout(n * qw), dq(n * qw), dk(n * kw), dv(n * kw), tmp(n * h);
  k_.linear_bwd(o_.data(), p_.value(wo_).data(), dy.data(), dout.data(), p_.grad(wo_).data(), n,
                qw, h);
  k_.attention_bwd(c_.attn_algo, *cp_group(), mb.thd, shape_, q_.data(), kk_.data(), v_.data(),
                   o_.data(), lse_.data(), dout.data(), dq.data(), dk.data(), dv.data());
  // RoPE is a rotation: its backward rotates the gradient back.
  k_.rope(dq.data(), mb.positions.data(), n, c_.heads, c_.head_dim, c_.rope_theta, true);
  k_.rope(dk.data(), mb.positions.data(), n, c_.kv_heads, c_.head_dim, c_.rope_theta, true);
  k_.linear_bwd(x_.data(), p_.value(wq_).data(), dq.data(), dx.data(), p_.grad(wq_).data(), n, h, qw);
  k_.linear_bwd(x_.data(), p_.value(wk_).data(), dk.data(), tmp.data(), p_.grad(wk_).data(), n, h, kw);
  k_.add_inplace(dx.data(), tmp.data(), n * h);
  k_.linear_bwd(x_.data(), p_.value(wv_).data(), dv.data(), tmp.data(), p_.grad(wv_).data(), n, h, kw);
  k_.add_inplace(dx.data(), tmp.data(), n * h);
}

template class Attention<float>;
template class Attention<double>;

}  // namespace dcp::model
