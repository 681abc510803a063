#!/usr/bin/env bash
# The one command for the lent GPU machine (issues 9 and 10), sized for its 15 device-minutes:
# runs the binaries ci/device-bundle.sh prebuilt here (no build there), step by step in the order
# of need, each under a timeout, skipping a step whose predicted time no longer fits the budget,
# and archiving what it wrote after every step, so a stopped run still brings its results back.
#   ci/device-run.sh [--budget-s S] [--resume] [STEP...]   (all steps by default, in this order)
#   ci/device-run.sh --check   (here, before the device call: is the bundle built from this tree,
#                               is .deps/debs there? exit 2 naming what is not; ci/device-bundle.sh
#                               runs it last)
#   gpu-tests  the gpu-labelled tests (CUDA kernels vs the float64 reference, the replay, the
#              NCCL communicator on one rank under mpirun) with DCP_REQUIRE_GPU=1: a skip fails;
#   bench      bench_attn_cuda (ours beside a cuBLAS GEMM of the same FLOPs) and, with the python3
#              that has PyTorch, its FlashAttention-2 and cuDNN backends on the same cases
#              -> results/bench/attn_<gpu>.{json,png};
#   calibrate  dcpbench calibrate --backend cuda -> results/calibration/<gpu>-measured.json;
#   measure    dcpbench run --backend cuda --steps 1 --reps 1, one strategy per command (a kill at
#              the limit loses only that one): the busiest rank's share of packing, dcp,
#              nvidia-prototype, megatron-dev and megatron-pr2000 replayed (warm-up + 1 timed run)
#              -> results/measured/<scenario>-<strategy>.json (bshd is left out: its padded share
#              is ~2560 s of GPU time on llama13b-github);
#   validate   dcpbench share --measured with the measured calibration, every measured strategy: the
#              times the measure step recorded, predicted again (CPU only, seconds; no replay)
#              -> results/measured/<scenario>-<strategy>-calibrated.json;
#   measure runs for llama13b-github, then llama13b-commoncrawl; validate after all of them.
# (stress, test_attn_cuda's *Stress* cases at large sizes, whose CPU references take ~13 s of one
#  core on this project's VM (85-90 s until 2026-12-05) and which gpu-tests leaves out so that its
#  60 s limit covers the other kernel cases, runs after calibrate.)
# Budget: --budget-s, or DCP_DEVICE_BUDGET_S, default 560 s (give the device call timeout_s 590: a
# step stopped at its limit is killed 10 s later, then archived). It counts from the set-up on.
# A step is skipped when its predicted seconds exceed what is left: the shares by the bundle's
# predicted GPU time (2 x the simulated busy time + 15 s to plan and simulate), the other steps
# by estimates (no GPU has run them yet). --resume skips every step whose output files exist
# already (a second call, after the first call's archive was unpacked here, goes on from there).
# Needs: .deps/bundle (ci/device-bundle.sh, from this very tree: refused otherwise) and
# .deps/debs (ci/device-deps.sh; the OpenMPI and Google Benchmark runtime); carry both.
# Output: the log and one archive, device-results.tar.gz, in $OUT (the device tool's folder) when
# set, else in results/device/; unpack the archive in the checkout: tar xzf device-results.tar.gz.
# The card's files are named by its kind (nvidia-smi: h100 or h200): results/bench/attn_<gpu>.json,
# results/calibration/<gpu>-measured.json.
set -uo pipefail
cd "$(dirname "$0")/.."
source ci/deps.sh
budget_s="${DCP_DEVICE_BUDGET_S:-560}"
resume=0
check=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --resume) resume=1; shift ;;
    --check) check=1; shift ;;
    --budget-s) budget_s="${2:-}"; shift 2 || { echo "ci/device-run.sh: --budget-s needs a value" >&2; exit 2; } ;;
    --budget-s=*) budget_s="${1#*=}"; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ "$budget_s" =~ ^[0-9]+$ ]] && [ "$budget_s" -ge 1 ] && [ "$budget_s" -le 3600 ] ||
  { echo "ci/device-run.sh: --budget-s '$budget_s' is not a whole number of seconds in [1, 3600]" >&2; exit 2; }
dcp_steps ci/device-run.sh "gpu-tests bench calibrate stress measure validate" "${args[@]}"

bundle=.deps/bundle
bin="$bundle/bin"
manifest="$bundle/manifest.json"
[ -f "$manifest" ] || { echo "ci/device-run.sh: no $manifest: run ci/device-bundle.sh first and carry .deps/bundle" >&2; exit 2; }
# The manifest once: its source hash and sha, then the predicted GPU seconds of every share
# (2 x the simulated busy time: warm-up + 1 timed run), as "scenario strategy seconds" lines.
{ read -r want_hash DCP_GIT_SHA; declare -A share_s; while read -r sc st sec; do share_s["$sc $st"]=$sec; done; } < <(
  python3 -c '
import json, math, sys
m = json.load(open(sys.argv[1]))
print(m["source_hash"], m["git_sha"])
for scenario, shares in m.get("share_busy_s", {}).items():
    for strategy, busy in shares.items():
        print(scenario, strategy, math.ceil(2 * busy))' "$manifest")
have_hash="$(dcp_source_hash)"
[ "$want_hash" = "$have_hash" ] || {
  differ="$(dcp_source_sums | python3 -c '
import json, sys
want = json.load(open(sys.argv[1])).get("sources", {})
have = dict(reversed(line.rstrip("\n").split("  ", 1)) for line in sys.stdin)
diff = sorted(p for p in set(want) | set(have) if want.get(p) != have.get(p))
print(" ".join(diff[:8]) + (" ..." if len(diff) > 8 else ""))' "$manifest")"
  echo "ci/device-run.sh: the bundle was built from other sources (hash $want_hash, this tree $have_hash; differing: ${differ:-?}): run ci/device-bundle.sh again" >&2
  exit 2
}
if [ $check -eq 1 ]; then
  compgen -G ".deps/debs/*.deb" >/dev/null ||
    { echo "ci/device-run.sh: .deps/debs has no packages: run ci/device-deps.sh (the device lacks OpenMPI and Google Benchmark)" >&2; exit 2; }
  echo "ci/device-run.sh --check: the bundle matches this tree (source $have_hash) and .deps/debs is there"
  exit 0
fi
chmod +x "$bin"/* 2>/dev/null  # in case the copy to this machine dropped the mode bits
export DCP_GIT_SHA  # the tree here has no .git: the test binaries and bench_attn_cuda record this (dcpbench its build's, the same)

out="${OUT:-}"
[ -n "$out" ] && [ -d "$out" ] || out=results/device
mkdir -p "$out" results/device results/bench results/calibration results/measured
log="$out/device-run.log"
exec > >(tee -a "$log") 2>&1
tee_pid=$!
trap 'exec 1>&- 2>&-; wait "$tee_pid" 2>/dev/null' EXIT  # the log whole before the script ends
start=$SECONDS
echo "== ci/device-run.sh: steps ${steps[*]}, budget ${budget_s} s, bundle ${DCP_GIT_SHA:0:12} (source $have_hash) =="
dcp_require_gpu ci/device-run.sh
dcp_env_report

failed=0    # the exit status: 1 when any step failed
last_rc=0   # the last run_step's exit status ("skipped" when it did not run)
# Runtime libraries: OpenMPI and Google Benchmark from the carried packages; libcudart, cuBLAS(Lt)
# and NCCL the machine's own (toolkit, else PyTorch's nvidia-* wheels).
if [ -n "$(dcp_deps_missing | tr -d ' \n')" ] && ! compgen -G ".deps/debs/*.deb" >/dev/null; then
  echo "ci/device-run.sh: this machine lacks $(dcp_deps_missing | paste -sd' ' -) and .deps/debs is empty: run ci/device-deps.sh here and carry .deps/debs" >&2
  exit 2
fi
dcp_deps || exit 1
# The bundle's binaries get their own library path (bin_ld, passed to them alone, so PyTorch keeps
# its own): the folders of the libraries they miss, from the toolkit, else the nvidia-* wheels.
# dcpbench and test_exec_cuda load cuBLASLt with dlopen (exec/cuda/gemm_lt.cpp), so ldd does not
# list it for them: its soname (read from the bundle's dcpbench) counts as missing when python3
# cannot load it with bin_ld either, and its folder is searched like the others'.
bin_ld="${LD_LIBRARY_PATH:-}"
lt_so="$(grep -ao 'libcublasLt\.so\.[0-9]*' "$bin/dcpbench" 2>/dev/null | head -1 || true)"
missing_libs() {
  {
    LD_LIBRARY_PATH="$bin_ld" ldd "$bin"/* 2>/dev/null | awk '/not found/ { print $1 }'
    [ -z "$lt_so" ] || LD_LIBRARY_PATH="$bin_ld" python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$lt_so" 2>/dev/null ||
      echo "$lt_so"
  } | sort -u
}
if [ -n "$(missing_libs)" ]; then
  for so in $(missing_libs); do
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
             $("${DCP_TORCH_PYTHON:-python3}" - "$so" <<'EOF' 2>/dev/null
import glob, os, sys
try:
    import nvidia
except ImportError:
    raise SystemExit
for root in nvidia.__path__:
    for so in sorted(glob.glob(os.path.join(root, "**", sys.argv[1]), recursive=True)):
        print(os.path.dirname(so))
EOF
); do
      if [ -e "$d/$so" ]; then
        [[ ":$bin_ld:" == *":$d:"* ]] || bin_ld="${bin_ld:+$bin_ld:}$d"
        break
      fi
    done
  done
fi
if [ -n "$(missing_libs)" ]; then
  # Per binary: one that cannot load fails its own step at once (exit 127); the others still run.
  # dcpbench and the test binaries link NCCL and OpenMPI (readelf -d, 2026-12-05: test_attn_cuda
  # too, through dcp_comm); only bench_attn_cuda does without them (cudart, cuBLAS, benchmark).
  echo "ci/device-run.sh: warning: $(missing_libs | paste -sd' ' -) not found (LD_LIBRARY_PATH=$bin_ld); the steps of the binaries needing them will fail:" >&2
  for f in "$bin"/*; do
    m="$(LD_LIBRARY_PATH="$bin_ld" ldd "$f" 2>/dev/null | awk '/not found/ { print $1 }' | paste -sd' ' -)"
    [ -n "$m" ] && echo "  $(basename "$f"): $m" >&2
  done
  failed=1
fi
echo "libraries of the bundle's binaries: LD_LIBRARY_PATH=$bin_ld"
B=(env LD_LIBRARY_PATH="$bin_ld")  # prefix of every command that runs a bundled binary
# The carried OpenMPI's mpirun when ci/deps.sh set it up (OPAL_PREFIX), before any system one: the
# two must not mix versions.
mpirun="$( { [ -n "${OPAL_PREFIX:-}" ] && [ -x "$OPAL_PREFIX/bin/mpirun.openmpi" ] && echo "$OPAL_PREFIX/bin/mpirun.openmpi"; } ||
  command -v mpirun.openmpi || command -v mpirun || true)"
# The card's kind names its files (an H200 lent in place of an H100 must not write h100 files).
# One nvidia-smi query, bounded (dcp_nvidia_smi), for the card and the driver.
# "NAME, DRIVER": the driver after the last ", " (a name may hold a comma itself).
read -r line < <(dcp_nvidia_smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
card="${line%, *}" driver="${line##*, }"
[[ "$line" == *", "* ]] || { card="$line" driver=""; }
gpu="$(dcp_card_kind "$card")"
echo "card: $gpu (${card:-nvidia-smi gave no name})"
# The binaries are CUDA 13 builds, which need an r580 driver or newer: an older one fails every
# CUDA call with cudaErrorInsufficientDriver, so say which driver this is first (helper-28).
echo "driver: ${driver:-unknown}"
case "$driver" in [0-9]*.*) [ "${driver%%.*}" -ge 580 ] 2>/dev/null ||
  echo "ci/device-run.sh: warning: driver $driver is older than r580, which CUDA 13 binaries need" ;; esac

written=()
archive() {  # every file written so far, in one archive where the device tool fetches it (the log
             # goes in too when it is not in $OUT already)
  local f present=()
  for f in "${written[@]}"; do [ -f "$f" ] && present+=("$f"); done
  [ "$out" = results/device ] && present+=("$log")
  # GNU tar exits 1 when a file changed while it read it: the log, which tee is still writing. The
  # archive is whole then (the log cut where tar read it); only 2 (fatal) keeps the previous one.
  # (It had kept the previous archive at exit 1 too, so a step's results could miss the archive:
  # seen once under ctest -j2, where the log is written while tar reads it.)
  local rc=0
  tar czf "$out/device-results.tar.gz.tmp" "${present[@]}" 2>/dev/null || rc=$?
  if [ $rc -le 1 ]; then mv "$out/device-results.tar.gz.tmp" "$out/device-results.tar.gz"; else
    echo "ci/device-run.sh: archiving failed (tar rc $rc); the previous archive stays" >&2; fi
}
summary=()
left() { echo $(( budget_s - (SECONDS - start) )); }
# done_already FILE...: with --resume, true (and said) when every FILE exists.
done_already() {
  local f
  [ $resume -eq 1 ] || return 1
  for f in "$@"; do [ -f "$f" ] || return 1; done
  summary+=("$(basename "$1"): kept from an earlier call (--resume)")
  return 0
}
# passed_already XML: done_already, for a gtest XML only when it records no failure (gtest writes
# its XML for a failed run too).
passed_already() {
  [ -f "$1" ] && grep -q '<testsuites[^>]* failures="0"[^>]* errors="0"' "$1" && done_already "$1"
}
# run_step NAME PREDICTED_S TIMEOUT_S CMD...: runs CMD unless PREDICTED_S exceeds the time left.
run_step() {
  local name="$1" predicted="$2" limit="$3" t0 rc
  shift 3
  if [ "$predicted" -gt "$(left)" ]; then
    echo "== $name: skipped (predicted ${predicted} s, $(left) s of the budget left) =="
    summary+=("$name: skipped, predicted ${predicted} s > $(left) s left")
    last_rc=skipped
    return 0
  fi
  [ "$limit" -gt "$(left)" ] && limit="$(left)"
  echo "== $name (predicted ${predicted} s, limit ${limit} s, $(left) s left) =="
  t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  last_rc=$rc
  [ $rc -eq 0 ] || failed=1
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "ci/device-run.sh: $name stopped at its ${limit} s limit"
  summary+=("$name: rc $rc in $(( SECONDS - t0 )) s (predicted ${predicted} s)")
  archive
  return 0
}

if dcp_want gpu-tests; then
  # Not --gtest_brief: gtest names each case as it starts, so a case stopped at the step's limit
  # (a kernel that hangs) is named in the log; the XML is only written when a binary exits.
  for t in "${dcp_device_tests[@]}"; do
    xml="results/device/$t.xml"
    written+=("$xml")
    passed_already "$xml" && continue
    # 60 s each (predicted 20): kernels that never ran on a GPU may hang, and 3 x 180 s had been
    # the whole budget, leaving nothing for bench, calibrate and measure.
    if [ "$t" = test_comm_nccl ]; then  # NCCL bootstrapped through MPI: one rank on the one GPU
      run_step "$t" 20 60 "${B[@]}" DCP_REQUIRE_GPU=1 "$mpirun" --allow-run-as-root --oversubscribe -np 1 \
        "$bin/$t" --gtest_output="xml:$xml"
    else
      # test_attn_cuda without its two stress cases: their float64 and naive references took 85-90 s
      # of one CPU core (timed on this project's VM, helper-35 and 2026-12-05; ~13 s there since
      # attn/host_loops.h) and gtest runs them before the parameterised kernel cases, so the 60 s
      # limit could stop the binary before any of those (step stress).
      only=(); [ "$t" = test_attn_cuda ] && only=(--gtest_filter='-*Stress*')
      run_step "$t" 20 60 "${B[@]}" DCP_REQUIRE_GPU=1 "$bin/$t" ${only[@]+"${only[@]}"} \
        --gtest_output="xml:$xml"
    fi
  done
fi

if dcp_want bench; then
  # 28 cases x (ours, cuBLAS) x (fwd, bwd) at 0.1 s each, then PyTorch's two backends, 20 reps.
  bench_out="results/bench/attn_$gpu"
  written+=(results/device/attn_cases.json results/device/bench_attn_cuda.json "$bench_out.json" "$bench_out.png")
  if ! done_already "$bench_out.json"; then
    run_step bench-ours 40 150 "${B[@]}" "$bin/bench_attn_cuda" --benchmark_min_time=0.1 \
      --benchmark_out=results/device/bench_attn_cuda.json --benchmark_out_format=json
    "${B[@]}" "$bin/bench_attn_cuda" --dump-cases=results/device/attn_cases.json || { summary+=("bench: --dump-cases failed"); failed=1; }
    # Only on a whole benchmark file: Google Benchmark creates it when it starts, so a bench-ours
    # stopped at its limit leaves a truncated one.
    if [ "$last_rc" = 0 ]; then
      run_step bench-peers 60 180 "${DCP_TORCH_PYTHON:-python3}" \
        harness/python/bench/attn_peers.py --cases results/device/attn_cases.json \
        --bench results/device/bench_attn_cuda.json --out "$bench_out.json"
    else
      summary+=("bench-peers: skipped, bench-ours did not finish (rc $last_rc)")
    fi
    [ -f "$bench_out.json" ] &&
      "${DCP_TORCH_PYTHON:-python3}" harness/python/bench/attn_peers.py --redraw "$bench_out.json" \
        --chart "$bench_out.png"
    archive
  fi
fi

calibration="results/calibration/$gpu-measured.json"
if dcp_want calibrate; then
  written+=("$calibration")
  done_already "$calibration" ||
    run_step calibrate 60 180 "${B[@]}" "$bin/dcpbench" calibrate --backend cuda --model llama-13b \
      --name "$gpu-measured" --out "$calibration"
fi

if dcp_want stress; then
  # The attention kernels at the large sizes (test_attn_cuda's *Stress* cases), after calibrate and
  # before the measured runs: the benchmark's numbers stand on kernels that are right at such sizes
  # too, and a measured run skipped for time loses one strategy only. Their float64 and naive CPU
  # references take ~13 s of one core on this project's VM (timed 2026-12-05: forward 5.0 + 1.6 s,
  # backward 0.9 + 4.5 + 1.0 s; 85-90 s before attn/host_loops.h; no device has timed them):
  # predicted 25 s, limit 120 s.
  xml="results/device/test_attn_cuda-stress.xml"
  written+=("$xml")
  passed_already "$xml" ||
    run_step stress 25 120 "${B[@]}" DCP_REQUIRE_GPU=1 "$bin/test_attn_cuda" \
      --gtest_filter='*Stress*' --gtest_output="xml:$xml"
fi

busy() { echo "${share_s["$1 $2"]:-9999}"; }  # busy SCENARIO STRATEGY: predicted s (none: never fits)
if dcp_want measure; then
  for s in "${dcp_device_scenarios[@]}"; do
    name="$(basename "$s" .json)"
    for st in "${dcp_device_strategies[@]}"; do
      f="results/measured/$name-$st.json"
      written+=("$f")
      done_already "$f" && continue
      p=$(( $(busy "$s" "$st") + 15 ))
      run_step "measure $name/$st" "$p" $(( p * 2 + 60 )) "${B[@]}" "$bin/dcpbench" run "$s" --backend cuda \
        --steps 1 --reps 1 --strategies "$st" --out "$f"
    done
  done
fi
# After every measurement, not between the scenarios: validate needs no GPU (it re-predicts the
# recorded times, seconds of CPU, and is re-run here for what the budget skipped), so it must not
# take the time of a GPU measurement of the second scenario (helper-57's review).
if dcp_want validate; then
  for s in "${dcp_device_scenarios[@]}"; do
    name="$(basename "$s" .json)"
    for st in "${dcp_device_strategies[@]}"; do
      f="results/measured/$name-$st-calibrated.json"
      written+=("$f")
      done_already "$f" && continue
      if [ ! -f "$calibration" ]; then
        summary+=("validate $name/$st: skipped, no $calibration (step calibrate)")
        continue
      fi
      if [ ! -f "results/measured/$name-$st.json" ]; then
        summary+=("validate $name/$st: skipped, no results/measured/$name-$st.json (step measure)")
        continue
      fi
      run_step "validate $name/$st" 10 60 "${B[@]}" "$bin/dcpbench" share "$s" --strategy "$st" \
        --measured "results/measured/$name-$st.json" --calibration "$calibration" --attention-backend dcpbench \
        --out "$f"
    done
  done
fi

archive
echo "== ci/device-run.sh: $(( SECONDS - start )) s of the ${budget_s} s budget =="
for line in "${summary[@]}"; do echo "  $line"; done
echo "results: $out/device-results.tar.gz (unpack in the checkout: tar xzf ...); log: $log"
exit $failed
