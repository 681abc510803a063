// Verifiable attention inputs: every element is a function of (seed, tensor, global element
// index), so each CP rank builds its own zigzag shard AND the full-batch float64 reference
// without gathering anything (nccl-tests' "verifiable" idea). Used by the tests and by
// `dcpbench cp-attn`, so a failure in one reproduces in the other.
//   values: uniform in [-1, 1) (random, non-zero with probability 1, seeded);
//   tensors: [rows, row_elems] row-major, rows in sequence (THD) order.
#pragma once

#include "attn/thd.h"
#include "core/rng.h"

#include <cstdint>
#include <vector>

namespace dcp::attn {

enum InputTensor : uint64_t { kQ = 1, kK = 2, kV = 3, kDout = 4 };

inline double input_value(uint64_t seed, uint64_t tensor, int64_t index) {
  return 2.0 * hash_uniform(hash_u64(seed, tensor), static_cast<uint64_t>(index)) - 1.0;
}

// Whole tensor in sequence order, rounded through T (so the float64 reference sees exactly the
// values a float32 run gets).
template <typename T>
std::vector<double> global_tensor(uint64_t seed, uint64_t tensor, int64_t rows, int64_t row_elems) {
  std::vector<double> out(rows * row_elems);
  for (int64_t i = 0; i < rows * row_elems; ++i) out[i] = static_cast<double>(static_cast<T>(input_value(seed, tensor, i)));
  return out;
}

// The rows `rows` (global row indices, e.g. zigzag_rows(b, cp, rank)) of the same tensor.
template <typename T>
std::vector<T> local_tensor(uint64_t seed, uint64_t tensor, const std::vector<int64_t>& rows, int64_t row_elems) {
  std::vector<T> out(rows.size() * row_elems);
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e = 0; e < row_elems; ++e)
      out[t * row_elems + e] = static_cast<T>(input_value(seed, tensor, rows[t] * row_elems + e));
  return out;
}

// This rank's zigzag shard [Tl, row_elems].
template <typename T>
std::vector<T> local_tensor(uint64_t seed, uint64_t tensor, const ThdBatch& b, int cp, int rank, int64_t row_elems) {
  return local_tensor<T>(seed, tensor, zigzag_rows(b, cp, rank), row_elems);
}

}  // namespace dcp::attn
