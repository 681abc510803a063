#!/usr/bin/env bash
# Downloads (never installs) the Debian packages a GPU build needs into .deps/debs, for a machine
# that has no package registry: the lent H100 (`device` tool: run with carry [".deps/debs"]; ci/gpu.sh
# and ci/measure.sh then unpack them into .deps/root through ci/deps.sh). Run it here, on a
# machine that reaches Debian's mirrors (amd64; the device is x86-64 too). ~8.5 MB. They are
# Debian 12's: the machine that uses them needs glibc >= 2.36 (ci/deps.sh checks).
#
# The list: the header and static-library packages of the build (GoogleTest, Google Benchmark,
# nlohmann/json, CLI11), OpenMPI (launcher, wrappers, headers, libmpi) and the shared libraries
# OpenMPI's programs, libmpi and its components load, read off this machine with
#   ldd $(readlink -f /usr/bin/mpirun) /usr/bin/orted /usr/lib/x86_64-linux-gnu/libmpi*.so.40 \
#       /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix/*.so
# mapped to packages with dpkg -S, less glibc, libstdc++ and libgcc (always the system's own), plus
# the libraries hwloc and libltdl dlopen. Those the device's system already has are downloaded but
# not put on LD_LIBRARY_PATH (ci/deps.sh compares sonames with ldconfig -p).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian nlohmann-json3-dev libcli11-dev
          libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common
          libucx0 libfabric1 libpsm-infinipath1 libpsm2-2 librdmacm1 libibverbs1 ibverbs-providers
          libpmix2 libmunge2 libhwloc15 libnuma1 libnl-3-200 libnl-route-3-200
          libevent-core-2.1-7 libevent-pthreads-2.1-7 libatomic1 libxnvctrl0 libltdl7 libpciaccess0)
if [ "$(dpkg --print-architecture 2>/dev/null)" != amd64 ]; then
  echo "ci/device-deps.sh: this machine's dpkg architecture is '$(dpkg --print-architecture 2>/dev/null)', the device is amd64: run it on an amd64 Debian machine" >&2
  exit 2
fi
mkdir -p .deps
tmp=$(mktemp -d .deps/debs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes into the current folder; as root it warns that _apt cannot read it
# (the warning is dropped; apt-get's own status decides, not grep's, which fails on no output).
log="$PWD/.deps/download.log"
if ! (cd "$tmp" && apt-get download -qq "${packages[@]}" >"$log" 2>&1); then
  grep -v "unsandboxed as root" "$log" >&2 || true
  rm -f "$log"
  echo "ci/device-deps.sh: apt-get download failed (no package index? run apt-get update first; or no registry here: run it where apt-get works)" >&2
  exit 1
fi
rm -f "$log"
shopt -s nullglob
debs=("$tmp"/*.deb)
n=${#debs[@]}
if [ "$n" -ne "${#packages[@]}" ]; then
  echo "ci/device-deps.sh: got $n of ${#packages[@]} packages" >&2
  exit 1
fi
rm -rf .deps/debs .deps/root .deps/lib
mv "$tmp" .deps/debs
trap - EXIT
echo "ci/device-deps.sh: $n packages, $(du -sh .deps/debs | cut -f1), in .deps/debs; then ci/device-bundle.sh; on the device: ci/device-run.sh, carry [\".deps/bundle\", \".deps/debs\"]"
