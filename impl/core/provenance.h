// Which source tree produced a result: the git commit every results file, calibration file and
// benchmark context records.
#pragma once

#include <string>

namespace dcp {

// The commit of the tree this binary was built from (`git rev-parse HEAD` in its source folder,
// "-dirty" appended when tracked files outside results/ have changes: results are outputs), else of the working directory's checkout,
// else the environment's DCP_GIT_SHA (a prebuilt binary on the lent GPU machine, whose copy of
// the tree has no .git: ci/device-run.sh passes the sha of its bundle's manifest), else "unknown".
// Read at run time: a sha fixed when CMake configures goes stale with every later commit.
std::string source_git_sha();

}  // namespace dcp
