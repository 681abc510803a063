// See model.h.
#include "model/model.h"

#include "core/nvtx.h"
#include "model/attention.h"
#include "model/mamba.h"

namespace dcp::model {

template <typename T>
std::unique_ptr<Layer<T>> make_mixer(MixerKind kind, const std::string& name, const ModelConfig& c,
                                     ParamStore<T>& p, Kernels<T>& k,
                                     comm::Communicator* own_group) {
  switch (kind) {
    case MixerKind::attention:
      return std::make_unique<Attention<T>>(name + ".attention", c, p, k, own_group);
    case MixerKind::mamba:
      return std::make_unique<MambaMixer<T>>(name + ".mamba", c, p, k, own_group);
  }
  DCP_FAIL("model: unknown mixer kind ", static_cast<int>(kind));
}

template <typename T>
Model<T>::Model(const ModelConfig& c, Kernels<T>& k, comm::Communicator* static_group)
    : c_(c), k_(k), p_(c.seed) {
  validate(c);
  emb_ = p_.add("embedding.weight", {c.vocab, c.hidden}, ParamInit::normal_std(c.init_std));
  for (size_t b = 0; b < c.mixers.size(); ++b) {
    const std::string name = "blocks." + std::to_string(b);
    blocks_.push_back(std::make_unique<Block<T>>(name, c, make_mixer<T>(c.mixers[b], name, c, p_, k, static_group), p_, k));
  }
  final_norm_ = std::make_unique<RmsNorm<T>>("final_norm", c.hidden, c.norm_eps, p_, k);
  out_ = p_.add("output.weight", {c.vocab, c.hidden}, ParamInit::normal_std(c.init_std));
  if (c.mtp) mtp_ = std::make_unique<MtpHead<T>>("mtp", c, p_, k, emb_, out_, static_group);
  p_.finalize();
}

template <typename T>
LossSums Model<T>::forward_backward(const MicroBatchInput& in, const LossScale& scale) {
  DCP_NVTX_RANGE();
  in.psp.validate();
  const MicroBatchView mb = MicroBatchView::of(in.psp);
  const int64_t n = mb.rows;
  const int d = c_.hidden, V = c_.vocab;
  DCP_CHECK(static_cast<int64_t>(in.tokens.size()) == n && static_cast<int64_t>(in.labels.size()) == n &&
                static_cast<int64_t>(in.loss_mask.size()) == n,
            "Model: tokens/labels/loss_mask have ", in.tokens.size(), "/", in.labels.size(), "/",
            in.loss_mask.size(), " rows, the shard has ", n);
  for (int64_t i = 0; i < n; ++i)
    DCP_CHECK(in.tokens[i] >= 0 && in.tokens[i] < V, "Model: token ", in.tokens[i], " at row ", i,
              " outside the vocabulary of ", V);
  LossSums sums;
  // Forward.
  acts_.resize(blocks_.size() + 1);
  for (auto& a : acts_) a.resize(n * d);
  k_.embedding_fwd(in.tokens.data(), p_.value(emb_).data(), acts_[0].data(), n, d);
  for (size_t b = 0; b < blocks_.size(); ++b) blocks_[b]->forward(mb, acts_[b], acts_[b + 1]);
  const std::vector<T>& last = acts_.back();
  hf_.resize(n * d);
  final_norm_->forward(mb, last, hf_);
  std::vector<T> logits(n * V);
  dlogits_.resize(n * V);
  k_.linear_fwd(hf_.data(), p_.value(out_).data(), logits.data(), n, d, V);
  std::vector<uint8_t> mask(in.loss_mask.begin(), in.loss_mask.end());
  for (uint8_t m : mask) sums.main_rows += m;
  sums.main = k_.cross_entropy(logits.data(), in.labels.data(), mask.data(), scale.main,
                               dlogits_.data(), n, V);
  // The MTP head reads the decoder's output after the final norm, as the main logits do: with MTP,
  // Megatron places final_layernorm with the decoder's last layer (transformer_block.py
  // has_final_layernorm_in_this_stage, d98e8a64dd:399-426) and gpt_model.py passes that output
  // to self.mtp (:711-726), which applies its own hnorm on top (multi_token_prediction.py).
  if (mtp_) sums.mtp = mtp_->forward(mb, hf_, in.tokens, in.labels, in.loss_mask, scale.mtp, &sums.mtp_rows);

  // Backward.
  std::vector<T> dhf(n * d), dx(n * d), tmp(n * d);
  k_.linear_bwd(hf_.data(), p_.value(out_).data(), dlogits_.data(), dhf.data(),
                p_.grad(out_).data(), n, d, V);
  if (mtp_) {  // both heads' gradients meet at the final norm's output
    mtp_->backward(mb, tmp);
    k_.add_inplace(dhf.data(), tmp.data(), n * d);
  }
  final_norm_->backward(mb, dhf, dx);
  for (size_t b = blocks_.size(); b-- > 0;) {
    blocks_[b]->backward(mb, dx, tmp);
    dx.swap(tmp);
  }
  k_.embedding_bwd(in.tokens.data(), dx.data(), p_.grad(emb_).data(), n, d);
  return sums;
}

template <typename T>
std::vector<const CpAware*> Model<T>::cp_modules() const {
  std::vector<const CpAware*> out;
  for (const auto& b : blocks_)
    if (const auto* m = dynamic_cast<const CpAware*>(&b->mixer())) out.push_back(m);
  if (mtp_) {
    out.push_back(mtp_.get());
    if (const auto* m = dynamic_cast<const CpAware*>(&mtp_->block().mixer())) out.push_back(m);
  }
  return out;
}

template class Model<float>;
template class Model<double>;
template std::unique_ptr<Layer<float>> make_mixer<float>(MixerKind, const std::string&,
    const ModelConfig&, ParamStore<float>&, Kernels<float>&, comm::Communicator*);
template std::unique_ptr<Layer<double>> make_mixer<double>(MixerKind, const std::string&,
    const ModelConfig&, ParamStore<double>&, Kernels<double>&, comm::Communicator*);

}  // namespace dcp::model
