#include "core/provenance.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>

// Defined by the binaries that link the generated dcp_build_info.cpp (harness/CMakeLists.txt:
// dcpbench, bench_sched); a weak reference, whose address is null in every other binary.
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

// The checkout the sha is read in: the tree this binary was built from (whatever the working
// directory is: a run from inside another checkout must not record that checkout's sha), then the
// working directory's. Its folder and HEAD; both "" without git.
struct Checkout {
  std::string dir, head;
};
Checkout find_checkout() {
  for (const std::string& dir : {std::string(DCP_SOURCE_DIR), std::string(".")})
    if (std::string head = run_command("git -C '" + dir + "' rev-parse HEAD 2>/dev/null"); head.size() == 40)
      return {dir, head};
  return {};
}

// HEAD of `c`, "-dirty" appended when tracked files outside results/ differ from it (changes under
// results/ are outputs, not sources: the demo's second run, after the first rewrote
// results/demo.json, must not read as a dirty tree); "" without git.
std::string tree_sha(const Checkout& c) {
  if (c.head.empty()) return "";
  const std::string dirty =
      run_command("git -C '" + c.dir + "' status --porcelain --untracked-files=no -- . ':(exclude)results' 2>/dev/null");
  return dirty.empty() ? c.head : c.head + "-dirty";
}

}  // namespace

std::string source_git_sha() {
  // Through a volatile pointer: the compiler may not assume a weak symbol's address non-null.
  const char* volatile linked = dcp_build_git_sha;
  const std::string built = linked != nullptr ? std::string(linked) : std::string();
  const Checkout checkout = find_checkout();
  const std::string tree = tree_sha(checkout);
  if (built.empty()) {
    if (!tree.empty()) return tree;
    if (const char* env = std::getenv("DCP_GIT_SHA"); env && *env) return env;
    return "unknown";
  }
  if (tree.empty() || tree == built) return built;
  // The tree has moved on since the build (audit of helper-48: the run-time sha had been stamped
  // on numbers an older binary computed). The binary's commit is recorded, "-dirty" when the
  // sources it reads at run time (scenarios, length files) may differ from it: the tree has
  // uncommitted changes, or a later commit changed something outside results/ (a commit of
  // results alone leaves the build's commit clean and says nothing; review of helper-52).
  constexpr std::string_view kDirty = "-dirty";
  const auto is_dirty = [&](const std::string& x) { return x.ends_with(kDirty); };
  const bool same = !is_dirty(built) && !is_dirty(tree) &&
                    run_command("git -C '" + checkout.dir + "' diff --quiet " + built + " " + tree +
                                " -- . ':(exclude)results' 2>/dev/null && echo same") == "same";
  if (same) return built;
  const std::string recorded = is_dirty(built) ? built : built + std::string(kDirty);
  static const bool warned = [&] {
    std::fprintf(stderr,
                 "dcpbench: warning: this binary was built at %s, the source tree is now at %s: results record %s "
                 "(rebuild to record the tree)\n",
                 built.c_str(), tree.c_str(), recorded.c_str());
    return true;
  }();
  (void)warned;
  return recorded;
}

std::string tree_git_sha() { return tree_sha(find_checkout()); }

std::string build_toolchain() {
#if defined(__clang__)
  std::string c = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  std::string c = std::string("GCC ") + __VERSION__;
#else
  std::string c = "unknown compiler";
#endif
#if defined(__x86_64__)
  c += ", x86_64";
#elif defined(__aarch64__)
  c += ", aarch64";
#else
  c += ", other target";
#endif
  return c;
}

}  // namespace dcp
