// Backend-independent helpers of communicator.h: dtype sizes and names, the elementwise
// reduction used by backends that reduce on the host, wait_all and displacements.
#include "comm/communicator.h"

#include <algorithm>

namespace dcp::comm {

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  DCP_FAIL("unknown dtype ", static_cast<int>(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

namespace {
template <typename T>
void reduce_typed(T* acc, const T* x, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      for (size_t i = 0; i < n; ++i) acc[i] += x[i];
      return;
    case ReduceOp::max:
      for (size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
      return;
    case ReduceOp::min:
      for (size_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], x[i]);
      return;
  }
  DCP_FAIL("unknown reduce op ", static_cast<int>(op));
}
}  // namespace

void reduce_into(void* acc, const void* x, size_t count, DType type, ReduceOp op) {
  switch (type) {
    case DType::f32:
      return reduce_typed(static_cast<float*>(acc), static_cast<const float*>(x), count, op);
    case DType::f64:
      return reduce_typed(static_cast<double*>(acc), static_cast<const double*>(x), count, op);
    case DType::i32:
      return reduce_typed(static_cast<int32_t*>(acc), static_cast<const int32_t*>(x), count, op);
    case DType::i64:
      return reduce_typed(static_cast<int64_t*>(acc), static_cast<const int64_t*>(x), count, op);
  }
  DCP_FAIL("unknown dtype ", static_cast<int>(type));
}

void wait_all(std::vector<RequestPtr>& requests) {
  for (auto& r : requests) r->wait();
}

std::vector<size_t> displacements(std::span<const size_t> counts) {
  std::vector<size_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

}  // namespace dcp::comm
