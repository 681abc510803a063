// Multi-token prediction head, one depth, predicting token t + 2 (DeepSeek-V3 §2.2; Megatron
// MultiTokenPredictionLayer, reference/megatron-dynamic-cp.md §5):
//   tok'   = roll(tokens)            token t+1 at row t   (packed, CP-aware roll, roll.h)
//   lab'   = roll(labels), mask' = roll(loss_mask)        target t+2, nothing across sequences
//   h'     = W_eh · [RMSNorm_e(Emb(tok')) ; RMSNorm_h(h)]  [rows, 2*hidden] -> [rows, hidden]
//   h'     = Block(h')                (attention + SwiGLU; attention switches CP group itself)
//   logits = RMSNorm_o(h') · W_out^T  (embedding and output head shared with the main model)
//   loss   = scale * sum over mask' of CE(logits, lab')
// h is the main model's last hidden state after its final norm, the one the main logits read
// (Megatron moves final_layernorm to the decoder's last layer when MTP is on and passes that
// output to the MTP block; model.cpp cites the lines). The head is CpAware: forward and backward take the
// micro-batch's group through a CpGroupScope (Megatron saves self.cp_group, swaps in
// packed_seq_params.cp_group and restores it, §5).
#pragma once

#include <memory>

#include "model/attention.h"
#include "model/layers.h"

namespace dcp::model {

template <typename T>
class MtpHead final : public CpAware {
 public:
  MtpHead(const std::string& name, const ModelConfig& c, ParamStore<T>& p, Kernels<T>& k,
          ParamId embedding, ParamId output, comm::Communicator* own_group = nullptr);
  // The MTP block's attention is built with the same own group.

  // h: [rows, hidden]; tokens, labels: [rows] int32; loss_mask: [rows] 0/1 — this rank's shards
  // of the main next-token inputs. Returns the summed CE over the rolled mask's rows (not
  // scaled) and writes their count to *masked_rows; keeps the activations for backward, which
  // uses d loss / d logits = scale * (softmax - onehot).
  double forward(const MicroBatchView& mb, std::span<const T> h, std::span<const int32_t> tokens,
                 std::span<const int32_t> labels, std::span<const int32_t> loss_mask,
                 double scale, int64_t* masked_rows);
  // dh: [rows, hidden], overwritten with d loss / d h. Adds every parameter gradient (shared
  // embedding and output included).
  void backward(const MicroBatchView& mb, std::span<T> dh);
  Block<T>& block() { return block_; }

 private:
  ModelConfig c_;
  ParamStore<T>& p_;
  Kernels<T>& k_;
  ParamId emb_, out_, w_eh_;
  RmsNorm<T> norm_e_, norm_h_, norm_o_;
  Block<T> block_;
  std::vector<int32_t> tok_, lab_;
  std::vector<uint8_t> mask_;
  std::vector<T> e_, en_, hn_, cat_, hp_, hb_, ho_, dlogits_;
};

}  // namespace dcp::model
