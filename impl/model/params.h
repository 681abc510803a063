// Flat parameter and gradient storage of one model replica. Layers register named tensors at
// construction; values and gradients live in two contiguous buffers, so the executor all-reduces
// gradients and AdamW updates parameters over one span each.
//
// Initialisation is a pure function of (seed, parameter name, element index): every rank, every
// strategy and every backend starts from bit-identical parameters, however the model is built.
//   normal_std(s): uniform in [-s*sqrt(3), s*sqrt(3)) (variance s^2; a uniform keeps the draw
//                  stateless), Megatron's init_method_normal(std) in spirit;
//   constant(c):   every element c (norm weights 1, as Megatron's RMSNorm).
//   uniform(a, b): e.g. Mamba's A_log = log(uniform(1, 16)) (Mamba-2 reference initialisation).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace dcp::model {

struct ParamInit {
  enum class Kind { uniform_std, constant, uniform_range, log_uniform_range } kind = Kind::uniform_std;
  double a = 0.02, b = 0;
  static ParamInit normal_std(double s) { return {Kind::uniform_std, s, 0}; }
  static ParamInit constant(double c) { return {Kind::constant, c, 0}; }
  static ParamInit uniform(double lo, double hi) { return {Kind::uniform_range, lo, hi}; }
  static ParamInit log_uniform(double lo, double hi) { return {Kind::log_uniform_range, lo, hi}; }
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat buffers
  int64_t size = 0;
  ParamInit init;
};

using ParamId = int;

template <typename T>
class ParamStore {
 public:
  explicit ParamStore(uint64_t seed) : seed_(seed) {}

  // Registers a tensor (before finalize()); names must be unique.
  ParamId add(const std::string& name, std::vector<int64_t> shape, ParamInit init);
  // Allocates the buffers and initialises every value; gradients start at 0.
  void finalize();
  bool finalized() const { return finalized_; }
  // Every value back to its initial one (the same function of seed, name and index as
  // finalize()); gradients to 0. A run restarted here is bitwise a fresh one.
  void reinitialize();

  std::span<T> value(ParamId id) { return {values_.data() + info(id).offset, static_cast<size_t>(info(id).size)}; }
  std::span<const T> value(ParamId id) const { return {values_.data() + info(id).offset, static_cast<size_t>(info(id).size)}; }
  std::span<T> grad(ParamId id) { return {grads_.data() + info(id).offset, static_cast<size_t>(info(id).size)}; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }
  std::span<T> grads() { return grads_; }
  std::span<const T> grads() const { return grads_; }
  void zero_grads();

  const ParamInfo& info(ParamId id) const {
    DCP_CHECK(id >= 0 && id < static_cast<int>(infos_.size()), "ParamStore: bad id ", id);
    return infos_[id];
  }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  int64_t total() const { return total_; }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  bool finalized_ = false;
  int64_t total_ = 0;
  std::vector<ParamInfo> infos_;
  std::vector<T> values_, grads_;
};

// The initial value of element `index` of the parameter `name` (T-independent, in double).
double init_value(uint64_t seed, const std::string& name, int64_t index, const ParamInit& init);

// The largest relative difference of `got` from `ref` over the model's tensors (`tensors`, the
// ParamStore layout both flat buffers share): per tensor max |got - ref| / max |ref| (attn/compare.h;
// the absolute difference where the tensor's reference is all zero), infinity on any non-finite
// mismatch; `tensor` is the index of the worst one. Over the whole flat buffer the embedding and
// output tensors would set the scale, and a small tensor's gradient (Mamba's A_log, dt_bias: ~1e-7
// of it) could be wholly wrong and pass. Used by `dcpbench converge` and the model and executor
// tests.
struct TensorDiff {
  double rel = 0;
  int tensor = -1;
};
template <typename T>
TensorDiff tensor_rel_diff(std::span<const T> got, std::span<const double> ref, const std::vector<ParamInfo>& tensors);
// The same per tensor: one relative difference for each of `tensors` (tensor_rel_diff is their
// largest). `dcpbench converge` bounds each tensor of its float32 same-parameter comparison by
// that tensor's own drift.
template <typename T>
std::vector<double> tensor_rel_diffs(std::span<const T> got, std::span<const double> ref,
                                     const std::vector<ParamInfo>& tensors);

}  // namespace dcp::model
