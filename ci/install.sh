#!/usr/bin/env bash
# Installs the Debian packages dcpbench needs, only those that are missing (apt-get update first,
# once). The CUDA toolkit (nvcc, cuBLAS, NCCL, NVTX) is optional and never installed here: when
# /usr/local/cuda/bin/nvcc exists the build picks it up.
set -euo pipefail

packages=(build-essential cmake g++ clang libclang-rt-dev pkg-config
          libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
          libopenmpi-dev openmpi-bin python3 python3-matplotlib git
          pybind11-dev python3-dev python3-pytest)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ci/install.sh: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  # A freshly booted machine may be running unattended-upgrades: wait for dpkg's lock (5 min).
  $SUDO apt-get -o DPkg::Lock::Timeout=300 update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${missing[@]}"
fi
