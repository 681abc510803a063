// `dcpbench cp-attn`: run ring or all-gather CP attention (forward + backward) over a real
// communicator backend and check every rank's rows against the float64 reference.
//
// Inputs are generated from (seed, tensor, global element index) exactly as impl/attn/tests do,
// so every rank builds its own zigzag shard and the whole-batch reference without gathering
// (nccl-tests' verifiable idea). The only cross-rank traffic besides the attention itself is one
// all-reduce (max) of the per-rank errors per group size, so rank 0 can print global results.
//
// One line per CP group size (every size of comm::GroupRegistry with all_groups, as Dynamic-CP
// switches groups per micro-batch; else only the whole pool), printed by rank 0, each with the
// max relative error (compare.h: max |got - ref| / max |ref|, over all ranks) of out, lse, dq,
// dk, dv and PASS/FAIL against attn/tolerances.h. Returns 0 if every line passes, 1 otherwise.
// Bad arguments throw dcp::InputError naming the flag and value, before any backend starts.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace dcp::harness {

struct CpAttnArgs {
  std::string backend = "threads";  // threads | mpi (mpi: one process per rank under mpirun)
  int ranks = 4;                    // threads backend only; mpi uses the world size
  std::string algo = "ring";        // ring | all_gather
  std::string dtype = "f64";        // f64 | f32
  std::vector<int32_t> lengths{1, 7, 8, 9, 300};  // real lengths, each padded to 2*cp
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 64;
  uint64_t seed = 1;
  bool all_groups = true;
  double tolerance = 0;  // relative tolerance; 0 = the table in attn/tolerances.h for the dtype
};

// Throws InputError for arguments no backend could run (does not start any backend).
void validate(const CpAttnArgs& a);

// Runs the check; rank 0 writes the report to `out`. Returns the exit code (0 pass, 1 fail).
// With backend "mpi" it initializes MPI itself (comm::MpiRuntime) and must be run under mpirun;
// in a build without MPI it throws InputError.
int run_cp_attn(const CpAttnArgs& a, std::ostream& out);

}  // namespace dcp::harness
