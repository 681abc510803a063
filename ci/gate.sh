#!/usr/bin/env bash
# Regression gate (called by ci/test.sh): runs the simulated scenario suite (every
# scenarios/*.json, 2 steps each: the fast CI subset) and compares it with the committed baseline
# results/baseline/suite.json through `dcpbench gate`, which reads only the two JSON files and
# exits 1 naming every (scenario, strategy) with a step whose useful TFLOPS/GPU (or, simulated, peak
# memory) moved by more than the tolerance (a drop, or a gain that needs a new baseline), whose
# batch, plan or setting changed, whose plan became invalid or out of memory, whose plan efficiency
# is above 1, or that only one of the files has (harness/gate.h).
#
# The suite: every scenario at its published setting, and llama13b-github again at VPP 5 (written
# here from the shipped file, build/gate/llama13b-github-vpp5.json), so the interleaved pipeline
# is gated too. Then `--tune` on the scenarios whose search takes seconds (Megatron's example at
# 4-64 GPUs and the two 8-layer Llama-13B ones: ~7 s together), against results/baseline/tuned.json:
# the knobs each strategy's search picks on the held-out batches, and their rows. The 40-layer
# Llama-13B and Llama-3-8B searches (10-40 s each) are not gated (README "Regression gate").
#
#   ci/gate.sh            run the suite and gate it (tolerances DCP_GATE_SIM_TOLERANCE, default 1e-9
#                         for the simulated steps, and DCP_GATE_TOLERANCE, default 0.02, for measured
#                         ones: `dcpbench gate --help`)
#   ci/gate.sh --update   run the suite and overwrite the baseline (commit the result; say why):
#                         refused on a tree with changes outside results/, whose baseline no commit
#                         could reproduce
#
# Environment: DCPBENCH (binary; when set and not an executable file, exit 2; when unset,
# build/dcpbench, brought up to date here first, so that a stale binary is never gated).
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
tuned_baseline=results/baseline/tuned.json
tuned_current=build/gate/tuned.json
tolerance="${DCP_GATE_TOLERANCE:-0.02}"
sim_tolerance="${DCP_GATE_SIM_TOLERANCE:-1e-9}"
dcpbench="${DCPBENCH:-build/dcpbench}"

if [ -n "${DCPBENCH:-}" ] && [ ! -x "$DCPBENCH" ]; then
  # A binary named on purpose and missing: stop, rather than gate another one built here.
  echo "ci/gate.sh: DCPBENCH=$DCPBENCH is not an executable file" >&2
  exit 2
fi
if [ $update -eq 1 ]; then
  # Untracked files count too (a new scenario would enter the baseline, then fail on a clean clone);
  # build/ is ignored.
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "ci/gate.sh: --update outside a git checkout: the baseline must be the numbers of a commit" >&2; exit 2; }
  if [ -n "$(git status --porcelain -- . ':(exclude)results')" ]; then
    echo "ci/gate.sh: --update on a tree with uncommitted changes or untracked files (git status): commit them first, so that the baseline is the numbers of a commit" >&2
    exit 2
  fi
fi
if [ -z "${DCPBENCH:-}" ]; then
  # Always (a no-op when up to date): a binary older than the sources gated old code and passed.
  [ -f build/CMakeCache.txt ] || cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_DEBUG_INFO=lines >/dev/null
  cmake --build build -j "$(nproc)" --target dcpbench >&2 ||
    { echo "ci/gate.sh: building build/dcpbench failed (above): nothing was gated" >&2; exit 1; }
fi

mkdir -p "$(dirname "$current")"
# Simulation scenarios only: scenarios/converge-*.json are convergence scenarios (dcpbench converge).
scenarios=()
for f in scenarios/*.json; do
  case "$(basename "$f")" in converge-*) ;; *) scenarios+=("$f") ;; esac
done
# The interleaved pipeline: llama13b-github at VPP 5 (40 layers on PP 8: 5 per stage; the
# prototype's and the Megatron ports' tuned setting there), named apart from the shipped one.
vpp5="$(dirname "$current")/llama13b-github-vpp5.json"
python3 - scenarios/llama13b-github.json "$vpp5" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
s["name"] += "-vpp5"
s["description"] = "ci/gate.sh: " + sys.argv[1] + " at VPP 5 (cluster.vpp), the interleaved pipeline"
s["cluster"]["vpp"] = 5
s.pop("published", None)  # NVIDIA measured VPP 1: their numbers are not this setting's
s.setdefault("sources", {})["cluster.vpp"] = "ci/gate.sh: 5 (40 layers on PP 8, 5 per stage), not the script's"
json.dump(s, open(sys.argv[2], "w"), indent=1)
EOF
scenarios+=("$vpp5")
echo "ci/gate.sh: running ${#scenarios[@]} scenarios x $steps steps (simulated)" >&2
"$dcpbench" run "${scenarios[@]}" --steps "$steps" --quiet --no-detail --out "$current" > "$(dirname "$current")/table.txt"
tuned_scenarios=(scenarios/megatron-example-*gpu.json scenarios/llama13b-github-8layers.json scenarios/llama13b-commoncrawl-8layers.json)
for f in "${tuned_scenarios[@]}"; do
  [ -f "$f" ] || { echo "ci/gate.sh: $f (a scenario gated with --tune) is missing" >&2; exit 2; }
done
echo "ci/gate.sh: running ${#tuned_scenarios[@]} scenarios x $steps steps with --tune (simulated)" >&2
"$dcpbench" run "${tuned_scenarios[@]}" --tune --steps "$steps" --quiet --no-detail --out "$tuned_current" \
  > "$(dirname "$current")/tuned-table.txt"

if [ $update -eq 1 ]; then
  mkdir -p "$(dirname "$baseline")"
  # Copies first, then the two renames: a failed copy leaves both baselines as they were. (Under
  # set -e a failure inside an && list does not stop the script, hence the explicit check.)
  { cp "$current" "$baseline.tmp" && cp "$tuned_current" "$tuned_baseline.tmp" &&
      mv "$baseline.tmp" "$baseline" && mv "$tuned_baseline.tmp" "$tuned_baseline"; } || {
    rm -f "$baseline.tmp" "$tuned_baseline.tmp"
    echo "ci/gate.sh: --update failed writing $baseline / $tuned_baseline (above): check both with git status" >&2
    exit 1
  }
  echo "ci/gate.sh: baselines updated: $baseline, $tuned_baseline (commit them)" >&2
  exit 0
fi
for b in "$baseline" "$tuned_baseline"; do
  if [ ! -f "$b" ]; then
    echo "ci/gate.sh: no baseline at $b; create one with: ci/gate.sh --update" >&2
    exit 1
  fi
done
# Both gates run, so that one report names every regression; either failing fails the script, with
# the larger of the two exit codes (2, an input error, over 1, a regression: dcpbench gate --help).
rc=0
"$dcpbench" gate --baseline "$baseline" --current "$current" --tolerance "$tolerance" --sim-tolerance "$sim_tolerance" || rc=$?
echo "ci/gate.sh: --tune rows ($tuned_baseline):" >&2
"$dcpbench" gate --baseline "$tuned_baseline" --current "$tuned_current" --tolerance "$tolerance" --sim-tolerance "$sim_tolerance" || {
  r=$?
  [ "$r" -le "$rc" ] || rc=$r
}
exit $rc
