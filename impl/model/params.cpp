// See params.h.
#include "model/params.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"

namespace dcp::model {

namespace {
// FNV-1a of the name: a stable 64-bit stream id per parameter.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

double init_value(uint64_t seed, const std::string& name, int64_t index, const ParamInit& init) {
  const double u = hash_uniform(hash_u64(seed, name_hash(name)), static_cast<uint64_t>(index));
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
  values_.assign(total_, T(0));
  grads_.assign(total_, T(0));
  for (const auto& p : infos_)
    for (int64_t i = 0; i < p.size; ++i)
      values_[p.offset + i] = static_cast<T>(init_value(seed_, p.name, i, p.init));
  finalized_ = true;
}

template <typename T>
void ParamStore<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace dcp::model
