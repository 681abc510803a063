// Context-parallel attention over packed THD batches, on any comm::Communicator (the CP group).
// Sources: reference/megatron-dynamic-cp.md §4.2 (ring / P2P, TE AttnFuncWithCPAndKVP2P) and
// §4.3 (all-gather); docs/cp-ring.md walks through cp=2 with numbers.
//
// Every variant has the same signature. All tensors are this rank's zigzag shard (thd.h) of the
// global tensors: Tl = b.total_tokens() / cp rows, with cp = group.size(), r = group.rank():
//   q, out, dout, dq : [Tl, heads, d]      k, v, dk, dv : [Tl, kv_heads, d]      lse : [Tl, heads]
// `b` is the global batch (identical on every rank of the group). Results equal the float64
// reference (attn_ref.h) applied to the whole batch, restricted to this rank's rows, up to
// rounding (tolerances.h).
//
// Ring (causal): cp steps; at step i the rank holds the K/V of rank src = (r - i) mod cp and
// passes it on to r + 1 while computing (overlap). Step types (ring_step_type):
//   i = 0       diagonal : all local Q x all local KV, causal mask
//   src < r     lower    : all local Q x first half (front chunk) of src's KV, no mask needed
//   src > r     upper    : second half (back chunk) of local Q x all of src's KV, no mask needed
// (non-causal: every step is full x full). Partial results are merged with the LSE merge
// (attn_tiles.h). Backward runs the same ring (to r + 1, from the rank's own K/V); dK/dV of src
// travel with its K/V and reach their owner after the last step: 2 cp - 1 transfers (cp - 1 K/V,
// cp dK/dV, the last one not overlapped). TransformerEngine's backward instead starts from the
// K/V its forward received last and runs the ring in reverse (to r - 1), ending on the diagonal:
// 2 (cp - 1) transfers (TE d0067d0 context_parallel.py, AttnFuncWithCPAndKVP2P: forward 2087
// keeps the last K/V; backward 2229-2230, 2487-2492). Same results; this reference keeps no forward buffers. The cost
// model charges TE's pattern (cost/time_model.cpp, layer_times).
// All-gather: K and V are all-gathered and put back in sequence order; each rank computes its
// front and back chunk against their causal prefixes; backward reduce-scatters dK/dV.
#pragma once

#include <span>

#include "attn/attn_shape.h"
#include "attn/thd.h"
#include "comm/communicator.h"

namespace dcp::attn {

enum class CpAlgo { ring, all_gather };
const char* cp_algo_name(CpAlgo a);

enum class RingStep { diagonal, lower, upper, full };
const char* ring_step_name(RingStep t);
// Step type of ring step `step` on `rank` of a group of `cp` (see above).
RingStep ring_step_type(int cp, int rank, int step, bool causal);

template <typename T>
using CpAttnFwdFn = void (*)(comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                             std::span<const T> q, std::span<const T> k, std::span<const T> v,
                             std::span<T> out, std::span<T> lse);
template <typename T>
using CpAttnBwdFn = void (*)(comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                             std::span<const T> q, std::span<const T> k, std::span<const T> v,
                             std::span<const T> out, std::span<const T> lse,
                             std::span<const T> dout, std::span<T> dq, std::span<T> dk,
                             std::span<T> dv);

// T = float or double (the scalar type of inputs, outputs and accumulation).
template <typename T>
void ring_attn_fwd(comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                   std::span<const T> q, std::span<const T> k, std::span<const T> v,
                   std::span<T> out, std::span<T> lse);
template <typename T>
void ring_attn_bwd(comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                   std::span<const T> q, std::span<const T> k, std::span<const T> v,
                   std::span<const T> out, std::span<const T> lse, std::span<const T> dout,
                   std::span<T> dq, std::span<T> dk, std::span<T> dv);
template <typename T>
void allgather_attn_fwd(comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                        std::span<const T> q, std::span<const T> k, std::span<const T> v,
                        std::span<T> out, std::span<T> lse);
template <typename T>
void allgather_attn_bwd(comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                        std::span<const T> q, std::span<const T> k, std::span<const T> v,
                        std::span<const T> out, std::span<const T> lse, std::span<const T> dout,
                        std::span<T> dq, std::span<T> dk, std::span<T> dv);

template <typename T>
CpAttnFwdFn<T> cp_attn_fwd_fn(CpAlgo a);
template <typename T>
CpAttnBwdFn<T> cp_attn_bwd_fn(CpAlgo a);

// Checks shapes, the batch (divisible by 2*cp) and tensor sizes for Tl rows; throws InputError
// or dcp::Error naming the bad value. Called by every variant.
void check_cp_inputs(const comm::Communicator& group, const ThdBatch& b, const AttnShape& s,
                     size_t q, size_t k, size_t v, size_t out, size_t lse);

}  // namespace dcp::attn
