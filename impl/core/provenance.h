// Which source tree produced a result: the git commit every results file, calibration file and
// benchmark context records.
#pragma once

#include <string>

namespace dcp {

// The commit this binary was built from: the sha that CMake recorded at build time
// (cmake/DcpBuildInfo.cmake, in the binaries that write results: dcpbench and bench_sched), with
// "-dirty" appended and a warning on stderr when the sources have changed since (uncommitted
// changes, or a later commit that changed anything outside results/); in other binaries, and
// without git at build time, tree_git_sha(), else the environment's DCP_GIT_SHA (a prebuilt
// binary on the lent GPU machine, whose copy of the tree has no .git: ci/device-run.sh passes the
// sha of its bundle's manifest), else "unknown".
std::string source_git_sha();

// At run time: `git rev-parse HEAD` in the source folder the binary was configured from, else in
// the working directory's checkout, "-dirty" appended when tracked files outside results/ (outputs)
// differ from it; "" without git.
std::string tree_git_sha();

// The compiler and target this binary was built with, e.g. "GCC 12.2.0, x86_64" (results files
// record it: numbers that differ between machines are explained by it or ruled out).
std::string build_toolchain();

}  // namespace dcp
