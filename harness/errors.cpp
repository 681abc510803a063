// The CLI's one error line (harness/commands.h): report_error, and under MPI the input check every
// process makes alike.
#include "core/error.h"
#include "core/text.h"
#include "harness/commands.h"

#include <climits>
#include <cstdio>

#ifdef DCP_HAVE_MPI
#include <mpi.h>
#endif

namespace dcp::harness {

int report_error(const std::string& message, int code) {
  std::fprintf(stderr, "dcpbench: error: %s\n", one_line(message).c_str());
  std::fflush(stderr);
  return code;
}

#ifdef DCP_HAVE_MPI
std::optional<int> input_check_on_every_rank(const std::function<void()>& check) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string message;
  bool bad = false;
  try {
    check();
  } catch (const InputError& e) {
    bad = true;
    message = e.what();
  }
  int mine = bad ? rank : INT_MAX, first = INT_MAX;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == INT_MAX) return std::nullopt;
  if (rank == first) report_error(message, 2);
  MPI_Barrier(MPI_COMM_WORLD);  // the line is written before any process exits
  return 2;
}
#endif

}  // namespace dcp::harness
