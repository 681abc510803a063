#!/usr/bin/env bash
# The README's main command: builds dcpbench, runs the two Llama-13B scenarios of NVIDIA's
# Dynamic-CP benchmark (at Llama-13B's 40 layers and at the 8 its script sets: which one NVIDIA
# measured is unpublished) and Megatron's own example benchmark (4 to 64 GPUs), each as the upstream
# script sets it ("published" setting) and at each strategy's best setting under the memory model
# (--tune), with the +-20% sensitivity study (--sensitivity) and 20 data draws (--draws); writes results/demo.json (schema
# dcpbench.results.v1) and the charts under results/charts/, and prints our tables beside NVIDIA's
# and Megatron's published numbers (absolute and speedups, with the hardware we assume).
# Every number of `run` is simulated (discrete-event simulator over the cost model, H100 profile);
# the table and the charts say so, with the cost model and calibration. Then `dcpbench converge`
# on scenarios/converge-moby.json (results/converge-moby.json + converge_*.png charts), which
# executes its model on CPU threads and says so.
# Environment: DCP_JOBS (parallel build jobs, default nproc), DCP_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DCP_JOBS:-$(nproc)}"
build="${DCP_BUILD_DIR:-build}"

if [ -x ci/install.sh ]; then
  ci/install.sh
else
  packages=(build-essential cmake g++ libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
            libcli11-dev libopenmpi-dev openmpi-bin python3-matplotlib)
  missing=()
  for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

echo "== build (RelWithDebInfo, $build/: the same configuration as ci/test.sh) ==" >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_DEBUG_INFO=lines >/dev/null
cmake --build "$build" -j "$jobs" --target dcpbench
# The Python module (build/python/dcpbench*.so) when pybind11-dev and python3-dev are installed.
if [ -f "$build"/harness/python/Makefile ]; then cmake --build "$build" -j "$jobs" --target dcpbench_python; fi

scenarios=(scenarios/llama13b-github.json scenarios/llama13b-commoncrawl.json
           scenarios/llama13b-github-8layers.json scenarios/llama13b-commoncrawl-8layers.json
           scenarios/megatron-example-4gpu.json scenarios/megatron-example-8gpu.json
           scenarios/megatron-example-16gpu.json scenarios/megatron-example-32gpu.json
           scenarios/megatron-example-64gpu.json)
mkdir -p results/charts
# --draws 20: every speedup also over 19 further draws of each scenario's global batches, so the
# tables say how far another draw of the same data moves it (harness/draws.h; ~7 min here).
echo "== dcpbench run --tune --sensitivity --draws 20 (simulated) ==" >&2
"$build"/dcpbench run "${scenarios[@]}" --tune --sensitivity --draws 20 --out results/demo.json
echo
echo "== charts ==" >&2
"$build"/dcpbench plot results/demo.json --out results/charts

# The planner evaluation (issue 13): every other shipped scenario, as published and tuned, then
# dcp against nvidia-prototype, megatron-dev, megatron-pr2000 and packing on all of them, with
# where the gain comes from (results/evaluation.md; simulated, like the tables above).
others=(scenarios/llama13b-lognormal16k.json scenarios/code-go-llama3-8b.json
        scenarios/email-spamassassin-llama3-8b.json scenarios/mix-web-code-prose-llama3-8b.json
        scenarios/prose-pydoc-llama3-8b.json scenarios/prose-sotu-llama3-8b.json)
echo "== dcpbench run --tune --draws 20 on the other shipped scenarios (simulated) ==" >&2
"$build"/dcpbench run "${others[@]}" --tune --draws 20 --no-detail --out results/scenarios-tuned.json >/dev/null
echo "== dcpbench evaluate (results/evaluation.md) ==" >&2
"$build"/dcpbench evaluate results/demo.json results/scenarios-tuned.json --out results/evaluation.md
sed -n '/^## Targets/,$p' results/evaluation.md

# Every strategy trains the same model: the tiny attention + Mamba + MTP model on Moby-Dick, 8
# thread ranks, against the single-rank reference (executed on this CPU, not simulated; a few
# minutes on 2 cores; DCP_DEMO_SKIP_CONVERGE=1 skips it).
if [ "${DCP_DEMO_SKIP_CONVERGE:-0}" != "1" ]; then
  echo "== dcpbench converge (executed on CPU threads) ==" >&2
  "$build"/dcpbench converge --scenario scenarios/converge-moby.json --out results/converge-moby.json
  "$build"/dcpbench plot results/converge-moby.json --out results/charts
fi
echo "ci/demo.sh: results in results/demo.json, results/scenarios-tuned.json, results/evaluation.md and" \
     "results/converge-moby.json, charts in results/charts/" \
     "(tflops.png, speedup.png, breakdown.png, rank_busy_<scenario>.png, plan_<scenario>.png," \
     "converge_loss.png, converge_dloss.png, converge_grad.png)"
