#!/usr/bin/env bash
# Test of ci/device-run.sh, the one command for the lent GPU machine (run by ctest as ci_device_run).
# In a scratch checkout whose bundle holds stand-in binaries (shell scripts that record their
# arguments and write their --out files) and a stand-in nvidia-smi, it checks that
#   1. without a bundle, with a bundle built from other sources, or without a GPU it exits 2 with
#      one line saying which, before running anything;
#   2. measure runs one strategy per command (--reps 1: warm-up + one timed run, as the budget
#      assumes), in order of need, while its predicted share time (the bundle's manifest) fits the
#      budget left, and skips those that do not;
#   3. a step whose prediction exceeds what is left is skipped and said so, a failing step makes
#      the exit code 1 and the later steps still run, a step running past the budget is stopped
#      and what it and the earlier steps wrote is in the archive;
#   4. every file the steps wrote is in the archive, with the sha of the manifest passed on
#      (DCP_GIT_SHA) to the binaries; --resume skips the steps whose output exists, except a test
#      binary whose XML records failures;
#   5. --check (run here by ci/device-bundle.sh) passes a bundle of this tree with .deps/debs and
#      refuses one without the packages; the card's kind names its files (h100, and h200 for an H200).
# Needs the Debian packages ci/install.sh installs (device-run.sh checks for them as on the device).
set -euo pipefail
unset OUT DCP_DEVICE_BUDGET_S DCP_TORCH_PYTHON
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect_archived FILE...: each FILE is in the run's archive (listed to a file, not piped into grep).
expect_archived() {
  tar tzf results/device/device-results.tar.gz >"$work/tar" || fail "no readable archive"
  local f
  for f in "$@"; do grep -qxF "$f" "$work/tar" || fail "$f not archived: $(cat "$work/tar")"; done
}
co="$work/co"
mkdir -p "$co/ci" "$co/cmake" "$co/impl" "$co/harness/python/bench" "$co/baselines" "$co/scenarios" "$co/.deps/bundle/bin" "$work/gpu"
cp "$repo/ci/deps.sh" "$repo/ci/device-run.sh" "$co/ci/"
echo "project(x)" >"$co/CMakeLists.txt"
echo "// a source" >"$co/impl/a.cpp"
for s in llama13b-github llama13b-commoncrawl; do echo '{}' >"$co/scenarios/$s.json"; done
calls="$work/calls"
# Stand-in binaries: record "name args", write the file named by --out / --benchmark_out /
# --gtest_output=xml:, fail where told (FAIL_<name>=1).
stub() {
  cat >"$1" <<EOF
#!/usr/bin/env bash
n=\$(basename "\$0")
echo "\$n \$* sha=\${DCP_GIT_SHA:-}" >>"$calls"
prev=""
v="FAIL_\${n//-/_}"
failures=0
[ "\${!v:-0}" = 1 ] && failures=1
for a in "\$@"; do
  case "\$a" in
    --benchmark_out=*) echo '{"benchmarks": []}' >"\${a#*=}" ;;
    --gtest_output=xml:*) echo "<testsuites tests=\"1\" failures=\"\$failures\" disabled=\"0\" errors=\"0\">" >"\${a#*=xml:}" ;;
    --dump-cases=*) echo '[]' >"\${a#*=}" ;;
  esac
  [ "\$prev" = --out ] && echo "{\"by\": \"\$n\"}" >"\$a"
  prev="\$a"
done
[ "\$failures" = 1 ] && exit 3
v="SLEEP_\${n//-/_}"
[ -n "\${!v:-}" ] && exec sleep "\${!v}"
exit 0
EOF
  chmod +x "$1"
}
for b in dcpbench test_attn_cuda test_model_cuda test_exec_cuda test_harness_cuda test_comm_nccl bench_attn_cuda; do
  stub "$co/.deps/bundle/bin/$b"
done
cat >"$co/harness/python/bench/attn_peers.py" <<EOF
import sys
open("$calls", "a").write("attn_peers.py " + " ".join(sys.argv[1:]) + "\\n")
if "--out" in sys.argv:
    open(sys.argv[sys.argv.index("--out") + 1], "w").write("{}\\n")
EOF
printf '#!/bin/sh\ncase "$*" in *--query-gpu*) echo "NVIDIA H100 80GB HBM3, PCIe (stand-in), 580.65.06" ;; *) echo "GPU 0: stand-in" ;; esac\n' >"$work/gpu/nvidia-smi"
# mpirun: runs its last arguments (the test binary and its flags) without MPI
printf '#!/usr/bin/env bash\nwhile [ "${1:0:1}" = - ]; do [ "$1" = -np ] && shift; shift; done\nexec "$@"\n' >"$work/gpu/mpirun.openmpi"
mkdir -p "$work/nogpu"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed" >&2\nexit 9\n' >"$work/nogpu/nvidia-smi"
chmod +x "$work/gpu/nvidia-smi" "$work/gpu/mpirun.openmpi" "$work/nogpu/nvidia-smi"
cd "$co"
source ci/deps.sh
manifest() {  # manifest SOURCE_HASH [GITHUB_S]: shares of GITHUB_S (default 10) and 200 s
  python3 - "$1" "${2:-10}" <<'EOF'
import json, sys
strategies = ["packing", "dcp", "nvidia-prototype", "megatron-dev", "megatron-pr2000"]
m = {"schema": "dcpbench.device-bundle.v1", "git_sha": "abc123", "source_hash": sys.argv[1],
     "sources": {"impl/a.cpp": "0" * 64},
     "share_busy_s": {"scenarios/llama13b-github.json": {s: float(sys.argv[2]) for s in strategies},
                      "scenarios/llama13b-commoncrawl.json": {s: 200.0 for s in strategies}}}
json.dump(m, open(".deps/bundle/manifest.json", "w"))
EOF
}

# 1. refusals, before anything runs
rc=0; ci/device-run.sh >"$work/out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "no .deps/bundle/manifest.json" "$work/out" || fail "no bundle: rc $rc, $(cat "$work/out")"
manifest 0000000000000000
rc=0; PATH="$work/gpu:$PATH" ci/device-run.sh >"$work/out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "built from other sources .*differing: CMakeLists.txt impl/a.cpp)" "$work/out" || fail "stale bundle: rc $rc, $(cat "$work/out")"
manifest "$(dcp_source_hash)"
rc=0; PATH="$work/nogpu:$PATH" ci/device-run.sh >"$work/out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "no NVIDIA GPU visible" "$work/out" || fail "no GPU: rc $rc, $(cat "$work/out")"
rc=0; ci/device-run.sh --budget-s 0 >"$work/out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "budget-s '0'" "$work/out" || fail "--budget-s 0: rc $rc, $(cat "$work/out")"
[ ! -e "$calls" ] || fail "a refused run ran something: $(cat "$calls")"

# 2-4. a whole run, budget 300 s, one test failing. The stand-ins take no time, so the later steps
# find nearly all of it left: github's shares need 2 x 10 + 15 = 35 s each, its validations 10 s
# (CPU only: the measured times again with the calibration); commoncrawl's shares need 415 s each:
# skipped, and so are its validations (nothing measured to validate).
rc=0; PATH="$work/gpu:$PATH" FAIL_test_exec_cuda=1 ci/device-run.sh --budget-s 300 >"$work/out" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "a failing test gave rc $rc: $(cat "$work/out")"
grep -q "test_exec_cuda: rc 3" "$work/out" || fail "the failing test is not in the summary"
grep -q "calibrate: rc 0" "$work/out" || fail "the steps after a failing one did not run"
grep -q "bench-peers: rc 0" "$work/out" || fail "the PyTorch peers did not run: $(cat "$work/out")"
for st in packing dcp nvidia-prototype megatron-dev megatron-pr2000; do
  grep -q "^dcpbench run scenarios/llama13b-github.json --backend cuda --steps 1 --reps 1 --strategies $st --out results/measured/llama13b-github-$st.json " "$calls" ||
    fail "github's $st not measured on its own with --reps 1: $(cat "$calls")"
done
for st in packing dcp nvidia-prototype megatron-dev megatron-pr2000; do
  grep -q "^dcpbench share scenarios/llama13b-github.json --strategy $st --measured results/measured/llama13b-github-$st.json --calibration results/calibration/h100-measured.json --attention-backend dcpbench --out results/measured/llama13b-github-$st-calibrated.json " "$calls" ||
    fail "no validate of github/$st from its measured times: $(cat "$calls")"
done
grep -q -- "--measure " "$calls" && fail "a validation replayed on the GPU again: $(cat "$calls")"
# every measurement, run or skipped (commoncrawl's), before any validation (CPU only: it must not
# take a GPU measurement's time); the calls alone could not tell, since commoncrawl measures nothing
last_measure="$(grep -n '^== measure ' "$work/out" | tail -1 | cut -d: -f1)"
first_validate="$(grep -n '^== validate ' "$work/out" | head -1 | cut -d: -f1)"
[ -n "$last_measure" ] && [ -n "$first_validate" ] && [ "$last_measure" -lt "$first_validate" ] ||
  fail "validations are not after every measurement (last measure line ${last_measure:-none}, first validate ${first_validate:-none}): $(cat "$work/out")"
grep -q "^card: h100 (NVIDIA H100 80GB HBM3, PCIe (stand-in))" "$work/out" && grep -q "^driver: 580.65.06" "$work/out" ||
  fail "the card or driver is not read from one nvidia-smi query: $(cat "$work/out")"
grep -q "measure llama13b-commoncrawl/packing: skipped (predicted 415 s" "$work/out" || fail "commoncrawl's measure not skipped: $(cat "$work/out")"
grep -q "validate llama13b-commoncrawl/dcp: skipped, no results/measured/llama13b-commoncrawl-dcp.json (step measure)" "$work/out" ||
  fail "commoncrawl's validate not skipped: $(cat "$work/out")"
grep -q "commoncrawl.*--backend cuda" "$calls" && fail "commoncrawl measured although 415 s per strategy cannot fit"
grep -q "^test_comm_nccl .*sha=abc123" "$calls" || fail "DCP_GIT_SHA not passed on: $(cat "$calls")"
# test_attn_cuda first without its stress cases (whose CPU references outlast the 60 s limit), then
# those alone, after calibrate and before the measured runs
grep -q "^test_attn_cuda --gtest_filter=-\*Stress\* --gtest_output=xml:results/device/test_attn_cuda.xml" "$calls" ||
  fail "test_attn_cuda not run without its stress cases: $(cat "$calls")"
order="$(grep -n -e '^dcpbench calibrate' -e '^test_attn_cuda .*--gtest_filter=\*Stress\*' -e '^dcpbench run' "$calls" | cut -d' ' -f1-2 | cut -d: -f2 | uniq | tr '\n' ,)"
[ "$order" = "dcpbench calibrate,test_attn_cuda --gtest_filter=*Stress*,dcpbench run," ] ||
  fail "the stress cases do not run between calibrate and the measured runs ($order): $(cat "$calls")"
grep -q "stress: rc 0" "$work/out" || fail "the stress step did not run: $(cat "$work/out")"
expect_archived results/device/test_attn_cuda.xml results/device/test_attn_cuda-stress.xml results/device/bench_attn_cuda.json results/bench/attn_h100.json \
  results/calibration/h100-measured.json results/measured/llama13b-github-dcp.json \
  results/measured/llama13b-github-dcp-calibrated.json results/device/device-run.log

# --resume: every output of the run above exists, so nothing runs again but test_exec_cuda, whose
# XML records its failure; what was skipped still does not fit.
: >"$calls"
rc=0; PATH="$work/gpu:$PATH" ci/device-run.sh --budget-s 300 --resume >"$work/out" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "--resume: rc $rc: $(cat "$work/out")"
[ "$(cut -d' ' -f1 "$calls")" = test_exec_cuda ] || fail "--resume ran other than the failed test: $(cat "$calls")"
grep -q "llama13b-github-dcp.json: kept from an earlier call (--resume)" "$work/out" || fail "--resume did not say what it kept"

# --check: the bundle is this tree's; without packages in .deps/debs it is refused, with them passed.
rc=0; ci/device-run.sh --check >"$work/out" 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q ".deps/debs has no packages" "$work/out" || fail "--check without debs: rc $rc, $(cat "$work/out")"
mkdir -p .deps/debs && : >.deps/debs/stand-in.deb
rc=0; ci/device-run.sh --check >"$work/out" 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "the bundle matches this tree" "$work/out" || fail "--check: rc $rc, $(cat "$work/out")"
rm -rf .deps/debs

# A step that runs past the budget is stopped there, and what was written before is archived. The
# github shares are predicted 2 x 0 + 15 = 15 s: packing fits the 24 s budget (with up to 9 s for
# the script's own start on a loaded machine: 16 s left 1 s, and failed once under ctest -j2), is
# stopped at the budget's end (its stand-in sleeps 60 s), and dcp no longer fits.
rm -rf results/measured
manifest "$(dcp_source_hash)" 0
: >"$calls"
rc=0; PATH="$work/gpu:$PATH" SLEEP_dcpbench=60 ci/device-run.sh --budget-s 24 measure >"$work/out" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "a stopped step gave rc $rc: $(cat "$work/out")"
grep -Eq "measure llama13b-github/packing stopped at its (1[5-9]|2[0-4]) s limit" "$work/out" || fail "no stop at the limit: $(cat "$work/out")"
grep -q "measure llama13b-github/dcp: skipped" "$work/out" || fail "dcp not skipped after the budget ran out: $(cat "$work/out")"
[ "$(wc -l <"$calls")" -eq 1 ] || fail "more than the one stopped command ran: $(cat "$calls")"
expect_archived results/device/device-run.log
# An H200 lent in place of the H100 names its files h200: its calibration must not overwrite (or
# be read as) an H100's, nor its benchmark land in attn_h100.json.
mkdir -p "$work/h200"
printf '#!/bin/sh\ncase "$*" in *--query-gpu=name,driver_version*) echo "NVIDIA H200 (stand-in), 575.57.08" ;; *) echo "GPU 0: stand-in" ;; esac\n' >"$work/h200/nvidia-smi"
chmod +x "$work/h200/nvidia-smi"
rm -f results/calibration/*.json
: >"$calls"
rc=0; PATH="$work/h200:$work/gpu:$PATH" ci/device-run.sh --budget-s 300 calibrate >"$work/out" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "h200 calibrate: rc $rc, $(cat "$work/out")"
grep -q "^card: h200 (NVIDIA H200 (stand-in))" "$work/out" || fail "the H200 not named: $(cat "$work/out")"
grep -q "^driver: 575.57.08" "$work/out" && grep -q "warning: driver 575.57.08 is older than r580" "$work/out" ||
  fail "no driver line or warning: $(cat "$work/out")"
grep -q "^dcpbench calibrate --backend cuda .*--name h200-measured --out results/calibration/h200-measured.json" "$calls" ||
  fail "the H200's calibration not named h200: $(cat "$calls")"
[ -f results/calibration/h200-measured.json ] && [ ! -e results/calibration/h100-measured.json ] ||
  fail "calibration files: $(ls results/calibration)"
expect_archived results/calibration/h200-measured.json
echo "ci/device-run.sh: refusals, budget, one strategy per command, skips, stops, --resume, archive and card naming as expected"
