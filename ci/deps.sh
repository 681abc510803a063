# Sourced by ci/gpu.sh and ci/measure.sh: makes the Debian packages a GPU build needs available,
# also on a machine that cannot reach a package registry (the lent H100: its image has nvcc,
# CMake, ninja and PyTorch, no GoogleTest, Google Benchmark, nlohmann/json, CLI11 or OpenMPI, and
# nothing outside it can be reached).
#
#   dcp_deps   1. every package of dcp_gpu_packages installed (dpkg-query)      -> nothing to do;
#              2. else .deps/debs/*.deb present (ci/device-deps.sh downloads them on a machine with
#                 a registry; the device tool carries .deps/debs)               -> unpacks them
#                 into .deps/root (dpkg-deb -x, or Python's ar/tar reader without dpkg), never
#                 into /, and exports what the build and the tests need to find them;
#              3. else ci/install.sh (apt-get).
#   After it, "${dcp_deps_cmake_args[@]}" goes on the cmake configure line.
#
# Case 2 exports CMAKE_PREFIX_PATH (the packages' CMake config files), PATH, OPAL_PREFIX and
# PMIX_INSTALL_PREFIX (Debian's OpenMPI is built for /usr and its PMIx for /usr/lib/x86_64-linux-gnu/pmix2;
# these relocate their wrappers, help files and components) and
# LD_LIBRARY_PATH=.deps/lib, which holds links to only those shared libraries whose soname the
# system's loader cache (ldconfig -p) or standard library folders do not already have: the system's own libraries (glibc,
# libstdc++, zlib, OpenSSL, ...) always win, so PyTorch and the toolchain are not handed Debian's
# older copies. dcp_deps_cmake_args names OpenMPI's wrapper and launcher, which carry a
# .openmpi suffix because Debian's update-alternatives links are made by maintainer scripts that
# dpkg-deb -x does not run.

dcp_gpu_packages=(libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
                  libopenmpi-dev openmpi-bin)
dcp_deps_cmake_args=()

dcp_deps_missing() {
  local p
  command -v dpkg-query >/dev/null 2>&1 || { echo "${dcp_gpu_packages[*]}"; return; }
  for p in "${dcp_gpu_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# Unpacks one .deb into $2 (the data member only; maintainer scripts never run). dpkg-deb where
# there is one, else Python's ar/tar reader (DCP_DEPS_UNPACKER=python forces it; ci/tests uses that).
dcp_deps_unpack() {
  if [ "${DCP_DEPS_UNPACKER:-}" != python ] && command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
  else
    python3 - "$1" "$2" <<'EOF'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
with open(deb, "rb") as f:
    blob = f.read()
if blob[:8] != b"!<arch>\n":
    sys.exit(f"{deb}: not a Debian package (no ar header)")
pos = 8
while pos + 60 <= len(blob):
    name = blob[pos:pos + 16].decode().strip().rstrip("/")
    size = int(blob[pos + 48:pos + 58].decode().strip())
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(blob[pos + 60:pos + 60 + size])) as t:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and backports): no paths outside dest
                t.extractall(dest, filter="tar")
            else:
                t.extractall(dest)
        sys.exit(0)
    pos += 60 + size + (size & 1)
sys.exit(f"{deb}: no data.tar member")
EOF
  fi
}

dcp_deps() {
  local root_dir missing
  root_dir="$(pwd)"
  missing="$(dcp_deps_missing | paste -sd' ' -)"
  if [ -z "${missing// /}" ]; then
    return 0
  fi
  if ! compgen -G ".deps/debs/*.deb" >/dev/null; then
    echo "ci/deps.sh: missing ${missing}; installing with apt-get (ci/install.sh)" >&2
    ci/install.sh
    return
  fi
  local prefix="$root_dir/.deps/root" libdir="$root_dir/.deps/lib" stamp="$root_dir/.deps/root/.unpacked"
  echo "ci/deps.sh: missing ${missing}; using the $(ls .deps/debs/*.deb | wc -l) packages carried in .deps/debs (unpacked into .deps/root)" >&2
  # Debian 12's binaries and static libraries ask for symbols up to GLIBC_2.36 (libevent's
  # arc4random, which OpenMPI's launcher and wrappers load).
  local glibc
  glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
  if [ -n "$glibc" ] && [ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" != 2.36 ]; then
    echo "ci/deps.sh: the carried packages are Debian 12's and need glibc >= 2.36; this machine has $glibc" >&2
    return 1
  fi
  if [ ! -f "$stamp" ] || [ -n "$(find .deps/debs -name '*.deb' -newer "$stamp" | head -1)" ]; then
    rm -rf "$prefix" "$libdir"
    mkdir -p "$prefix" "$libdir"
    local deb
    for deb in .deps/debs/*.deb; do
      dcp_deps_unpack "$deb" "$prefix" || { echo "ci/deps.sh: cannot unpack $deb" >&2; return 1; }
    done
    # Only the sonames the system lacks go on LD_LIBRARY_PATH.
    local known so name ldc
    # The loader cache (ldconfig is in /sbin, off a non-root PATH) and, should it be missing or
    # unreadable, the files of the standard library folders.
    ldc="$(command -v ldconfig || echo /sbin/ldconfig)"
    known="$( { "$ldc" -p 2>/dev/null | awk '{print $1}' || true;
                ls /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 2>/dev/null || true; } | sort -u)"
    for so in "$prefix"/usr/lib/x86_64-linux-gnu/*.so.* "$prefix"/lib/x86_64-linux-gnu/*.so.*; do
      [ -e "$so" ] || continue
      name="$(basename "$so")"
      # OpenMPI's own family always from the carried tree (OPAL_PREFIX points its plugins there): a
      # system OpenMPI of another version would otherwise load its libmpi with our components.
      case "$name" in
        libmpi*|libopen-pal*|libopen-rte*|libpmix*|libhwloc*|libevent*) ln -sf "$so" "$libdir/$name"; continue ;;
      esac
      grep -qxF "$name" <<<"$known" || ln -sf "$so" "$libdir/$name"
    done
    # The one soname Debian makes with update-alternatives (libpsm-infinipath1's postinst).
    for so in "$prefix"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
      [ -e "$so" ] && ! grep -qxF libpsm_infinipath.so.1 <<<"$known" && ln -sf "$so" "$libdir/libpsm_infinipath.so.1"
    done
    touch "$stamp"
  fi
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PATH="$PATH:$prefix/usr/bin"
  export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$prefix/usr"
  # OpenMPI's PMIx (Debian installs it under its own prefix) relocates by its own variable.
  export PMIX_INSTALL_PREFIX="$prefix/usr/lib/x86_64-linux-gnu/pmix2"
  # mpirun as root (the device runs commands as root); ctest's MPI tests pass the flag themselves.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  dcp_deps_cmake_args=(-DMPI_CXX_COMPILER="$prefix/usr/bin/mpicxx.openmpi"
                       -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpirun.openmpi")
  # The relocated wrapper must run, or CMake finds no MPI: say why here rather than there.
  if ! "$prefix/usr/bin/mpicxx.openmpi" --showme:version >/dev/null 2>&1; then
    echo "ci/deps.sh: the carried OpenMPI does not run here ($("$prefix/usr/bin/mpicxx.openmpi" --showme:version 2>&1 | head -1)); MPI and NCCL will be missing" >&2
  fi
}

# NCCL: DCP_NCCL_ROOT when set (a folder with include/ and lib/), else the CUDA toolkit's or the
# system's (cmake/FindNCCL.cmake) when there is an nccl.h, else the nvidia-nccl wheel of the
# python3 that has PyTorch (DCP_TORCH_PYTHON), as the device image provides it (include/nccl.h
# and lib/libnccl.so.2). Appends -DNCCL_ROOT=... to dcp_deps_cmake_args.
dcp_nccl_args() {
  local root="${DCP_NCCL_ROOT:-}"
  if [ -z "$root" ] && [ ! -f /usr/local/cuda/include/nccl.h ] && [ ! -f /usr/include/nccl.h ]; then
    root="$("${DCP_TORCH_PYTHON:-python3}" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
  fi
  if [ -n "$root" ]; then
    echo "ci/deps.sh: NCCL from $root" >&2
    dcp_deps_cmake_args+=(-DNCCL_ROOT="$root")
  fi
}

# One line each: what a GPU run was built and run with (for the log that comes back from a lent
# machine; nothing here is needed to build).
dcp_env_report() {
  echo "== environment =="
  echo "nvcc:   $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | tail -1)"
  echo "c++:    $(c++ --version 2>/dev/null | head -1)"
  echo "cmake:  $(cmake --version 2>/dev/null | head -1)"
  echo "python: $("${DCP_TORCH_PYTHON:-python3}" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "no PyTorch in ${DCP_TORCH_PYTHON:-python3}")"
  echo "os:     $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") glibc $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}'), $(nproc) cores"
}

# The scripts' common front (ci/gpu.sh, ci/measure.sh):
#   dcp_steps SCRIPT "ALL STEPS" ARGS...  sets `steps` to ARGS (all steps when none); -h/--help
#                                         prints SCRIPT's header comment; an unknown step: exit 2.
#   dcp_want STEP                         whether STEP was asked for.
#   dcp_require_gpu SCRIPT                exit 2 unless nvidia-smi lists a GPU (printed).
dcp_steps() {
  local script="$1" s
  local -a all
  read -r -a all <<<"$2"
  shift 2
  steps=("$@")
  [ ${#steps[@]} -eq 0 ] && steps=("${all[@]}")
  for s in "${steps[@]}"; do
    if [ "$s" = -h ] || [ "$s" = --help ]; then
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$script"
      exit 0
    fi
    if [[ " ${all[*]} " != *" $s "* ]]; then
      echo "$script: unknown step '$s' (steps: ${all[*]})" >&2
      exit 2
    fi
  done
}
dcp_want() {
  local s
  for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}
# nvidia-smi under a 20 s bound: without persistence mode a call can take seconds, and on a GPU
# left wedged by a killed kernel it can hang (helper-57's review).
dcp_nvidia_smi() { timeout --kill-after=5 20 nvidia-smi "$@"; }
# dcp_gpu_kind: the name the card's files take (results/bench/attn_<kind>.json,
# results/calibration/<kind>-measured.json): h100, h200 (the device tool may lend one in place of
# an H100), else gpu. dcp_card_kind NAME: the same for a name nvidia-smi gave.
dcp_card_kind() { case "$1" in *H200*) echo h200 ;; *H100*) echo h100 ;; *) echo gpu ;; esac; }
dcp_gpu_kind() { dcp_card_kind "$(dcp_nvidia_smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"; }
dcp_require_gpu() {
  local list
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! list="$(dcp_nvidia_smi -L 2>/dev/null)"; then
    echo "$1: no NVIDIA GPU visible (nvidia-smi -L failed or took over 20 s); run this on a GPU machine" >&2
    exit 2
  fi
  echo "$list"
}

# ---- the prebuilt bundle (ci/device-bundle.sh here, ci/device-run.sh on the lent GPU machine) ----
# The gpu-labelled test binaries (CTest label gpu) and the scenarios whose shares are measured, in
# the order of need.
dcp_device_tests=(test_attn_cuda test_model_cuda test_exec_cuda test_harness_cuda test_comm_nccl)
dcp_device_scenarios=(scenarios/llama13b-github.json scenarios/llama13b-commoncrawl.json)
# The strategies whose shares are measured, in the order of need: every one but bshd, whose share
# pads every sample to 131072 tokens (~2560 s of GPU time on llama13b-github by the simulator,
# against 17-20 s for each of these).
dcp_device_strategies=(packing dcp nvidia-prototype megatron-dev megatron-pr2000)
# The sources the binaries are compiled from (C++, CUDA and CMake files; run from the repository
# root), one "sha256  path" line each, and their hash. The same on both machines when the tree is
# the same: what .gitignore ignores (build*/, __pycache__/, *.tmp.*) does not travel, so it is
# left out here too.
dcp_source_sums() {
  find CMakeLists.txt cmake impl harness baselines -type f \
       \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cmake' -o -name CMakeLists.txt \) \
       -not -path '*/build*/*' -not -path '*/__pycache__/*' -not -name '*.tmp.*' -print0 |
    LC_ALL=C sort -z | xargs -0 sha256sum
}
dcp_source_hash() { dcp_source_sums | sha256sum | cut -c1-16; }
