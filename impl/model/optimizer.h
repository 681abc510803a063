// AdamW over a ParamStore (hyper-parameters and the update in kernels.h, AdamWHyper).
// Weight decay only on matrices: Megatron's get_param_groups puts biases and 1-D parameters
// (norm weights) in the no-weight-decay group; here every parameter with >= 2 dimensions decays.
#pragma once

#include <algorithm>
#include <vector>

#include "model/kernels.h"
#include "model/params.h"

namespace dcp::model {

template <typename T>
class AdamW {
 public:
  AdamW(const ParamStore<T>& p, const AdamWHyper& h) : h_(h), m_(p.total(), T(0)), v_(p.total(), T(0)) {}
  // One update from p.grads() (already reduced over every rank); step() counts from 1.
  void step(ParamStore<T>& p, Kernels<T>& k) {
    ++t_;
    for (const ParamInfo& info : p.infos()) {
      const double wd = info.shape.size() >= 2 ? h_.weight_decay : 0.0;
      k.adamw(p.values().data() + info.offset, p.grads().data() + info.offset,
              m_.data() + info.offset, v_.data() + info.offset, info.size, h_, wd, t_);
    }
  }
  int steps() const { return t_; }
  // Moments to 0 and the step count to 0: the next step() is a fresh optimizer's first.
  void reset() {
    std::fill(m_.begin(), m_.end(), T(0));
    std::fill(v_.begin(), v_.end(), T(0));
    t_ = 0;
  }
  const AdamWHyper& hyper() const { return h_; }

 private:
  AdamWHyper h_;
  std::vector<T> m_, v_;
  int t_ = 0;
};

}  // namespace dcp::model
