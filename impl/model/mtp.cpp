// See mtp.h.
#include "model/mtp.h"

#include "core/nvtx.h"
#include "model/roll.h"

namespace dcp::model {

template <typename T>
MtpHead<T>::MtpHead(const std::string& name, const ModelConfig& c, ParamStore<T>& p,
                    Kernels<T>& k, ParamId embedding, ParamId output, comm::Communicator* own)
    : CpAware(own), c_(c), p_(p), k_(k), emb_(embedding), out_(output),
      w_eh_(p.add(name + ".eh_proj.weight", {c.hidden, 2 * c.hidden}, ParamInit::normal_std(c.init_std))),
      norm_e_(name + ".enorm", c.hidden, c.norm_eps, p, k),
      norm_h_(name + ".hnorm", c.hidden, c.norm_eps, p, k),
      norm_o_(name + ".final_norm", c.hidden, c.norm_eps, p, k),
      block_(name + ".block", c, std::make_unique<Attention<T>>(name + ".block.attention", c, p, k, own), p, k) {}

template <typename T>
double MtpHead<T>::forward(const MicroBatchView& mb, std::span<const T> h,
                           std::span<const int32_t> tokens, std::span<const int32_t> labels,
                           std::span<const int32_t> loss_mask, double scale, int64_t* masked_rows) {
  DCP_NVTX_RANGE();
  CpGroupScope scope(*this, *mb.psp);
  const int64_t n = mb.rows;
  const int d = c_.hidden;
  DCP_CHECK(static_cast<int64_t>(h.size()) == n * d && static_cast<int64_t>(tokens.size()) == n &&
                static_cast<int64_t>(labels.size()) == n && static_cast<int64_t>(loss_mask.size()) == n,
            "MtpHead: shapes do not match ", n, " rows");
  comm::Communicator& g = *cp_group();
  tok_ = roll_left_packed(g, mb.thd, tokens, 0);
  lab_ = roll_left_packed(g, mb.thd, labels, 0);
  const auto m = roll_left_packed(g, mb.thd, loss_mask, 0);
  mask_.assign(m.begin(), m.end());
  e_.resize(n * d);
  en_.resize(n * d);
  hn_.resize(n * d);
  cat_.resize(n * 2 * d);
  hp_.resize(n * d);
  hb_.resize(n * d);
  ho_.resize(n * d);
  k_.embedding_fwd(tok_.data(), p_.value(emb_).data(), e_.data(), n, d);
  norm_e_.forward(mb, e_, en_);
  norm_h_.forward(mb, h, hn_);
  for (int64_t i = 0; i < n; ++i) {  // [enorm(e) ; hnorm(h)], Megatron's concatenation order
    std::copy(en_.begin() + i * d, en_.begin() + (i + 1) * d, cat_.begin() + i * 2 * d);
    std::copy(hn_.begin() + i * d, hn_.begin() + (i + 1) * d, cat_.begin() + i * 2 * d + d);
  }
  k_.linear_fwd(cat_.data(), p_.value(w_eh_).data(), hp_.data(), n, 2 * d, d);
  block_.forward(mb, hp_, hb_);
  norm_o_.forward(mb, hb_, ho_);
  std::vector<T> logits(n * c_.vocab);
  dlogits_.resize(n * c_.vocab);
  k_.linear_fwd(ho_.data(), p_.value(out_).data(), logits.data(), n, d, c_.vocab);
  int64_t count = 0;
  for (uint8_t v : mask_) count += v;
  if (masked_rows) *masked_rows = count;
  return k_.cross_entropy(logits.data(), lab_.data(), mask_.data(), scale, dlogits_.data(), n,
                          c_.vocab);
}

template <typename T>
void MtpHead<T>::backward(const MicroBatchView& mb, std::span<T> dh) {
  DCP_NVTX_RANGE();
  CpGroupScope scope(*this, *mb.psp);
  const int64_t n = mb.rows;
  const int d = c_.hidden;
  DCP_CHECK(static_cast<int64_t>(dh.size()) == n * d, "MtpHead backward: dh has ", dh.size(),
            " elements, expected ", n, " x ", d);
  std::vector<T> a(n * d), b(n * d), dcat(n * 2 * d), den(n * d), dhn(n * d);
  k_.linear_bwd(ho_.data(), p_.value(out_).data(), dlogits_.data(), a.data(),
                p_.grad(out_).data(), n, d, c_.vocab);
  norm_o_.backward(mb, a, b);
  block_.backward(mb, b, a);
  k_.linear_bwd(cat_.data(), p_.value(w_eh_).data(), a.data(), dcat.data(),
                p_.grad(w_eh_).data(), n, 2 * d, d);
  for (int64_t i = 0; i < n; ++i) {
    std::copy(dcat.begin() + i * 2 * d, dcat.begin() + i * 2 * d + d, den.begin() + i * d);
    std::copy(dcat.begin() + i * 2 * d + d, dcat.begin() + (i + 1) * 2 * d, dhn.begin() + i * d);
  }
  norm_e_.backward(mb, den, b);
  k_.embedding_bwd(tok_.data(), b.data(), p_.grad(emb_).data(), n, d);
  norm_h_.backward(mb, dhn, dh);
}

template class MtpHead<float>;
template class MtpHead<double>;

}  // namespace dcp::model
