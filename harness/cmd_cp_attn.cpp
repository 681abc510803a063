/* `dcpbench cp-attn`: context-parallel attention over a real backend, checked against the
 * float64 reference on every rank (harness/cp_attn_check.h describes the check and its output).
 *
 *   dcpbench cp-attn [--backend threads|mpi] [--ranks N] [--algo ring|all_gather]
 *                    [--dtype f64|f32] [--lengths 1,7,8,9,300] [--heads H] [--kv-heads K]
 *                    [--head-dim D] [--seed S] [--all-groups|--no-all-groups] [--tolerance R]
 *   mpirun -np 4 build/dcpbench cp-attn --backend mpi
 *
 * Invariants: MPI is initialized only here and only for --backend mpi (comm::MpiRuntime), so no
 * other sub-command touches MPI, and the code compiles without MPI (DCP_HAVE_MPI, a PUBLIC
 * definition of dcp_comm). Every rank returns the same exit code: the pass/fail decision is made
 * on all-reduced (max) errors. Inputs come from (seed, tensor, global element index) with the
 * formula of impl/attn/tests/attn_test_util.h, so a failing case here reproduces in the tests.
 */
#include "attn/attn_ref.h"
#include "attn/compare.h"
#include "attn/cp_attn.h"
#include "attn/inputs.h"
#include "attn/thd.h"
#include "attn/tolerances.h"
#include "comm/group_registry.h"
#include "comm/thread_comm.h"
#include "core/error.h"
#include "core/rng.h"
#include "harness/cli_options.h"
#include "harness/commands.h"
#include "harness/cp_attn_check.h"

#ifdef DCP_HAVE_MPI
#include "comm/mpi_comm.h"
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>

namespace dcp::harness {

namespace {

constexpr int kMaxThreadRanks = 64;
constexpr int64_t kMaxTotalTokens = 1 << 16;  // the O(T^2) reference runs on every rank
constexpr int kMaxHeads = 1 << 12;            // heads, kv_heads, head_dim each (the budgets below bind first)

using attn::global_tensor;
using attn::kDout;
using attn::kK;
using attn::kQ;
using attn::kV;
using attn::local_tensor;

constexpr std::array<const char*, 5> kOutputs{"out", "lse", "dq", "dk", "dv"};


// Rows `rows` of a global [T, row_elems] tensor: [rows.size(), row_elems].
std::vector<double> take_rows(const std::vector<double>& global, const std::vector<int64_t>& rows,
                              int64_t row_elems) {
  std::vector<double> out(rows.size() * row_elems);
  for (size_t t = 0; t < rows.size(); ++t)
    for (int64_t e = 0; e < row_elems; ++e) out[t * row_elems + e] = global[rows[t] * row_elems + e];
  return out;
}

attn::AttnShape shape_of(const CpAttnArgs& a) {
  attn::AttnShape s;
  s.heads = a.heads;
  s.kv_heads = a.kv_heads;
  s.head_dim = a.head_dim;
  s.causal = true;
  return s;
}

attn::CpAlgo algo_of(const std::string& name) {
  return name == "ring" ? attn::CpAlgo::ring : attn::CpAlgo::all_gather;
}

// Per output tensor: max |got - ref|, max |ref| and non-finite mismatches, reduced (max) over
// every rank of the pool: [5 tensors x 3].
using ErrorStats = std::array<double, kOutputs.size() * 3>;

// Forward + backward on this rank's group of size `cp`; this rank's error stats.
template <typename T>
ErrorStats run_group(comm::Communicator& g, const CpAttnArgs& a) {
  const int cp = g.size();
  const int r = g.rank();
  const attn::AttnShape s = shape_of(a);
  const attn::ThdBatch b = attn::make_thd_batch(a.lengths, cp);
  const int64_t t = b.total_tokens();

  // The float64 reference of the whole batch, on every rank (no gathering).
  const auto q = global_tensor<T>(a.seed, kQ, t, s.q_row());
  const auto k = global_tensor<T>(a.seed, kK, t, s.kv_row());
  const auto v = global_tensor<T>(a.seed, kV, t, s.kv_row());
  const auto dout = global_tensor<T>(a.seed, kDout, t, s.q_row());
  std::vector<double> out(q.size()), lse(t * s.heads), dq(q.size()), dk(k.size()), dv(v.size());
  attn::attn_fwd_ref(b, s, q, k, v, out, lse);
  attn::attn_bwd_ref(b, s, q, k, v, out, lse, dout, dq, dk, dv);

  // This rank's shard, through the CP algorithm on the group.
  const auto rows = attn::zigzag_rows(b, cp, r);
  const auto ql = local_tensor<T>(a.seed, kQ, rows, s.q_row());
  const auto kl = local_tensor<T>(a.seed, kK, rows, s.kv_row());
  const auto vl = local_tensor<T>(a.seed, kV, rows, s.kv_row());
  const auto doutl = local_tensor<T>(a.seed, kDout, rows, s.q_row());
  std::vector<T> outl(ql.size()), lsel(rows.size() * s.heads), dql(ql.size()), dkl(kl.size()),
      dvl(vl.size());
  const attn::CpAlgo algo = algo_of(a.algo);
  attn::cp_attn_fwd_fn<T>(algo)(g, b, s, ql, kl, vl, outl, lsel);
  attn::cp_attn_bwd_fn<T>(algo)(g, b, s, ql, kl, vl, outl, lsel, doutl, dql, dkl, dvl);

  const std::array<attn::Comparison, kOutputs.size()> cmp{
      attn::compare_to_ref<T>(take_rows(out, rows, s.q_row()), outl),
      attn::compare_to_ref<T>(take_rows(lse, rows, s.heads), lsel),
      attn::compare_to_ref<T>(take_rows(dq, rows, s.q_row()), dql),
      attn::compare_to_ref<T>(take_rows(dk, rows, s.kv_row()), dkl),
      attn::compare_to_ref<T>(take_rows(dv, rows, s.kv_row()), dvl)};
  ErrorStats st{};
  for (size_t i = 0; i < cmp.size(); ++i) {
    // A NaN error would vanish in a max-reduction; count it as a non-finite mismatch instead.
    const bool finite = std::isfinite(cmp[i].max_abs_err);
    st[3 * i] = finite ? cmp[i].max_abs_err : std::numeric_limits<double>::infinity();
    st[3 * i + 1] = cmp[i].max_ref_abs;
    st[3 * i + 2] = static_cast<double>(cmp[i].nonfinite_mismatches) + (finite ? 0 : 1);
  }
  return st;
}

std::string join_lengths(const std::vector<int32_t>& lengths) {
  std::string s;
  for (size_t i = 0; i < lengths.size(); ++i) s += (i ? "," : "") + std::to_string(lengths[i]);
  return s;
}

// The whole check on one rank of the pool `world`. Returns the exit code (same on every rank).
template <typename T>
int check_on_rank(comm::Communicator& world, const CpAttnArgs& a, std::ostream& os) {
  const attn::Tolerance table = attn::tolerance_for<T>();
  const double tol = a.tolerance > 0 ? a.tolerance : table.rel_to_max;
  const bool print = world.rank() == 0;
  comm::GroupRegistry reg(world);
  std::vector<int> sizes = reg.sizes();
  if (!a.all_groups) sizes = {world.size()};

  if (print) {
    os << "dcpbench cp-attn: backend " << a.backend << ", " << world.size() << " ranks, "
       << a.algo << ", " << a.dtype << ", heads=" << a.heads << " kv_heads=" << a.kv_heads
       << " head_dim=" << a.head_dim << " causal, seed " << a.seed << ", lengths "
       << join_lengths(a.lengths) << "\n"
       << "tolerance " << tol << " ("
       << (a.tolerance > 0 ? "--tolerance" : table.why)
       << "); error = max |got - ref| / max |ref| over all ranks, ref = float64 reference\n";
    char line[160];
    std::snprintf(line, sizeof line, "%7s %7s %7s %9s %9s %9s %9s %9s  %s\n", "cp", "groups",
                  "tokens", "out", "lse", "dq", "dk", "dv", "result");
    os << line;
    std::snprintf(line, sizeof line, "%7s %7s %7s %9s %9s %9s %9s %9s\n", "(ranks)", "(count)",
                  "(rows)", "(rel err)", "(rel err)", "(rel err)", "(rel err)", "(rel err)");
    os << line;
  }
  bool all_pass = true;
  for (int cp : sizes) {
    ErrorStats st = run_group<T>(reg.group(cp), a);
    world.all_reduce(std::span<double>(st), comm::ReduceOp::max);
    std::string failed;
    std::array<double, kOutputs.size()> rel{};
    for (size_t i = 0; i < kOutputs.size(); ++i) {
      const double abs_err = st[3 * i], ref_abs = st[3 * i + 1];
      rel[i] = abs_err == 0 ? 0 : ref_abs > 0 ? abs_err / ref_abs
                                              : std::numeric_limits<double>::infinity();
      if (!(st[3 * i + 2] == 0 && rel[i] <= tol)) failed += (failed.empty() ? "" : ",") +
                                                           std::string(kOutputs[i]);
    }
    all_pass = all_pass && failed.empty();
    if (print) {
      const int64_t tokens = attn::make_thd_batch(a.lengths, cp).total_tokens();
      char line[200];
      std::snprintf(line, sizeof line, "%7d %7d %7lld %9.2e %9.2e %9.2e %9.2e %9.2e  %s%s\n", cp,
                    world.size() / cp, static_cast<long long>(tokens), rel[0], rel[1], rel[2],
                    rel[3], rel[4], failed.empty() ? "PASS" : "FAIL ", failed.c_str());
      os << line;
    }
  }
  if (print)
    os << "dcpbench cp-attn: " << (all_pass ? "passed" : "FAILED") << " (" << sizes.size()
       << (sizes.size() == 1 ? " group size)\n" : " group sizes)\n");
  return all_pass ? 0 : 1;
}

int check_on_rank_dtype(comm::Communicator& world, const CpAttnArgs& a, std::ostream& os) {
  return a.dtype == "f32" ? check_on_rank<float>(world, a, os) : check_on_rank<double>(world, a, os);
}

}  // namespace

void validate(const CpAttnArgs& a, int processes) {
  DCP_REQUIRE(a.backend == "threads" || a.backend == "mpi", "--backend=\"", a.backend,
              "\" is not one of threads, mpi");
  DCP_REQUIRE(a.algo == "ring" || a.algo == "all_gather", "--algo=\"", a.algo,
              "\" is not one of ring, all_gather");
  DCP_REQUIRE(a.dtype == "f64" || a.dtype == "f32", "--dtype=\"", a.dtype,
              "\" is not one of f64, f32");
  DCP_REQUIRE(a.backend != "threads" || (a.ranks >= 1 && a.ranks <= kMaxThreadRanks), "--ranks=",
              a.ranks, " must be in [1, ", kMaxThreadRanks, "]");
  DCP_REQUIRE(!a.lengths.empty(), "--lengths is empty: give at least one sequence length");
  int64_t total = 0;
  for (int32_t len : a.lengths) {
    DCP_REQUIRE(len >= 0, "--lengths: ", len, " is negative");
    total += len;
  }
  DCP_REQUIRE(total >= 1, "--lengths=", join_lengths(a.lengths), " has no tokens");
  DCP_REQUIRE(total <= kMaxTotalTokens, "--lengths: ", total, " tokens in all, more than ",
              kMaxTotalTokens, " (the float64 reference runs on every rank)");
  DCP_REQUIRE(a.heads >= 1 && a.kv_heads >= 1 && a.head_dim >= 1, "--heads=", a.heads,
              ", --kv-heads=", a.kv_heads, ", --head-dim=", a.head_dim, " must all be >= 1");
  DCP_REQUIRE(a.heads % a.kv_heads == 0, "--heads=", a.heads, " is not divisible by --kv-heads=",
              a.kv_heads);
  DCP_REQUIRE(a.tolerance >= 0 && std::isfinite(a.tolerance), "--tolerance=", a.tolerance,
              " must be a finite number >= 0 (0 = the dtype's table value)");
  // Size the work before any backend starts: the float64 reference is O(sum L^2) per head.
  const CpAttnCost cost = estimate_cost(a, processes);
  char buf[400];
  if (cost.reference_units > kMaxReferenceUnits) {
    std::snprintf(buf, sizeof buf,
                  "--lengths/--heads/--head-dim: the float64 reference needs an estimated %.3g units of work "
                  "(sum L^2 * heads * head_dim = %.3g per run x %d runs: ranks x group sizes), over the budget "
                  "of %.3g (about %.0f s here); use shorter --lengths, fewer %s or fewer heads",
                  cost.reference_units, cost.units_per_run, cost.runs, kMaxReferenceUnits, kBudgetSeconds,
                  a.backend == "threads" ? "--ranks" : "processes (mpirun -np)");
    throw InputError(buf);
  }
  if (cost.bytes > kMaxCheckBytes) {
    std::snprintf(buf, sizeof buf,
                  "--lengths/--heads/--kv-heads/--head-dim: the check needs an estimated %.3g GiB of memory, over "
                  "the limit of %.3g GiB; use shorter --lengths, fewer heads or a smaller --head-dim",
                  cost.bytes / double(1 << 30), kMaxCheckBytes / double(1 << 30));
    throw InputError(buf);
  }
}

CpAttnCost estimate_cost(const CpAttnArgs& a, int processes) {
  // Ranks on this host: the thread ranks, or mpi's processes (1 while the world size is unknown).
  const int pool = a.backend == "threads" ? a.ranks : std::max(1, processes);
  std::vector<int> sizes;
  if (a.all_groups) {
    for (int k = 1; k <= pool; k *= 2) sizes.push_back(k);
    if (sizes.back() != pool) sizes.push_back(pool);
  } else {
    sizes = {pool};
  }
  const double per_head = static_cast<double>(a.heads) * a.head_dim;
  const double row_elems = 2.0 * a.heads * a.head_dim + 2.0 * a.kv_heads * a.head_dim + a.heads;
  CpAttnCost c;
  for (int cp : sizes) {
    double sum_sq = 0, tokens = 0;
    for (int32_t len : a.lengths) {
      const double padded = std::ceil(static_cast<double>(len) / (2.0 * cp)) * 2.0 * cp;
      sum_sq += padded * padded;
      tokens += padded;
    }
    c.units_per_run = std::max(c.units_per_run, sum_sq * per_head);
    c.reference_units += sum_sq * per_head * pool;
    // Per rank: inputs + reference outputs of the whole batch and gradients (about 2 x row_elems
    // doubles per token), plus the shards; every thread rank holds its own.
    c.bytes = std::max(c.bytes, 8.0 * tokens * row_elems * 2.5 * pool);
  }
  c.runs = static_cast<int>(sizes.size()) * pool;
  return c;
}

int run_cp_attn(const CpAttnArgs& a, std::ostream& out) {
  if (a.backend != "mpi") {
    validate(a);
    int code = 1;
    comm::run_threads(a.ranks, [&](comm::Communicator& world) {
      const int c = check_on_rank_dtype(world, a, out);
      if (world.rank() == 0) code = c;
    });
    return code;
  }
#ifdef DCP_HAVE_MPI
  comm::MpiRuntime mpi(nullptr, nullptr);
  int world_size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  // Every check once MPI runs, the budgets with every process's group sizes: bad input prints one
  // line (not one per process) and exits 2 on every process (errors.h).
  if (auto code = input_check_on_every_rank([&] { validate(a, world_size); })) return *code;
  int code = 1;
  // run_mpi aborts every rank (MPI_Abort) if one throws, so none is left waiting.
  comm::run_mpi([&](comm::Communicator& world) { code = check_on_rank_dtype(world, a, out); });
  return code;
#else
  throw InputError("--backend mpi: this dcpbench was built without MPI (configure with "
                   "-DDCP_MPI=ON and OpenMPI installed)");
#endif
}

void add_cp_attn_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CpAttnArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cp-attn",
      "Run CP attention (forward + backward) over the threads or MPI backend on every group "
      "size and check each rank's rows against the float64 reference; exit 1 on any FAIL");
  cmd->add_option("--backend", args->backend,
                  "threads (one process, a thread per rank) or mpi (run under mpirun -np N)");
  CLI::Option* ranks = add_int_option(cmd, "--ranks", args->ranks, 1, kMaxThreadRanks,
                                      "Number of ranks for --backend threads (default 4); with "
                                      "mpi the world size is used");
  cmd->add_option("--algo", args->algo, "ring or all_gather (default ring)");
  cmd->add_option("--dtype", args->dtype, "f64 or f32 (default f64)");
  add_int_list_option(cmd, "--lengths", args->lengths, 0, kMaxTotalTokens,
                      "Comma-separated real sequence lengths (default 1,7,8,9,300; at most " +
                          std::to_string(kMaxTotalTokens) + " tokens in all); each is padded to a multiple of 2*cp");
  add_int_option(cmd, "--heads", args->heads, 1, kMaxHeads, "Query heads (default 4)");
  add_int_option(cmd, "--kv-heads", args->kv_heads, 1, kMaxHeads, "Key/value heads, dividing --heads (default 2)");
  add_int_option(cmd, "--head-dim", args->head_dim, 1, kMaxHeads, "Head dimension (default 64)");
  add_int_option(cmd, "--seed", args->seed, 0, kMaxI64, "Seed of the generated inputs (default 1)");
  cmd->add_flag("--all-groups,!--no-all-groups", args->all_groups,
                "Run every group size of the registry (default), or only the whole pool");
  cmd->add_option("--tolerance", args->tolerance,
                  "Relative tolerance (0 or unset: attn/tolerances.h's value for the dtype)");
  char footer[300];
  std::snprintf(footer, sizeof footer,
                "Limits: the float64 reference's work, estimated as sum L^2 * heads * head_dim over its runs "
                "(ranks x group sizes), at most %.3g (about %.0f s here); the tensors at most %.0f GiB.",
                kMaxReferenceUnits, kBudgetSeconds, kMaxCheckBytes / double(1 << 30));
  cmd->footer(footer);
  cmd->callback([args, ranks, &exit_code] {
    DCP_REQUIRE(args->backend != "mpi" || ranks->count() == 0, "--ranks=", args->ranks,
                " is for --backend threads; with --backend mpi the ranks are the mpirun "
                "processes (mpirun -np N)");
    exit_code = run_cp_attn(*args, std::cout);
  });
}

}  // namespace dcp::harness
