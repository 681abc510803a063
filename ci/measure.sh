#!/usr/bin/env bash
# On a GPU machine (issue 10). Steps, all by default, or those named (ci/measure.sh run validate):
#   calibrate  measures the cost model's tables (`dcpbench calibrate --backend cuda`)
#              -> results/calibration/<gpu>-measured.json (h100 or h200 by the card);
#   run        replays the busiest rank's share of every strategy of each scenario on this GPU
#              (`dcpbench run --backend cuda`: the rank's own ops with cuBLASLt and the tensor-core
#              kernels, CP peers virtual) -> results/measured/<scenario>.json, measured rows
#              (TFLOPS/GPU of the share, the public profile's prediction error beside each);
#   validate   predicts the measured shares with the measured calibration from the run's recorded
#              times (`dcpbench share --measured results/measured/<scenario>.json --calibration`:
#              the run's plans, no replay, seconds of CPU) -> results/measured/<scenario>-<strategy>-
#              calibrated.json, per micro-batch and per rank-step error (needs the calibration
#              file and the run step's results).
# Scenarios: DCP_MEASURE_SCENARIOS (default the two Llama-13B ones; one per command keeps a command
# short). DCP_MEASURE_STRATEGIES (comma-separated; default ci/deps.sh's dcp_device_strategies: every
# strategy but bshd, whose padded share is ~2560 s of GPU time on llama13b-github by the simulator,
# against 17-20 s for each of the others). DCP_MEASURE_REPS (default 1) timed repetitions per micro-batch
# after a warm-up run. On the lent machine's 15 minutes, ci/device-run.sh (prebuilt binaries, a
# time budget) is the command to use; this script builds first.
# Builds build-gpu/ first (incrementally, as ci/gpu.sh). Where $OUT names a folder (the device
# tool's), what the steps wrote is also copied there as measure-results.tar.gz.
set -uo pipefail  # a failing strategy is reported at the end, the others still run
cd "$(dirname "$0")/.."
source ci/deps.sh  # the packages, carried in .deps/debs where no registry is reachable (ci/gpu.sh)
dcp_steps ci/measure.sh "calibrate run validate" "$@"
scenarios=(${DCP_MEASURE_SCENARIOS:-scenarios/llama13b-github.json scenarios/llama13b-commoncrawl.json})
for s in "${scenarios[@]}"; do
  [ -f "$s" ] || { echo "ci/measure.sh: DCP_MEASURE_SCENARIOS names '$s', which is not a file" >&2; exit 2; }
done
dcp_require_gpu ci/measure.sh
arch="${DCP_CUDA_ARCH:-90a}"
reps="${DCP_MEASURE_REPS:-1}"
strategies="${DCP_MEASURE_STRATEGIES:-$(IFS=,; echo "${dcp_device_strategies[*]}")}"
calibration="results/calibration/$(dcp_gpu_kind)-measured.json"
dcp_deps || exit 1
dcp_nccl_args
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_CUDA=ON -DDCP_CUDA_ARCH="$arch" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" "${dcp_deps_cmake_args[@]}" || exit 1
cmake --build build-gpu -j "$(nproc)" --target dcpbench || exit 1  # incremental: never a stale binary
failed=()
written=()
if dcp_want calibrate; then
  echo "== calibration: $calibration =="
  build-gpu/dcpbench calibrate --backend cuda --model llama-13b --name "$(basename "$calibration" .json)" \
    --out "$calibration" || exit 1
  written+=("$calibration")
fi
mkdir -p results/measured
for s in "${scenarios[@]}"; do
  name=$(basename "$s" .json)
  if dcp_want run; then
    echo "== measured rows: results/measured/$name.json =="
    if build-gpu/dcpbench run "$s" --backend cuda --reps "$reps" --strategies "$strategies" --out "results/measured/$name.json"; then
      written+=("results/measured/$name.json")
    else
      failed+=("$name (run --backend cuda)")
    fi
  fi
  # Validation: the measured shares predicted with the measured calibration and our kernels'
  # attention table (no dataset's micro-batch went into the calibration: both datasets are held
  # out), from the times the run recorded (no second replay); each file carries per micro-batch and
  # per rank-step the error simulated / measured - 1.
  if dcp_want validate; then
    [ -f "$calibration" ] || { echo "ci/measure.sh: validate needs $calibration (step calibrate)" >&2; exit 1; }
    [ -f "results/measured/$name.json" ] ||
      { echo "ci/measure.sh: validate needs results/measured/$name.json (step run)" >&2; exit 1; }
    for strategy in ${strategies//,/ }; do
      out="results/measured/$name-$strategy-calibrated.json"
      if build-gpu/dcpbench share "$s" --strategy "$strategy" --measured "results/measured/$name.json" \
           --calibration "$calibration" --attention-backend dcpbench --out "$out"; then
        written+=("$out")
      else
        failed+=("$name/$strategy (calibrated)")
      fi
    done
  fi
done
# Files written on the device tool's machine come back only through $OUT (at most 8 files): one
# archive of what this run wrote, also when a strategy failed.
if [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ ${#written[@]} -gt 0 ]; then
  tar czf "$OUT/measure-results.tar.gz" "${written[@]}"
  echo "ci/measure.sh: ${#written[@]} files copied to \$OUT/measure-results.tar.gz (unpack in the checkout: tar xzf ...)"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci/measure.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "ci/measure.sh: steps ${steps[*]} passed: results/measured/<scenario>.json (measured rows; dcpbench table"
echo "  prints them) and results/measured/*-calibrated.json (rank_step_error: simulated / measured - 1)"
