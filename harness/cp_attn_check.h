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

// The size of the check, estimated from the arguments alone (before anything is allocated).
// reference_units = sum over the runs of the float64 reference of sum_i L_i^2 * heads * head_dim
// (L_i padded to 2*cp), where every rank of every group size runs the whole-batch reference
// (--backend threads: ranks x group sizes runs in this process; mpi with `processes` processes:
// every process runs every group size, counted as on one host, as mpirun -np N here starts them).
// bytes: peak memory of the tensors of all ranks on the host. processes 0: mpi's world size is
// not known yet (before MPI starts), counted as 1.
struct CpAttnCost {
  double units_per_run = 0;
  double reference_units = 0;
  int runs = 0;
  double bytes = 0;
};
CpAttnCost estimate_cost(const CpAttnArgs& a, int processes = 0);

// Budgets of validate(). kMaxReferenceUnits: measured on this project's 2-core machine
// (RelWithDebInfo, `cp-attn --ranks 1 --lengths 2048|4096`: 1.07e9 units in 7.0 s, 4.29e9 in
// 32 s), the whole check runs ~1.3e8 units per second, so 8e9 units is about kBudgetSeconds; the
// default check (lengths 1,7,8,9,300, 4 ranks x 3 group sizes) is 2.8e8 units (1.4 s).
// kMaxCheckBytes: tensors of all ranks of this process.
inline constexpr double kBudgetSeconds = 60;
inline constexpr double kMaxReferenceUnits = 8e9;
inline constexpr double kMaxCheckBytes = 2.0 * (1 << 30);

// Throws InputError for arguments no backend could run (does not start any backend), and for
// work over the budgets above (the message gives the estimate). --backend mpi checks the budgets
// again once the world size is known (processes).
void validate(const CpAttnArgs& a, int processes = 0);

// Runs the check; rank 0 writes the report to `out`. Returns the exit code (0 pass, 1 fail).
// With backend "mpi" it initializes MPI itself (comm::MpiRuntime) and must be run under mpirun;
// in a build without MPI it throws InputError.
int run_cp_attn(const CpAttnArgs& a, std::ostream& out);

}  // namespace dcp::harness
