// The CLI's one error line and exit code (harness/errors.cpp), apart from the sub-commands'
// declarations in harness/commands.h so that a file needing only these does not parse CLI11.
#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <string>

namespace dcp::harness {

// Prints "dcpbench: error: <message>" as one line on stderr (core/text.h one_line) and returns
// code. report_exception maps an error to its line and exit code, as main does for every command:
// InputError, out of memory and std::length_error exit 2 (bad or too large input), anything else 1.
int report_error(const std::string& message, int code);
int report_exception(std::exception_ptr error);

#ifdef DCP_HAVE_MPI
// Bad input found once MPI runs (every process checks the same thing, under MPI_COMM_WORLD): the
// lowest rank whose check threw prints its error (one line, rank 0's when every rank finds it),
// then every process returns that error's exit code (2 for bad input), and nobody calls MPI_Abort
// (whose exit code 1 would read as a failed check). Collective: every process calls it once,
// error or not, and an error of any type is caught so that the process still joins: an all-reduce
// of the lowest failing rank, then a broadcast of the exit code from that rank after its line is
// written, so the line is out before any process exits (mpirun stops the others when one exits
// non-zero, which once killed rank 0 before it printed). The lowest failing rank's error decides
// the line and the code (a different error on a higher rank is not shown). nullopt: no process
// found an error.
std::optional<int> input_check_on_every_rank(const std::function<void()>& check);
#endif

}  // namespace dcp::harness
