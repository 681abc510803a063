#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test through CTest.
#   1. build/       : RelWithDebInfo, CUDA when nvcc is present; ctest labels cpu, mpi, converge
#                     (dcpbench converge on scenarios/converge-short.json), robustness (the CLI on
#                     a corpus of bad inputs: exit 2, one line, nothing written) and gpu (whose
#                     tests skip with a message without a device).
#   2. build-asan/  : clang + AddressSanitizer + UndefinedBehaviorSanitizer, CPU only; ctest
#                     labels cpu and fuzz (libFuzzer targets of the length, scenario, results and
#                     plan readers, each for a bounded time with a fixed -seed).
#   3. ci/gate.sh   : the simulated scenario suite against results/baseline/.
# Both builds carry line tables only (-DDCP_DEBUG_INFO=lines: file:line in backtraces and sanitizer
# reports, about a third less compile time); to debug, configure another folder with
# -DDCP_DEBUG_INFO=full (ci/demo.sh, and ci/gate.sh when build/ has no cache yet, configure it
# with lines again).
# Environment: DCP_JOBS (parallel build jobs, default nproc), DCP_SKIP_ASAN=1 to skip step 2.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DCP_JOBS:-$(nproc)}"

ci/install.sh

echo "== build (RelWithDebInfo) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_BENCH=ON -DDCP_DEBUG_INFO=lines
cmake --build build -j "$jobs"
labels="cpu|mpi|gpu|converge|robustness"
# Every test registered in build/ carries one of these labels: an unlabelled one would never run
# here (dcpbench_plot_rows_only did not, from 2026-11-28 to 2026-12-05).
# (Each list in its own assignment, so a failing ctest stops the script under set -e / pipefail.)
test_names() { (cd build && ctest -N "$@") | sed -n 's/^ *Test *#[0-9]*: //p' | sort; }
all_tests=$(test_names)
labelled=$(test_names -L "$labels")
[ -n "$all_tests" ] || { echo "ci/test.sh: ctest -N lists no tests in build/" >&2; exit 1; }
unlabelled=$(comm -23 <(printf '%s\n' "$all_tests") <(printf '%s\n' "$labelled") | tr '\n' ' ')
if [ -n "$unlabelled" ]; then
  echo "ci/test.sh: tests in build/ without a label this script runs ($labels): $unlabelled" >&2
  exit 1
fi
echo "== tests: cpu, mpi, gpu, converge, robustness =="
(cd build && ctest --output-on-failure -j 2 -L "$labels")
# CTest counts a binary whose tests all skipped as passed: say how many skipped (GPU tests without
# a device, plot tests without matplotlib). No match is no skip, not a failure (set -e, pipefail).
skipped=$({ grep -ho '^\[  SKIPPED \] [0-9]* test' build/Testing/Temporary/LastTest.log 2>/dev/null || true; } |
          awk '{ n += $4 } END { print n + 0 }')
[ "$skipped" -eq 0 ] || echo "ci/test.sh: $skipped tests skipped (e.g. $({ grep -m1 -o 'no CUDA device[^"]*' build/Testing/Temporary/LastTest.log || true; } | head -1); see build/Testing/Temporary/LastTest.log)"

if [ "${DCP_SKIP_ASAN:-0}" != "1" ]; then
  echo "== build (clang, ASan + UBSan, CPU only) =="
  CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_DEBUG_INFO=lines -DDCP_SANITIZE=ON \
    -DDCP_CUDA=OFF -DDCP_MPI=OFF -DDCP_BENCH=OFF -DDCP_FUZZ=ON
  cmake --build build-asan -j "$jobs"
  echo "== tests under ASan + UBSan: cpu, fuzz =="
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j 2 -L "cpu|fuzz")
fi

echo "== regression gate =="
bash ci/gate.sh
echo "ci/test.sh: all tests passed"
