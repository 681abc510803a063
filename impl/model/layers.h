// The position-wise layers of the model and the transformer block that composes them:
//   RmsNorm  y = x / sqrt(mean(x^2) + eps) * g            (Zhang & Sennrich 2019; Megatron RMSNorm)
//   Mlp      y = W_down (silu(W_gate x) * (W_up x))        (SwiGLU, Shazeer 2020; Llama)
//   Block    x1 = x + Mixer(Norm1(x));  y = x1 + Mlp(Norm2(x1))   (pre-norm residual block)
// None of them talks to other ranks: the mixer of a block (attention.h, mamba.h) does.
#pragma once

#include <memory>
#include <string>

#include "model/config.h"
#include "model/kernels.h"
#include "model/layer.h"
#include "model/params.h"

namespace dcp::model {

template <typename T>
class RmsNorm final : public Layer<T> {
 public:
  RmsNorm(const std::string& name, int width, double eps, ParamStore<T>& p, Kernels<T>& k);
  const char* kind() const override { return "rmsnorm"; }
  void forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) override;
  void backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) override;

 private:
  int width_;
  double eps_;
  ParamStore<T>& p_;
  Kernels<T>& k_;
  ParamId g_;
  std::vector<T> x_, rstd_;
};

template <typename T>
class Mlp final : public Layer<T> {
 public:
  Mlp(const std::string& name, const ModelConfig& c, ParamStore<T>& p, Kernels<T>& k);
  const char* kind() const override { return "swiglu_mlp"; }
  void forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) override;
  void backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) override;

 private:
  int hidden_, ffn_;
  ParamStore<T>& p_;
  Kernels<T>& k_;
  ParamId w_gate_up_, w_down_;  // [2*ffn, hidden] (gate rows first), [hidden, ffn]
  std::vector<T> x_, gate_up_, act_;
};

template <typename T>
class Block final : public Layer<T> {
 public:
  // `mixer` is the block's attention or Mamba layer (width hidden -> hidden).
  Block(const std::string& name, const ModelConfig& c, std::unique_ptr<Layer<T>> mixer,
        ParamStore<T>& p, Kernels<T>& k);
  const char* kind() const override { return mixer_->kind(); }
  void forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) override;
  void backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) override;
  Layer<T>& mixer() { return *mixer_; }

 private:
  int hidden_;
  Kernels<T>& k_;
  RmsNorm<T> norm1_, norm2_;
  std::unique_ptr<Layer<T>> mixer_;
  Mlp<T> mlp_;
  std::vector<T> n1_, m_, x1_, n2_, f_;
};

}  // namespace dcp::model
