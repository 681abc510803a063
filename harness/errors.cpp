// The CLI's one error line (harness/errors.h): report_error, and under MPI the input check every
// process makes alike.
#include "core/error.h"
#include "core/text.h"
#include "harness/errors.h"

#include <climits>
#include <cstdio>
#include <new>
#include <stdexcept>

#ifdef DCP_HAVE_MPI
#include <mpi.h>
#endif

namespace dcp::harness {

int report_error(const std::string& message, int code) {
  std::fprintf(stderr, "dcpbench: error: %s\n", one_line(message).c_str());
  std::fflush(stderr);
  return code;
}

int report_exception(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const InputError& e) {
    return report_error(e.what(), 2);
  } catch (const std::bad_alloc&) {
    // Every size we can compute is checked before allocating; this is what is left.
    return report_error("out of memory: the input needs more memory than this machine has (see README.md, "
                        "\"Input limits and errors\", and make the input smaller)", 2);
  } catch (const std::length_error& e) {
    return report_error(std::string("input too large: ") + e.what(), 2);
  } catch (const std::exception& e) {
    return report_error(e.what(), 1);
  } catch (...) {
    return report_error("an exception that is not a std::exception", 1);
  }
}

#ifdef DCP_HAVE_MPI
std::optional<int> input_check_on_every_rank(const std::function<void()>& check) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::exception_ptr error;
  try {
    check();
  } catch (...) {  // any error: this process must still join the collectives below
    error = std::current_exception();
  }
  int mine = error ? rank : INT_MAX, first = INT_MAX;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (first == INT_MAX) return std::nullopt;
  int code = 0;
  if (rank == first) {
    try {
      code = report_exception(error);
    } catch (...) {  // out of memory while formatting it: a fixed line, and still join the broadcast
      std::fputs("dcpbench: error: out of memory while reporting an error\n", stderr);
      code = 2;
    }
  }
  // From the rank that printed, after its line: no process returns (and exits) before it is out.
  MPI_Bcast(&code, 1, MPI_INT, first, MPI_COMM_WORLD);
  return code;
}
#endif

}  // namespace dcp::harness
