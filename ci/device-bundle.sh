#!/usr/bin/env bash
# Builds HERE (no GPU needed: nvcc compiles for sm_90a without one) everything the lent GPU
# machine runs, and packs it into .deps/bundle/ (git ignores .deps/), so that the device's few
# minutes go to measuring, not to compiling. Run it before a device session's one call:
#   ci/device-bundle.sh          # builds in build/ (the tree ci/test.sh builds), ~19 MB bundle
#   then run there: ci/device-run.sh, carry [".deps/bundle", ".deps/debs"] (ci/device-deps.sh
#   downloads .deps/debs once: the OpenMPI and Google Benchmark runtime the binaries load).
# What the bundle holds:
#   bin/            dcpbench, the gpu-labelled test binaries and bench_attn_cuda, stripped;
#   manifest.json   the git sha; the sources the binaries were built from and their hash
#                   (ci/device-run.sh refuses a bundle whose hash differs from the tree it runs in,
#                   naming the files that differ: no stale binaries; so run this script right
#                   before the device call, after the last commit); nvcc, arch, build type, date;
#                   and the simulated busy time of each share ci/device-run.sh measures (dcpbench
#                   share: the busiest rank, published setting, step 0), which it doubles (warm-up
#                   + 1 timed run) to fit its steps into its time budget.
# Same toolchain on both machines: CUDA 13.0 here and there (.library/device KINDS.md), glibc
# 2.36 here <= 2.39 there; libcudart, cuBLAS(Lt) and NCCL are the device's own (toolkit or
# PyTorch's nvidia-* wheels), OpenMPI and Google Benchmark come from the carried Debian packages.
# Environment: DCP_JOBS (build jobs, default nproc), DCP_CUDA_ARCH (default 90a).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
  exit 0
fi
[ $# -eq 0 ] || { echo "ci/device-bundle.sh: no arguments expected (got '$1'); --help says what it does" >&2; exit 2; }
source ci/deps.sh
jobs="${DCP_JOBS:-$(nproc)}"
arch="${DCP_CUDA_ARCH:-90a}"
nvcc=/usr/local/cuda/bin/nvcc
[ -x "$nvcc" ] || { echo "ci/device-bundle.sh: no $nvcc: the bundle's kernels need the CUDA toolkit" >&2; exit 2; }
ci/install.sh
# Configure every time (ci/test.sh's flags, so its build is reused; DCP_BENCH on for
# bench_attn_cuda), with CUDA, NCCL and MPI required (configure says which one is missing, instead
# of a 'no rule to make target' later) and the arch the manifest records (a cached other arch
# would have stayed). dcpbench records the sha it was built at (core/provenance.h); the test
# binaries and bench_attn_cuda read it at run time: there, from the manifest (DCP_GIT_SHA), the same.
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_DEBUG_INFO=lines -DDCP_BENCH=ON -DDCP_CUDA=ON -DDCP_NCCL=ON -DDCP_MPI=ON \
  -DDCP_CUDA_ARCH="$arch" -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
targets=(dcpbench "${dcp_device_tests[@]}" bench_attn_cuda)
cmake --build build -j "$jobs" --target "${targets[@]}"

out=.deps/bundle
mkdir -p .deps
tmp="$(mktemp -d .deps/bundle.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
for t in "${targets[@]}"; do
  # Exactly one: a stale file of the same name elsewhere under build/ (an old target's folder) would
  # pass the source check while being another binary (helper-57's review).
  mapfile -t found < <(find build -type f -name "$t" -perm -u+x)
  [ ${#found[@]} -ge 1 ] || { echo "ci/device-bundle.sh: no executable $t under build/ (configured without CUDA, NCCL or MPI? see build/CMakeCache.txt)" >&2; exit 1; }
  [ ${#found[@]} -eq 1 ] || { echo "ci/device-bundle.sh: ${#found[@]} executables named $t under build/ (${found[*]}): remove the stale one" >&2; exit 1; }
  exe="${found[0]}"
  strip -o "$tmp/bin/$t" "$exe"
done

# The simulated busy time of each share to be measured, one share file per scenario and strategy.
for s in "${dcp_device_scenarios[@]}"; do
  for st in "${dcp_device_strategies[@]}"; do
    build/dcpbench share "$s" --strategy "$st" --out "$tmp/share--$(basename "$s" .json)--$st.json" 2>"$tmp/share.err" ||
      { cat "$tmp/share.err" >&2; echo "ci/device-bundle.sh: dcpbench share $s --strategy $st failed" >&2; exit 1; }
  done
done

sha="$(git rev-parse HEAD)"
[ -z "$(git status --porcelain --untracked-files=no -- . ':(exclude)results')" ] || sha="$sha-dirty"  # as core/provenance
# The sources' sums; their hash is dcp_source_hash's (sha256 of the same bytes).
dcp_source_sums >"$tmp/sources.sha256"
python3 - "$tmp" "$sha" "$("$nvcc" --version | tail -1)" "$arch" "${targets[*]}" \
  "${dcp_device_scenarios[*]}" <<'EOF'
import datetime, glob, hashlib, json, os, sys
tmp, sha, nvcc, arch, targets, scenarios = sys.argv[1:7]
with open(os.path.join(tmp, "sources.sha256"), "rb") as f:
    sums = f.read()
os.remove(os.path.join(tmp, "sources.sha256"))
sources = {}
for line in sums.decode().splitlines():
    digest, path = line.split("  ", 1)
    sources[path] = digest
pred = {}
for scenario in scenarios.split():
    name = os.path.basename(scenario)[: -len(".json")]
    for f in sorted(glob.glob(os.path.join(tmp, f"share--{name}--*.json"))):
        share = json.load(open(f))
        pred.setdefault(scenario, {})[share["strategy"]] = share["busy_s"]
        os.remove(f)
bins = {t: os.path.getsize(os.path.join(tmp, "bin", t)) for t in targets.split()}
manifest = {
    "schema": "dcpbench.device-bundle.v1",
    "git_sha": sha,
    "source_hash": hashlib.sha256(sums).hexdigest()[:16],
    "sources": sources,
    "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    "nvcc": nvcc,
    "cuda_arch": "sm_" + arch,
    "build_type": "RelWithDebInfo, stripped",
    "binaries_bytes": bins,
    "share_busy_s": pred,
    "share_busy_s_note": "simulated busy time of the busiest rank's share (dcpbench share, published setting, "
                         "step 0, public H100 profile); ci/device-run.sh replays each micro-batch twice "
                         "(warm-up + 1 timed run, --reps 1)",
}
with open(os.path.join(tmp, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
    f.write("\n")
EOF
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "ci/device-bundle.sh: $(du -sh "$out" | cut -f1) in $out (${#targets[@]} binaries, sha ${sha:0:12}, source $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["source_hash"])' "$out/manifest.json"))"
# The device run's own check, here, before any device time is spent: the bundle matches this tree
# and .deps/debs holds the runtime packages (exit 2 naming what is missing).
bash ci/device-run.sh --check
echo "on the device: ci/device-run.sh, carry [\".deps/bundle\", \".deps/debs\"] (ci/device-run.sh --help)"
