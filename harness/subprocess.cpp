// See subprocess.h. poll() over the three pipes (stdin written as the child reads it, so a child
// that never reads cannot block us), a monotonic deadline, then SIGKILL to the process group and
// waitpid. SIGPIPE is ignored while writing (a child that exits without reading its input).
// The child runs in its own process group (so a timeout can kill its whole tree), which keeps it
// out of the terminal's SIGINT: while a child runs, SIGINT, SIGTERM and SIGHUP to us first kill
// its group, then take their default action, so an interrupted command leaves no scheduler behind.
#include "harness/subprocess.h"

#include "core/error.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace dcp::harness {

namespace {

std::atomic<pid_t> g_child{0};  // the running child's process group (0: none)
static_assert(std::atomic<pid_t>::is_always_lock_free, "read in a signal handler");

extern "C" void kill_child_and_reraise(int sig) {
  const pid_t child = g_child.load();
  if (child > 0) ::kill(-child, SIGKILL);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installed once, for the signals whose default action ends the process (a caller that set its
// own handler keeps it).
void forward_termination_signals() {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = kill_child_and_reraise;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
    return true;
  }();
  (void)installed;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

// SIGCHLD ignored by whoever started us (the disposition survives exec) makes the kernel reap the
// shell itself: waitpid would never return it and every case would run to its deadline (helper-78).
// Set to the default for the duration of one run_shell, and only where it was ignored.
struct ChildSignalNotIgnored {
  struct sigaction old {};
  bool changed = false;
  ChildSignalNotIgnored() {
    ::sigaction(SIGCHLD, nullptr, &old);
    if (old.sa_handler != SIG_IGN) return;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    changed = ::sigaction(SIGCHLD, &dfl, nullptr) == 0;
  }
  ~ChildSignalNotIgnored() {
    if (changed) ::sigaction(SIGCHLD, &old, nullptr);
  }
};

}  // namespace

ProcessResult run_shell(const std::string& command, const std::string& input, double timeout_s,
                        size_t max_output_bytes) {
  using clock = std::chrono::steady_clock;
  ProcessResult res;
  Pipe in, out, err;
  const auto start = clock::now();
  forward_termination_signals();
  const ChildSignalNotIgnored child_signal;
  // Blocked from the fork until the child's group is recorded, so none of them finds it unknown
  // (it would end us and leave the child running); a pending one arrives when the mask is restored.
  sigset_t term{}, old_mask{};
  sigemptyset(&term);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&term, sig);
  ::pthread_sigmask(SIG_BLOCK, &term, &old_mask);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    throw Error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);  // (exec resets our handlers to default)
    ::setpgid(0, 0);
    ::dup2(in.fd[0], 0);
    ::dup2(out.fd[1], 1);
    ::dup2(err.fd[1], 2);
    ::signal(SIGPIPE, SIG_DFL);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with the kill below
  g_child.store(pid);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  set_nonblocking(in.fd[1]);
  set_nonblocking(out.fd[0]);
  set_nonblocking(err.fd[0]);
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);

  size_t written = 0;
  if (input.empty()) in.close_end(1);
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  // The shell may exit while a process it left behind (`cmd; sleep 20 &`) still holds the pipes:
  // its answer is complete, so the output is read for kLeftoverGrace more and the group is then
  // killed; waiting for the pipes to close had cost the whole deadline and read as "no answer"
  // (helper-77's trial). Checked every kPollSlice while the shell runs.
  constexpr auto kLeftoverGrace = std::chrono::milliseconds(1000);
  constexpr auto kPollSlice = std::chrono::milliseconds(50);
  int status = 0;
  bool reaped = false;
  clock::time_point exited_at{};
  char buf[65536];
  while (out.fd[0] >= 0 || err.fd[0] >= 0) {
    const auto now = clock::now();
    if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      exited_at = now;
    }
    // Once the shell has exited its answer stands, also where the deadline falls within the grace
    // (it had read as "no answer", helper-78).
    if (reaped && (now >= exited_at + kLeftoverGrace || now >= deadline)) {
      res.left_running = true;
      break;
    }
    if (now >= deadline) {
      res.timed_out = true;
      break;
    }
    pollfd fds[3];
    int nfds = 0;
    if (in.fd[1] >= 0) fds[nfds++] = pollfd{in.fd[1], POLLOUT, 0};
    if (out.fd[0] >= 0) fds[nfds++] = pollfd{out.fd[0], POLLIN, 0};
    if (err.fd[0] >= 0) fds[nfds++] = pollfd{err.fd[0], POLLIN, 0};
    const auto until = std::min(deadline, reaped ? exited_at + kLeftoverGrace : now + kPollSlice);
    const int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()) + 1;
    const int ready = ::poll(fds, nfds, wait_ms);
    if (ready < 0 && errno != EINTR) {
      res.left_running = reaped;  // (after the shell exited: its leftovers are killed below)
      break;
    }
    for (int i = 0; i < nfds; ++i) {
      if (!fds[i].revents) continue;
      if (fds[i].fd == in.fd[1]) {
        const ssize_t w = ::write(in.fd[1], input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR) in.close_end(1);  // EPIPE: child stopped reading
        if (written == input.size()) in.close_end(1);
        continue;
      }
      const bool is_out = fds[i].fd == out.fd[0];
      std::string& dst = is_out ? res.out : res.err;
      const ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        dst.append(buf, static_cast<size_t>(r));
        if (dst.size() > max_output_bytes) {
          dst.resize(max_output_bytes);
          res.truncated = true;
        }
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        (is_out ? out : err).close_end(0);
      }
    }
    if (res.truncated) break;
  }
  if (res.left_running) {
    // The leftovers killed first (the group lives while they do, so its id is theirs), then what
    // the shell wrote before it exited and is still in the pipes, non-blocking: a leftover that
    // kept writing had fed this loop up to the output cap (helper-79).
    ::kill(-pid, SIGKILL);
    for (Pipe* p : {&out, &err}) {
      std::string& dst = p == &out ? res.out : res.err;
      ssize_t r = 0;
      while (p->fd[0] >= 0 && dst.size() <= max_output_bytes && (r = ::read(p->fd[0], buf, sizeof buf)) > 0)
        dst.append(buf, static_cast<size_t>(r));
      if (dst.size() > max_output_bytes) {
        dst.resize(max_output_bytes);
        res.truncated = true;
      }
    }
  }
  ::sigaction(SIGPIPE, &old, nullptr);
  if (res.timed_out || res.truncated || res.left_running) {
    // (After the shell was reaped its process group lives on while a member does, so its id is
    // not reused: the kill reaches only what the shell left behind; left_running killed it above.)
    if (!res.left_running) ::kill(-pid, SIGKILL);
    if (!reaped) ::waitpid(pid, &status, 0);
  } else if (!reaped) {
    // Both outputs closed: the child is exiting (or passed its pipes on to a grandchild that
    // still runs; the deadline applies to the wait as well).
    while (true) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) break;
      if (clock::now() >= deadline) {
        res.timed_out = true;
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      ::usleep(1000);
    }
  }
  g_child.store(0);
  res.exited = WIFEXITED(status);
  res.exit_code = res.exited ? WEXITSTATUS(status) : -1;
  res.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  res.wall_s = std::chrono::duration<double>(clock::now() - start).count();
  return res;
}

}  // namespace dcp::harness
