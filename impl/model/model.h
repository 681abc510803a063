// The model of config.h as one object: parameters (ParamStore), the layers, and one call that
// runs a micro-batch forward and backward on this rank and accumulates the gradients.
//
// Loss (Megatron's --calculate-per-token-loss, reference §1): the executor passes
// scale.main = 1 / (real next-token targets in the WHOLE global batch) and
// scale.mtp = mtp_loss_weight / (real t+2 targets in the whole global batch), so the gradient
// summed over every micro-batch and rank is the gradient of
//   L = sum CE_main / N_main + w * sum CE_mtp / N_mtp
// whatever the plan: unequal token counts per rank and per micro-batch are fine, and a padded
// row (loss_mask 0) contributes nothing.
#pragma once

#include <memory>
#include <vector>

#include "model/config.h"
#include "model/kernels.h"
#include "model/layers.h"
#include "model/mtp.h"
#include "model/packed_seq.h"
#include "model/params.h"

namespace dcp::model {

// One micro-batch on this rank: its packed params and its zigzag shard of the per-token inputs.
struct MicroBatchInput {
  PackedSeqParams psp;
  std::vector<int32_t> tokens;     // [rows] token ids (padding rows: 0)
  std::vector<int32_t> labels;     // [rows] next-token targets (any value where loss_mask = 0)
  std::vector<int32_t> loss_mask;  // [rows] 1 where a real next-token target exists, else 0
};

struct LossScale {
  double main = 1.0;
  double mtp = 0.0;
};

// Unscaled sums over this rank's rows, and the rows that entered each.
struct LossSums {
  double main = 0;
  double mtp = 0;
  int64_t main_rows = 0;
  int64_t mtp_rows = 0;
};

template <typename T>
class Model {
 public:
  // static_group: the group every CP-aware module owns and returns to after each micro-batch
  // (Megatron builds its modules with the static CP group; nullptr = none).
  Model(const ModelConfig& c, Kernels<T>& k, comm::Communicator* static_group = nullptr);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return c_; }
  ParamStore<T>& params() { return p_; }
  const ParamStore<T>& params() const { return p_; }
  Kernels<T>& kernels() { return k_; }

  // Forward + backward of one micro-batch; gradients add into params().grads().
  LossSums forward_backward(const MicroBatchInput& in, const LossScale& scale);

  // Every CP-aware module (attention and Mamba mixers, the MTP head and its attention), for
  // checks that each is back on its own group after a micro-batch.
  std::vector<const CpAware*> cp_modules() const;

 private:
  ModelConfig c_;
  Kernels<T>& k_;
  ParamStore<T> p_;
  ParamId emb_, out_;
  std::vector<std::unique_ptr<Block<T>>> blocks_;
  std::unique_ptr<RmsNorm<T>> final_norm_;
  std::unique_ptr<MtpHead<T>> mtp_;
  std::vector<std::vector<T>> acts_;  // input of every block, then the last block's output
  std::vector<T> hf_, dlogits_;
};

// The layer for a mixer kind (attention.h or mamba.h).
template <typename T>
std::unique_ptr<Layer<T>> make_mixer(MixerKind kind, const std::string& name, const ModelConfig& c,
                                     ParamStore<T>& p, Kernels<T>& k,
                                     comm::Communicator* own_group = nullptr);

}  // namespace dcp::model
