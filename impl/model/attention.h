// Self-attention mixer with context parallelism over the micro-batch's CP group:
//   q = x Wq^T, k = x Wk^T, v = x Wv^T          (GQA: kv_heads <= heads)
//   q, k <- RoPE(q, k) at each row's position inside its sequence (zigzag-aware, §4.1: the
//           positions of a shard are those of its two chunks, not 0..rows-1)
//   o = attention(q, k, v) over the group (ring or all-gather, attn/cp_attn.h), causal, THD
//   y = o Wo^T
// CP group switching (reference §5, TEDotProductAttention + Attention.forward): forward and
// backward run inside a CpGroupScope, so the layer uses packed_seq_params.cp_group for the
// micro-batch and its own group again afterwards, also when the forward throws.
#pragma once

#include "model/config.h"
#include "model/kernels.h"
#include "model/layer.h"
#include "model/packed_seq.h"
#include "model/params.h"

namespace dcp::model {

template <typename T>
class Attention final : public Layer<T>, public CpAware {
 public:
  Attention(const std::string& name, const ModelConfig& c, ParamStore<T>& p, Kernels<T>& k,
            comm::Communicator* own_group = nullptr);
  const char* kind() const override { return "attention"; }
  void forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) override;
  void backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) override;

 private:
  ModelConfig c_;
  attn::AttnShape shape_;
  ParamStore<T>& p_;
  Kernels<T>& k_;
  ParamId wq_, wk_, wv_, wo_;
  std::vector<T> x_, q_, kk_, v_, o_, lse_;
};

}  // namespace dcp::model
