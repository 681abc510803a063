#!/usr/bin/env bash
# Everything that needs a GPU, on a machine with an NVIDIA GPU (Hopper for the default sm_90a
# build), the CUDA toolkit at /usr/local/cuda and NCCL. Steps, all of them by default, or those
# named (ci/gpu.sh build gpu-tests bench), in this order:
#   build      builds with CUDA + NCCL + MPI in build-gpu/ (DCP_CUDA_ARCH, default 90a);
#   gpu-tests  runs the gpu-labelled tests (CUDA attention kernels vs the float64 reference; the
#              NCCL communicator under mpirun) with DCP_REQUIRE_GPU=1, so a test that would skip
#              for lack of a device fails instead of passing silently;
#   cpu-tests  runs the cpu and mpi tests of the same build;
#   bench      benchmarks the attention kernels (bench_attn_cuda: our forward and backward beside a
#              cuBLAS GEMM of the same FLOPs) and, with the python3 on PATH that has PyTorch
#              (DCP_TORCH_PYTHON to choose another), PyTorch's FlashAttention-2 and cuDNN on the
#              same cases; writes results/bench/attn_<gpu>.json and .png, <gpu> h100 or h200 by the
#              card (ci/deps.sh dcp_gpu_kind; issue 9).
# Every step builds first (incrementally). Where $OUT names a folder (the
# device tool's), the step's results are also copied there as one archive, gpu-results.tar.gz:
# files written on that machine come back only through $OUT.
# This machine class (CI, developers) has no GPU: the gpu tests there skip with "no CUDA device".
# On a machine without a package registry (the lent H100) run ci/device-deps.sh first where apt
# works and carry .deps/debs (ci/deps.sh says how they are used). NCCL: DCP_NCCL_ROOT if set, else
# the CUDA toolkit's or the system's, else the nvidia-nccl wheel of the python3 that has PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DCP_JOBS:-$(nproc)}"
arch="${DCP_CUDA_ARCH:-90a}"
source ci/deps.sh
dcp_steps ci/gpu.sh "build gpu-tests cpu-tests bench" "$@"
dcp_require_gpu ci/gpu.sh
gpu="$(dcp_gpu_kind)"
dcp_env_report
dcp_deps
dcp_nccl_args
# Every step builds (incrementally: a command killed mid-build, or changed sources, never leave a
# later step with missing or stale binaries). NCCL and MPI AUTO: without them everything else
# still builds and runs, and the script fails at the end.
echo "== build (build-gpu, sm_$arch, $jobs jobs) =="
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_CUDA=ON -DDCP_NCCL=AUTO -DDCP_MPI=AUTO \
  -DDCP_CUDA_ARCH="$arch" -DCMAKE_CUDA_ARCHITECTURES="$arch" "${dcp_deps_cmake_args[@]}"
cmake --build build-gpu -j "$jobs"
if dcp_want gpu-tests; then
  echo "== gpu tests (a skip is a failure here) =="
  (cd build-gpu && DCP_REQUIRE_GPU=1 ctest --output-on-failure -L gpu)
fi
if dcp_want cpu-tests; then
  echo "== cpu and mpi tests =="
  (cd build-gpu && ctest --output-on-failure -j "$(( jobs > 8 ? 8 : jobs ))" -L "cpu|mpi")
fi
if dcp_want bench; then
  echo "== attention benchmark: ours, cuBLAS ceiling, PyTorch FlashAttention-2 and cuDNN =="
  mkdir -p results/bench
  build-gpu/impl/attn/bench_attn_cuda --dump-cases=build-gpu/attn_cases.json
  build-gpu/impl/attn/bench_attn_cuda --benchmark_out=build-gpu/bench_attn_cuda.json --benchmark_out_format=json
  "${DCP_TORCH_PYTHON:-python3}" harness/python/bench/attn_peers.py --cases build-gpu/attn_cases.json \
    --bench build-gpu/bench_attn_cuda.json --out results/bench/attn_$gpu.json
  "${DCP_TORCH_PYTHON:-python3}" harness/python/bench/attn_peers.py --redraw results/bench/attn_$gpu.json \
    --chart results/bench/attn_$gpu.png ||
    /usr/bin/python3 harness/python/bench/attn_peers.py --redraw results/bench/attn_$gpu.json \
    --chart results/bench/attn_$gpu.png ||
    echo "ci/gpu.sh: the chart was not drawn (no matplotlib in either python3?); the JSON is written" >&2
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    tar czf "$OUT/gpu-results.tar.gz" results/bench/attn_$gpu.json build-gpu/bench_attn_cuda.json \
      $(ls results/bench/attn_$gpu.png 2>/dev/null)
    echo "ci/gpu.sh: results copied to \$OUT/gpu-results.tar.gz (unpack in the checkout: tar xzf ...)"
  fi
fi
if [ ! -x build-gpu/impl/comm/test_comm_nccl ]; then
  echo "ci/gpu.sh: FAILED: built without NCCL or MPI (the configure lines above say which; DCP_NCCL_ROOT names a folder with NCCL's include/ and lib/), so the NCCL communicator was not tested; the other steps ran" >&2
  exit 1
fi
echo "ci/gpu.sh: steps ${steps[*]} passed$(dcp_want bench && echo "; attention benchmark in results/bench/attn_$gpu.{json,png}")"
