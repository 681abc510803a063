#!/usr/bin/env bash
# Regression gate (called by ci/test.sh): runs the simulated scenario suite (every
# scenarios/*.json, 2 steps each: the fast CI subset) and compares it with the committed baseline
# results/baseline/suite.json through `dcpbench gate`, which reads only the two JSON files and
# exits 1 naming every (scenario, strategy) with a step whose useful TFLOPS/GPU moved by more than
# the tolerance (a drop, or a gain that needs a new baseline), whose batch, plan or setting changed,
# whose plan became invalid or out of memory, whose plan efficiency is above 1, or that only one of
# the files has (harness/gate.h).
#
#   ci/gate.sh            run the suite and gate it (tolerance DCP_GATE_TOLERANCE, default 0.02)
#   ci/gate.sh --update   run the suite and overwrite the baseline (commit the result; say why)
#
# Environment: DCPBENCH (binary; when unset, build/dcpbench, built here if missing; when set and not
# an executable file, exit 2).
set -euo pipefail
cd "$(dirname "$0")/.."

update=0
case "${1:-}" in
  "") ;;
  --update) update=1 ;;
  *) echo "ci/gate.sh: unknown argument '$1' (usage: ci/gate.sh [--update])" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "ci/gate.sh: one argument at most (usage: ci/gate.sh [--update])" >&2; exit 2; }

steps=2
baseline=results/baseline/suite.json
current=build/gate/current.json
tolerance="${DCP_GATE_TOLERANCE:-0.02}"
dcpbench="${DCPBENCH:-build/dcpbench}"

if [ -n "${DCPBENCH:-}" ] && [ ! -x "$DCPBENCH" ]; then
  # A binary named on purpose and missing: stop, rather than gate another one built here.
  echo "ci/gate.sh: DCPBENCH=$DCPBENCH is not an executable file" >&2
  exit 2
fi
if [ ! -x "$dcpbench" ]; then
  echo "ci/gate.sh: $dcpbench not found, building it" >&2
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_DEBUG_INFO=lines >/dev/null
  cmake --build build -j "$(nproc)" --target dcpbench
  dcpbench=build/dcpbench
fi

mkdir -p "$(dirname "$current")"
# Simulation scenarios only: scenarios/converge-*.json are convergence scenarios (dcpbench converge).
scenarios=()
for f in scenarios/*.json; do
  case "$(basename "$f")" in converge-*) ;; *) scenarios+=("$f") ;; esac
done
echo "ci/gate.sh: running ${#scenarios[@]} scenarios x $steps steps (simulated)" >&2
"$dcpbench" run "${scenarios[@]}" --steps "$steps" --quiet --no-detail --out "$current" > "$(dirname "$current")/table.txt"

if [ $update -eq 1 ]; then
  mkdir -p "$(dirname "$baseline")"
  cp "$current" "$baseline"
  echo "ci/gate.sh: baseline updated: $baseline (commit it)" >&2
  exit 0
fi
if [ ! -f "$baseline" ]; then
  echo "ci/gate.sh: no baseline at $baseline; create one with: ci/gate.sh --update" >&2
  exit 1
fi
"$dcpbench" gate --baseline "$baseline" --current "$current" --tolerance "$tolerance"
