// The layer interface of the model (forward + hand-written backward) and the per-micro-batch
// view every layer receives.
//
// A layer maps this rank's activations x [rows, width] to y [rows, width], where rows is the
// number of local rows of the micro-batch (the zigzag shard of the group's packed batch,
// attn/thd.h). forward() keeps what backward() needs until the next forward(); backward()
// overwrites dx with dLoss/dx and ADDS the parameter gradients into the ParamStore, so the
// gradients of every micro-batch of a step accumulate.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attn/thd.h"
#include "model/packed_seq.h"

namespace dcp::model {

// One micro-batch on this rank.
struct MicroBatchView {
  const PackedSeqParams* psp = nullptr;  // boundaries, cp size and group (never null)
  attn::ThdBatch thd;                    // = psp->thd()
  int64_t rows = 0;                      // local rows = thd.total_tokens() / psp->cp_size
  int cp_rank = 0;                       // this rank's index in psp->cp_group
  std::vector<int32_t> positions;        // [rows] position of each local row in its sequence

  // Builds the view of `psp` for this rank (rank = psp.cp_group->rank()).
  static MicroBatchView of(const PackedSeqParams& psp);
};

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;
  virtual const char* kind() const = 0;
  virtual void forward(const MicroBatchView& mb, std::span<const T> x, std::span<T> y) = 0;
  virtual void backward(const MicroBatchView& mb, std::span<const T> dy, std::span<T> dx) = 0;
};

}  // namespace dcp::model
