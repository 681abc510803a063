// See params.h.
#include "model/params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attn/compare.h"
#include "core/rng.h"

namespace dcp::model {

double init_value(uint64_t seed, const std::string& name, int64_t index, const ParamInit& init) {
  const double u = hash_uniform(hash_u64(seed, fnv1a(name.data(), name.size())), static_cast<uint64_t>(index));
  switch (init.kind) {
    case ParamInit::Kind::uniform_std: return (2.0 * u - 1.0) * std::sqrt(3.0) * init.a;
    case ParamInit::Kind::constant: return init.a;
    case ParamInit::Kind::uniform_range: return init.a + (init.b - init.a) * u;
    case ParamInit::Kind::log_uniform_range: return std::log(init.a + (init.b - init.a) * u);
  }
  DCP_FAIL("init_value: unknown kind");
}

template <typename T>
ParamId ParamStore<T>::add(const std::string& name, std::vector<int64_t> shape, ParamInit init) {
  DCP_CHECK(!finalized_, "ParamStore::add(", name, ") after finalize()");
  for (const auto& p : infos_) DCP_CHECK(p.name != name, "ParamStore: duplicate parameter ", name);
  int64_t size = 1;
  for (int64_t d : shape) {
    DCP_CHECK(d >= 1, "ParamStore: parameter ", name, " has a dimension ", d);
    size *= d;
  }
  infos_.push_back(ParamInfo{name, std::move(shape), total_, size, init});
  total_ += size;
  return static_cast<ParamId>(infos_.size() - 1);
}

template <typename T>
void ParamStore<T>::finalize() {
  DCP_CHECK(!finalized_, "ParamStore::finalize() twice");
  finalized_ = true;
  reinitialize();
}

template <typename T>
void ParamStore<T>::reinitialize() {
  DCP_CHECK(finalized_, "ParamStore::reinitialize() before finalize()");
  values_.assign(total_, T(0));
  grads_.assign(total_, T(0));
  for (const auto& p : infos_)
    for (int64_t i = 0; i < p.size; ++i)
      values_[p.offset + i] = static_cast<T>(init_value(seed_, p.name, i, p.init));
}

template <typename T>
void ParamStore<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template class ParamStore<float>;
template class ParamStore<double>;

template <typename T>
std::vector<double> tensor_rel_diffs(std::span<const T> got, std::span<const double> ref,
                                     const std::vector<ParamInfo>& tensors) {
  DCP_CHECK(got.size() == ref.size(), "tensor_rel_diff: ", got.size(), " values against ", ref.size());
  DCP_CHECK(!tensors.empty() || got.empty(), "tensor_rel_diff: ", got.size(), " values and no tensors");
  std::vector<double> out;
  out.reserve(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto off = static_cast<size_t>(tensors[t].offset), n = static_cast<size_t>(tensors[t].size);
    DCP_CHECK(off + n <= got.size(), "tensor_rel_diff: tensor ", tensors[t].name, " ends at ", off + n,
              ", the buffers hold ", got.size());
    const attn::Comparison c = attn::compare_to_ref<T>(ref.subspan(off, n), got.subspan(off, n), 0);
    out.push_back(c.nonfinite_mismatches > 0 ? std::numeric_limits<double>::infinity() : c.rel_err);
  }
  return out;
}

template <typename T>
TensorDiff tensor_rel_diff(std::span<const T> got, std::span<const double> ref,
                           const std::vector<ParamInfo>& tensors) {
  const std::vector<double> per = tensor_rel_diffs<T>(got, ref, tensors);
  TensorDiff d;
  for (size_t t = 0; t < per.size(); ++t)
    if (d.tensor < 0 || per[t] > d.rel) d = {per[t], static_cast<int>(t)};
  return d;
}
template TensorDiff tensor_rel_diff<float>(std::span<const float>, std::span<const double>,
                                           const std::vector<ParamInfo>&);
template TensorDiff tensor_rel_diff<double>(std::span<const double>, std::span<const double>,
                                            const std::vector<ParamInfo>&);
template std::vector<double> tensor_rel_diffs<float>(std::span<const float>, std::span<const double>,
                                                     const std::vector<ParamInfo>&);
template std::vector<double> tensor_rel_diffs<double>(std::span<const double>, std::span<const double>,
                                                      const std::vector<ParamInfo>&);

}  // namespace dcp::model
