#!/usr/bin/env bash
# On a GPU machine (issue 10): measures the cost model's tables (`dcpbench calibrate --backend cuda`
# -> results/calibration/h100-measured.json); replays the busiest rank's share of every strategy of
# the Llama-13B scenarios on this GPU (`dcpbench run --backend cuda`: the rank's own ops with
# cuBLASLt and the tensor-core kernels, CP peers virtual) -> results/measured/llama13b.json, measured
# rows (TFLOPS/GPU of the share, the public profile's prediction error beside each); then predicts
# the same shares with the measured calibration (`dcpbench share --measure --calibration`) ->
# results/measured/<scenario>-<strategy>-calibrated.json, per micro-batch and per rank-step error.
# Builds build-gpu/ first if needed (as ci/gpu.sh). DCP_MEASURE_REPS (default 1) timed repetitions
# per micro-batch after a warm-up run; DCP_MEASURE_SCENARIOS to choose others. Where $OUT names a
# folder (the device tool's), the results are also copied there as measure-results.tar.gz.
set -uo pipefail  # a failing strategy is reported at the end, the others still run
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "ci/measure.sh: no NVIDIA GPU visible (nvidia-smi -L failed); run this on a GPU machine" >&2
  exit 2
fi
arch="${DCP_CUDA_ARCH:-90a}"
source ci/deps.sh  # the packages, carried in .deps where no registry is reachable (ci/gpu.sh)
dcp_deps || exit 1
dcp_nccl_args
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_CUDA=ON -DDCP_CUDA_ARCH="$arch" \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" "${dcp_deps_cmake_args[@]}" || exit 1
cmake --build build-gpu -j "$(nproc)" --target dcpbench || exit 1  # incremental: never a stale binary
failed=()
echo "== calibration: results/calibration/h100-measured.json =="
build-gpu/dcpbench calibrate --backend cuda --model llama-13b --out results/calibration/h100-measured.json || exit 1
mkdir -p results/measured
scenarios=(${DCP_MEASURE_SCENARIOS:-scenarios/llama13b-github.json scenarios/llama13b-commoncrawl.json})
echo "== measured rows: results/measured/llama13b.json =="
build-gpu/dcpbench run "${scenarios[@]}" --backend cuda --reps "${DCP_MEASURE_REPS:-1}" \
  --out results/measured/llama13b.json || failed+=("run --backend cuda")
# Validation: the same shares predicted with the measured calibration and our kernels' attention
# table (no dataset's micro-batch went into the calibration: both datasets are held out); each
# file carries per micro-batch and per rank-step the error simulated / measured - 1.
for s in "${scenarios[@]}"; do
  name=$(basename "$s" .json)
  for strategy in $(python3 -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))['strategies']))" "$s"); do
    build-gpu/dcpbench share "$s" --strategy "$strategy" --measure --reps "${DCP_MEASURE_REPS:-1}" \
      --calibration results/calibration/h100-measured.json --attention-backend dcpbench \
      --out "results/measured/$name-$strategy-calibrated.json" || failed+=("$name/$strategy (calibrated)")
  done
done
# Files written on the device tool's machine come back only through $OUT (at most 8 files): one
# archive of everything this script wrote, also when a strategy failed.
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  tar czf "$OUT/measure-results.tar.gz" results/calibration/h100-measured.json results/measured
  echo "ci/measure.sh: results copied to \$OUT/measure-results.tar.gz (unpack in the checkout: tar xzf ...)"
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "ci/measure.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "ci/measure.sh: results/measured/llama13b.json (measured rows; dcpbench table to print them) and"
echo "  results/measured/*-calibrated.json (rank_step_error: simulated / measured - 1)"
