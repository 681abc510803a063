// PackedSeqParams: what travels with every micro-batch into the model (Megatron's
// packed_seq_params with its Dynamic-CP fields), and the scope object through which every
// CP-aware module takes the micro-batch's CP group and gives its own back afterwards.
// Source: reference/megatron-dynamic-cp.md §1 (get_batch_on_this_rank_for_sequence_packing
// builds PackedSeqParams(cu_seqlens, cu_seqlens_padded, max_seqlen, local_cp_size, cp_group))
// and §5 (TEDotProductAttention / MambaMixer / MultiTokenPredictionLayer save their group,
// switch to packed_seq_params.cp_group for the micro-batch and restore it).
//
// Invariants:
//   - cu_seqlens / cu_seqlens_padded describe the GLOBAL packed batch of the group (identical on
//     every rank of cp_group); each rank holds the zigzag shard of it (attn/thd.h), so a rank has
//     total_tokens / cp_size local rows.
//   - cp_group->size() == cp_size; cp_group is never null once the executor hands it over
//     (a group of size 1 is the single-rank group, as Megatron's CP size 1 means "no CP").
//   - Unlike Megatron, real and padded boundaries are kept apart (no cu_seqlens_padded-as-real
//     workaround, §1): padding rows never attend, are never attended and never enter the loss.
//   - CpGroupScope restores the module's own group in its destructor, so the group is restored
//     also when the forward throws (Megatron's TE path restores only for static CP > 1, §7q;
//     here every module restores, always).
#pragma once

#include <cstdint>
#include <vector>

#include "attn/thd.h"
#include "comm/communicator.h"
#include "core/error.h"

namespace dcp::model {

struct PackedSeqParams {
  std::vector<int32_t> cu_seqlens;         // [batch + 1] real lengths, prefix sums
  std::vector<int32_t> cu_seqlens_padded;  // [batch + 1] padded lengths (each % 2*cp_size == 0)
  int32_t max_seqlen = 0;                  // max padded length of one sequence
  int cp_size = 1;                         // Megatron's local_cp_size
  comm::Communicator* cp_group = nullptr;  // this rank's group of size cp_size

  attn::ThdBatch thd() const { return attn::ThdBatch{cu_seqlens, cu_seqlens_padded}; }
  int64_t local_rows() const { return cu_seqlens_padded.back() / cp_size; }
  // Throws unless the fields agree with each other (sizes, group size, 2*cp divisibility).
  void validate() const;
};

// Builds the params of a group's batch from real lengths, each padded to a multiple of
// 2*cp_size (and to at least `pad_to` rows when pad_to > 0: the static bshd layout, where every
// sample occupies max_seqlen rows).
PackedSeqParams make_packed_seq_params(const std::vector<int32_t>& lengths, int cp_size,
                                       comm::Communicator* cp_group, int64_t pad_to = 0);

// A module that runs under a CP group: it has its own group (the static one it was built with;
// nullptr = no CP) and uses the micro-batch's group while a CpGroupScope is alive.
class CpAware {
 public:
  virtual ~CpAware() = default;
  comm::Communicator* cp_group() const { return cp_group_; }
  // Group size the module currently runs with (1 without a group).
  int cp_size() const { return cp_group_ ? cp_group_->size() : 1; }

 protected:
  explicit CpAware(comm::Communicator* own = nullptr) : cp_group_(own) {}
  // Checks the module can run on a group of `size` ranks (e.g. Mamba: size divides the heads);
  // throws InputError naming the module and the size. Called before the group is switched.
  virtual void check_cp_size(int /*size*/) const {}

 private:
  friend class CpGroupScope;
  comm::Communicator* cp_group_;
};

// Switches `module` to psp.cp_group for its lifetime and restores the module's previous group
// in the destructor (also during stack unwinding).
class CpGroupScope {
 public:
  CpGroupScope(CpAware& module, const PackedSeqParams& psp) : module_(module), saved_(module.cp_group_) {
    DCP_CHECK(psp.cp_group != nullptr && psp.cp_group->size() == psp.cp_size,
              "CpGroupScope: packed_seq_params has cp_size ", psp.cp_size, " but its group has ",
              psp.cp_group ? psp.cp_group->size() : 0, " ranks");
    module.check_cp_size(psp.cp_size);
    module.cp_group_ = psp.cp_group;
  }
  ~CpGroupScope() { module_.cp_group_ = saved_; }
  CpGroupScope(const CpGroupScope&) = delete;
  CpGroupScope& operator=(const CpGroupScope&) = delete;

 private:
  CpAware& module_;
  comm::Communicator* saved_;
};

}  // namespace dcp::model
