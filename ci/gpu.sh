#!/usr/bin/env bash
# Everything that needs a GPU, in one command, on a machine with an NVIDIA GPU (Hopper for the
# default sm_90a build), the CUDA toolkit at /usr/local/cuda and NCCL:
#   1. builds with CUDA + NCCL + MPI in build-gpu/ (DCP_CUDA_ARCH, default 90a);
#   2. runs the gpu-labelled tests (CUDA attention kernel vs the float64 reference; the NCCL
#      communicator under mpirun) with DCP_REQUIRE_GPU=1, so a test that would skip for lack of a
#      device fails instead of passing silently;
#   3. runs the cpu and mpi tests of the same build;
#   4. benchmarks the attention kernels (bench_attn_cuda: our forward and backward beside a cuBLAS
#      GEMM of the same FLOPs) and, with the python3 on PATH that has PyTorch (DCP_TORCH_PYTHON to
#      choose another), PyTorch's FlashAttention-2 and cuDNN on the same cases; writes
#      results/bench/attn_h100.json and results/bench/attn_h100.png (issue 9).
# This machine class (CI, developers) has no GPU: the gpu tests there skip with "no CUDA device".
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${DCP_JOBS:-$(nproc)}"
arch="${DCP_CUDA_ARCH:-90a}"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "ci/gpu.sh: no NVIDIA GPU visible (nvidia-smi -L failed); run this on a GPU machine" >&2
  exit 2
fi
nvidia-smi -L
ci/install.sh
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDCP_CUDA=ON -DDCP_NCCL=ON -DDCP_MPI=ON \
  -DDCP_CUDA_ARCH="$arch" -DCMAKE_CUDA_ARCHITECTURES="$arch"
cmake --build build-gpu -j "$jobs"
echo "== gpu tests (a skip is a failure here) =="
(cd build-gpu && DCP_REQUIRE_GPU=1 ctest --output-on-failure -L gpu)
echo "== cpu and mpi tests =="
(cd build-gpu && ctest --output-on-failure -j 2 -L "cpu|mpi")
echo "== attention benchmark: ours, cuBLAS ceiling, PyTorch FlashAttention-2 and cuDNN =="
mkdir -p results/bench
build-gpu/impl/attn/bench_attn_cuda --dump-cases=build-gpu/attn_cases.json
build-gpu/impl/attn/bench_attn_cuda --benchmark_out=build-gpu/bench_attn_cuda.json --benchmark_out_format=json
"${DCP_TORCH_PYTHON:-python3}" harness/python/bench/attn_peers.py --cases build-gpu/attn_cases.json \
  --bench build-gpu/bench_attn_cuda.json --out results/bench/attn_h100.json
/usr/bin/python3 harness/python/bench/attn_peers.py --redraw results/bench/attn_h100.json \
  --chart results/bench/attn_h100.png ||
  echo "ci/gpu.sh: the chart was not drawn (Debian's python3-matplotlib missing?); the JSON is written" >&2
echo "ci/gpu.sh: all GPU, CPU and MPI tests passed; attention benchmark in results/bench/attn_h100.{json,png}"
