// `dcpbench plot RESULTS.json --out DIR [--script FILE]`: draws the charts of a results file by
// running harness/plot/plot_results.py with /usr/bin/python3 (Debian's python3-matplotlib), or of
// a convergence report (dcpbench.converge.v1) with harness/plot/plot_converge.py.
// The file is validated first, so the script only ever sees schema-valid JSON. The script
// draws into a staging folder beside DIR; only when it succeeds are the PNGs moved into DIR
// (core/files.h publish_dir: DIR is a folder or a new path, each PNG replaces only a regular file),
// so a failed plot (one that exits non-zero, or draws no .png) writes nothing; an interrupt (SIGINT, SIGTERM, SIGHUP) kills the script and
// removes the staging folder before plot ends by the signal. The script's output is captured: a failure is one line (its
// last line of output), exit 2 for a --script given by the user, 1 for the built-in script.
// The script (plot_results.py or plot_converge.py) is looked up, in order: --script; <source
// tree>/harness/plot/<script> (the tree this binary was configured from, DCP_SOURCE_DIR);
// <script> next to the binary; ../harness/plot/<script> relative to the binary's folder.
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "harness/aggregate.h"
#include "harness/commands.h"
#include "core/json_io.h"
#include "harness/converge.h"
#include "harness/results.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#ifndef DCP_SOURCE_DIR
#define DCP_SOURCE_DIR "."
#endif

namespace dcp::harness {

namespace {

namespace fs = std::filesystem;

constexpr const char* kDefaultPython = "/usr/bin/python3";

struct PlotArgs {
  std::string results;
  std::string out;
  std::string script;
  std::string python = kDefaultPython;
};

// Blocks SIGINT, SIGTERM and SIGHUP while the plot script runs and restores the mask when it
// goes out of scope: a pending one is then delivered (default action: we end by it), after the
// caller has removed the staging folder. (A handler could not remove a folder tree: not
// async-signal-safe.) An interrupted plot had left its staging folder beside DIR.
// Only a signal whose action is the default (ending the process) counts: one the caller ignores
// (nohup's SIGHUP, SIGINT of a background job of a non-interactive shell) is still queued while
// blocked, and must not stop the plot.
class TerminationSignalsHeld {
 public:
  TerminationSignalsHeld() {
    sigemptyset(&set_);
    for (int sig : kSignals) {
      sigaddset(&set_, sig);
      struct sigaction now {};
      if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_DFL) sigaddset(&ends_us_, sig);
    }
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~TerminationSignalsHeld() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  TerminationSignalsHeld(const TerminationSignalsHeld&) = delete;
  TerminationSignalsHeld& operator=(const TerminationSignalsHeld&) = delete;
  const sigset_t& old_mask() const { return old_; }
  // A termination signal that arrived while held (0: none).
  int pending() const {
    sigset_t p;
    sigemptyset(&p);
    ::sigpending(&p);
    for (int sig : kSignals)
      if (sigismember(&p, sig) && sigismember(&ends_us_, sig) && !sigismember(&old_, sig)) return sig;
    return 0;
  }

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  sigset_t set_{}, old_{}, ends_us_{};
};

struct ScriptRun {
  int status = 0;       // wait status
  int interrupted = 0;  // the termination signal that stopped the run early (0: none)
};

// Runs argv[0] with argv (no shell), stdout and stderr captured together (the last 64 KiB), so
// a failure can be reported as one line and a success can name DIR instead of the staging
// folder. The child starts with the caller's signal mask, in a process group of its own; while it
// runs, a termination signal to us (held by `held`; a terminal's Ctrl-C reaches only our group)
// kills that whole group (SIGKILL: its output goes to the staging folder, which the caller
// removes; a process the script started dies too, and could otherwise keep the pipe open) and is
// reported in `interrupted`.
ScriptRun run_capturing_output(const std::vector<std::string>& argv, std::string& err,
                               const TerminationSignalsHeld& held) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("plot: pipe failed: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &held.old_mask());
  posix_spawnattr_setpgroup(&attr, 0);  // its own group, led by the child
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw InputError("plot: cannot run " + quote(argv[0], 120) + " (" + std::strerror(rc) + ")");
  }
  ScriptRun run;
  char buf[4096];
  for (;;) {
    if ((run.interrupted = held.pending()) != 0) {
      ::kill(-pid, SIGKILL);
      break;  // not waiting for the pipe's end: what the script wrote no longer matters
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 100);  // wakes to look for a held signal
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    err.append(buf, static_cast<size_t>(n));
    if (err.size() > (64u << 10)) err.erase(0, err.size() - (64u << 10));
  }
  ::close(fds[0]);
  while (::waitpid(pid, &run.status, 0) < 0 && errno == EINTR) {
  }
  if (!run.interrupted) run.interrupted = held.pending();
  return run;
}

std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  const size_t begin = text.find_last_of('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

std::string find_script(const std::string& given, const std::string& name) {
  if (!given.empty()) {
    std::error_code ec;
    DCP_REQUIRE(fs::is_regular_file(given, ec), "--script=", quote(given, 120), ": not a regular file");
    return given;
  }
  std::vector<fs::path> candidates = {fs::path(DCP_SOURCE_DIR) / "harness" / "plot" / name};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path() / name);
    candidates.push_back(exe.parent_path() / ".." / "harness" / "plot" / name);
  }
  std::string tried;
  for (const auto& c : candidates) {
    if (fs::exists(c)) return c.lexically_normal().string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  throw InputError("plot script " + name + " not found (tried " + tried + "); pass --script FILE");
}

// A file of our own in the temporary folder, removed when this goes out of scope.
struct TempFile {
  std::string path;
  void create(const std::string& stem) {
    std::string name = (fs::temp_directory_path() / (stem + "-XXXXXX")).string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0) throw Error("cannot create a temporary file in " + fs::temp_directory_path().string() + ": " + std::strerror(errno));
    ::close(fd);
    path = name;
  }
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    std::error_code ec;
    if (!path.empty()) fs::remove(path, ec);
  }
};

int run_plot(const PlotArgs& a) {
  // Results files go to plot_results.py, convergence reports to plot_converge.py; either is
  // schema-checked first (InputError, exit 2).
  const nlohmann::json j = read_json_file(a.results);
  const bool converge = j.is_object() && j.contains("schema") && j["schema"] == "dcpbench.converge.v1";
  if (converge) {
    validate_converge_report(j, a.results);
  }
  // The script draws from the aggregates. Where the file's are not the ones computed here as `run`
  // computes them, it gets the file as `run` would write it (top-level keys dcpbench does not know
  // kept beside): a file with rows only (DESIGN.md's contract asks for no more; files written before
  // cost model v2 have none; the built-in script refused it and plot exited 1), and a file written
  // before 0b0a667, whose fractions are means of the steps' ratios (results.cpp), drawn with the
  // figures table, gate and evaluate print for it. A file of today's dcpbench goes as it is.
  std::optional<nlohmann::json> with_own_aggregates;
  if (!converge) {
    const ResultsFile results = results_from_json(j, a.results);
    // Readable but empty (a run whose rows were all filtered out): nothing to draw, bad input.
    DCP_REQUIRE(!results.rows.empty(), show_path(a.results), ": no result rows to draw");
    nlohmann::json aggs = nlohmann::json::array();
    for (const auto& agg : aggregate(results)) aggs.push_back(aggregate_to_json(agg));
    if (!j.contains("aggregates") || j["aggregates"] != aggs) {
      with_own_aggregates = results_to_json(results);
      for (const auto& [k, v] : j.items())
        if (!with_own_aggregates->contains(k)) (*with_own_aggregates)[k] = v;
    }
  }
  const std::string script = find_script(a.script, converge ? "plot_converge.py" : "plot_results.py");
  DCP_REQUIRE(fs::exists(a.python), "--python=", quote(a.python, 120),
              ": not found (install Debian's python3 and python3-matplotlib)");
  // Held from before the staging folder exists until it is gone or published: an interrupt
  // then ends us (on leaving this function) with nothing left beside DIR.
  const TerminationSignalsHeld held;
  std::string input = a.results;
  TempFile with_aggregates;  // after `held`, so it is removed before a held signal ends us
  if (with_own_aggregates) {
    with_aggregates.create("dcpbench-plot-results");
    // Compact, and not held to the 64 MiB the readers allow: the copy of a file they read may be
    // a little larger (write_json_atomic refused one, naming this temporary file: helper-2).
    write_file_atomic(with_aggregates.path, with_own_aggregates->dump());
    input = with_aggregates.path;
  }
  const std::string staging = make_staging_dir(a.out);  // checks --out first
  std::string err;
  int status = 0;
  try {
    const ScriptRun run = run_capturing_output({a.python, script, "--out", staging, "--", input}, err, held);
    if (run.interrupted) {
      std::error_code ec;
      fs::remove_all(staging, ec);
      return 128 + run.interrupted;  // (the held signal is delivered as `held` restores the mask)
    }
    status = run.status;
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    throw;
  }
  const bool exited_0 = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  // A script that exits 0 having drawn no chart is a failure too: `plot` had left an empty DIR
  // and said nothing (helper-20, 2026-12-06).
  bool drew = false;
  if (exited_0) {
    std::error_code ec;
    for (fs::directory_iterator it(staging, ec), end; !ec && it != end && !drew; it.increment(ec))
      drew = it->path().extension() == ".png" && it->is_regular_file(ec);
  }
  if (!exited_0 || !drew) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    const std::string why = !WIFEXITED(status)  ? "was killed by signal " + std::to_string(WTERMSIG(status))
                            : !exited_0         ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                                : "exited with status 0 but drew no chart (no .png in the output folder)";
    const std::string line = last_line(err);
    const std::string msg = "plot: " + quote(script, 120) + " " + why + (line.empty() ? "" : ": " + quote(line, 160));
    // The user's script or interpreter failing is bad input (exit 2); the built-in pair, exit 1.
    if (!a.script.empty() || a.python != kDefaultPython) throw InputError(msg);
    throw Error(msg);
  }
  publish_dir(staging, a.out);
  // The script's report of a successful run, naming DIR rather than the staging folder.
  for (size_t at = err.find(staging); at != std::string::npos; at = err.find(staging, at + a.out.size()))
    err.replace(at, staging.size(), a.out);
  std::cout << err;
  return 0;
}

}  // namespace

void add_plot_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PlotArgs>();
  CLI::App* cmd = app.add_subcommand("plot", "Draw PNG charts from a results file or a convergence report (harness/plot/*.py)");
  cmd->add_option("results", args->results, "Results JSON (dcpbench.results.v1) or convergence report (dcpbench.converge.v1)")->required();
  cmd->add_option("--out", args->out,
                  "Output folder for the PNGs: an existing folder (not a symlink) or a new one in an existing "
                  "folder; a PNG replaces only a regular file")
      ->required();
  cmd->add_option("--script", args->script, "Path of the plot script (default: plot_results.py or plot_converge.py, found automatically)")
      ->check([](const std::string& v) { return v.empty() ? std::string("empty path") : std::string(); });
  cmd->add_option("--python", args->python, "Python interpreter with matplotlib (default /usr/bin/python3)");
  cmd->callback([args, &exit_code] { exit_code = run_plot(*args); });
}

}  // namespace dcp::harness
