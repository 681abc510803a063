#include "core/provenance.h"

#include <array>
#include <cstdio>
#include <cstdlib>

// Defined by the binaries that link the generated dcp_build_info.cpp (harness/CMakeLists.txt:
// dcpbench, bench_sched, the Python module); a weak reference, whose address is null in every
// other binary.
extern "C" __attribute__((weak)) const char dcp_build_git_sha[];

#ifndef DCP_SOURCE_DIR
#define DCP_SOURCE_DIR "."
#endif

namespace dcp {
namespace {

// stdout of a shell command, trailing whitespace removed ("" if it could not run).
std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
  ::pclose(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

std::string source_git_sha() {
  // Through a volatile pointer: the compiler may not assume a weak symbol's address non-null.
  const char* volatile linked = dcp_build_git_sha;
  const std::string built = linked != nullptr ? std::string(linked) : std::string();
  const std::string tree = tree_git_sha();
  if (built.empty()) {
    if (!tree.empty()) return tree;
    if (const char* env = std::getenv("DCP_GIT_SHA"); env && *env) return env;
    return "unknown";
  }
  // A binary older than the tree (a commit or an edit since it was built) records the commit it was
  // built from, and says so once: it stamped the tree's newer sha on numbers it did not compute
  // (audit of helper-48).
  if (!tree.empty() && tree != built) {
    static const bool warned = [&] {
      std::fprintf(stderr, "dcpbench: warning: this binary was built at %s, the source tree is now at %s: results record %s (rebuild to record the tree)\n",
                   built.c_str(), tree.c_str(), built.c_str());
      return true;
    }();
    (void)warned;
  }
  return built;
}

std::string tree_git_sha() {
  // The tree this binary was built from (whatever the working directory is: a run from inside
  // another checkout must not record that checkout's sha), then the working directory.
  for (const std::string& dir : {std::string(DCP_SOURCE_DIR), std::string(".")}) {
    const std::string sha = run_command("git -C '" + dir + "' rev-parse HEAD 2>/dev/null");
    if (sha.size() == 40) {
      // Changes under results/ are outputs, not sources: the demo's second run, after the first
      // rewrote results/demo.json, must not read as a dirty tree.
      const std::string dirty = run_command("git -C '" + dir +
                                            "' status --porcelain --untracked-files=no -- . ':(exclude)results' 2>/dev/null");
      return dirty.empty() ? sha : sha + "-dirty";
    }
  }
  return "";
}

}  // namespace dcp
