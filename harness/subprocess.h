// Runs a shell command with a deadline: `/bin/sh -c CMD` in its own process group, `input` written
// to its stdin, stdout and stderr collected (each capped), the whole group killed (SIGKILL) when
// the deadline passes, or 1 s after the shell exits while a process it left still holds the
// output open (a process that left the group, e.g. through setsid, is out of reach). Used by `dcpbench conform --planner-cmd` so that a hanging or flooding
// scheduler is a failed case, never a hang or an out-of-memory of the harness.
#pragma once

#include <cstddef>
#include <string>

namespace dcp::harness {

struct ProcessResult {
  bool timed_out = false;
  bool exited = false;     // exited normally (exit_code valid); else killed by term_signal
  int exit_code = -1;
  int term_signal = 0;
  std::string out;         // stdout (at most max_output_bytes)
  std::string err;         // stderr (at most max_output_bytes)
  bool truncated = false;  // an output exceeded max_output_bytes (the process group was killed;
                           // also after the shell exited, by what it left running)
  bool left_running = false;  // the shell exited, but the output stayed open 1 s more, or until
                              // the deadline came first: what was read is the output, and what
                              // the shell left in its process group was killed
  double wall_s = 0;
};

// Throws dcp::Error if the process cannot be started (fork/pipe failure).
ProcessResult run_shell(const std::string& command, const std::string& input, double timeout_s,
                        size_t max_output_bytes = size_t{64} << 20);

}  // namespace dcp::harness
