#!/usr/bin/env bash
# Test of ci/deps.sh, the carried-packages path of the GPU scripts (run by ctest as ci_deps), and of
# cmake/FindNCCL.cmake's NCCL_ROOT.
# Builds two small .debs with dpkg-deb in a scratch checkout and checks that
#   1. the Python unpacker (used where dpkg-deb is missing) gives the same tree as dpkg-deb -x,
#      symbolic links included;
#   2. dcp_deps, with a package reported missing, unpacks .deps/debs into .deps/root and exposes on
#      LD_LIBRARY_PATH only the sonames the loader cache does not know (a fake libc.so.6 stays
#      hidden, libdcpfake.so.1 is exposed), and exports OPAL_PREFIX, PMIX_INSTALL_PREFIX and the
#      OpenMPI CMake hints under .deps/root;
#   3. a changed .deb is unpacked again (the stamp is older), an unchanged one is not;
#   4. with every package installed dcp_deps does nothing;
#   5. cmake/FindNCCL.cmake finds NCCL under NCCL_ROOT in the nvidia-nccl wheel's layout first.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "SKIP: no dpkg-deb"; exit 77; }  # ctest: SKIP_RETURN_CODE 77

mkdeb() {  # mkdeb NAME VERSION: a package with a versioned library, its soname link and a header
  local d="$work/src-$1"
  rm -rf "$d"
  mkdir -p "$d/DEBIAN" "$d/usr/lib/x86_64-linux-gnu" "$d/usr/include/$1"
  printf 'Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: t\n' "$1" "$2" >"$d/DEBIAN/control"
  echo "$1 $2" >"$d/usr/lib/x86_64-linux-gnu/$3.$2"
  ln -s "$3.$2" "$d/usr/lib/x86_64-linux-gnu/$3"
  echo "// $1" >"$d/usr/include/$1/$1.h"
  dpkg-deb -b -Zxz "$d" "$work/co/.deps/debs/$1_$2_amd64.deb" >/dev/null
}
mkdir -p "$work/co/ci" "$work/co/.deps/debs"
cp "$repo/ci/deps.sh" "$work/co/ci/"
mkdeb dcpfake 1.0 libdcpfake.so.1
mkdeb fakec 2.0 libc.so.6
cd "$work/co"
source ci/deps.sh

# 1. Python unpacker == dpkg-deb -x
for deb in .deps/debs/*.deb; do
  mkdir -p "$work/py" "$work/dpkg"
  DCP_DEPS_UNPACKER=python dcp_deps_unpack "$deb" "$work/py"
  dpkg-deb -x "$deb" "$work/dpkg"
done
diff -r --no-dereference "$work/py" "$work/dpkg" >/dev/null || fail "the Python unpacker differs from dpkg-deb -x"
[ -L "$work/py/usr/lib/x86_64-linux-gnu/libdcpfake.so.1" ] || fail "the Python unpacker lost a symbolic link"

# 2. carried packages: a missing package makes dcp_deps use them
dcp_gpu_packages=(dcp-no-such-package)
unset LD_LIBRARY_PATH OPAL_PREFIX PMIX_INSTALL_PREFIX CMAKE_PREFIX_PATH
dcp_deps 2>"$work/log"
# Kept aside at once: were a system library exposed by mistake, every later command could break.
ldp="$LD_LIBRARY_PATH"
unset LD_LIBRARY_PATH
grep -q "using the 2 packages carried in .deps/debs" "$work/log" || fail "no carried-packages message: $(cat "$work/log")"
[ -f .deps/root/usr/include/dcpfake/dcpfake.h ] || fail "not unpacked into .deps/root"
[ -e .deps/lib/libdcpfake.so.1 ] || fail "libdcpfake.so.1 (unknown to the loader cache) not exposed"
[ ! -e .deps/lib/libc.so.6 ] || fail "libc.so.6 (the system's) exposed from the carried packages"
[ "$ldp" = "$work/co/.deps/lib" ] || fail "LD_LIBRARY_PATH=$ldp"
[ "$OPAL_PREFIX" = "$work/co/.deps/root/usr" ] || fail "OPAL_PREFIX=$OPAL_PREFIX"
[ "$PMIX_INSTALL_PREFIX" = "$work/co/.deps/root/usr/lib/x86_64-linux-gnu/pmix2" ] || fail "PMIX_INSTALL_PREFIX=$PMIX_INSTALL_PREFIX"
[[ "$CMAKE_PREFIX_PATH" == "$work/co/.deps/root/usr" ]] || fail "CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH"
[[ " ${dcp_deps_cmake_args[*]} " == *" -DMPIEXEC_EXECUTABLE=$work/co/.deps/root/usr/bin/mpirun.openmpi "* ]] ||
  fail "no MPIEXEC_EXECUTABLE hint: ${dcp_deps_cmake_args[*]}"

# 3. unchanged packages are not unpacked again; a newer .deb is
touch .deps/root/marker
dcp_deps 2>/dev/null
unset LD_LIBRARY_PATH
[ -f .deps/root/marker ] || fail "unpacked again although no .deb changed"
sleep 1
mkdeb dcpfake 1.0 libdcpfake.so.1
dcp_deps 2>/dev/null
unset LD_LIBRARY_PATH
[ ! -f .deps/root/marker ] || fail "a newer .deb was not unpacked"

# 4. every package installed: nothing to do
dcp_gpu_packages=(dpkg)
dcp_deps_cmake_args=()
LD_LIBRARY_PATH=unchanged
dcp_deps 2>/dev/null
[ "$LD_LIBRARY_PATH" = unchanged ] && [ ${#dcp_deps_cmake_args[@]} -eq 0 ] || fail "installed packages still took the carried path"
# 5. cmake/FindNCCL.cmake takes NCCL from NCCL_ROOT laid out like PyTorch's nvidia-nccl wheel
#    (include/nccl.h, lib/libnccl.so.2 and no libnccl.so), ahead of a toolkit's or the system's.
if command -v cmake >/dev/null; then
  mkdir -p "$work/wheel/include" "$work/wheel/lib" "$work/proj"
  : >"$work/wheel/include/nccl.h"
  : >"$work/wheel/lib/libnccl.so.2"
  cat >"$work/proj/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(find_nccl_check LANGUAGES NONE)
list(APPEND CMAKE_MODULE_PATH "$repo/cmake")
find_package(NCCL REQUIRED)
message(STATUS "nccl library: \${NCCL_LIBRARY}; include: \${NCCL_INCLUDE_DIR}")
CMAKE
  cmake -S "$work/proj" -B "$work/proj/build" -DNCCL_ROOT="$work/wheel" >"$work/cmake.log" 2>&1 ||
    fail "FindNCCL with NCCL_ROOT: $(tail -5 "$work/cmake.log")"
  grep -q "nccl library: $work/wheel/lib/libnccl.so.2; include: $work/wheel/include" "$work/cmake.log" ||
    fail "FindNCCL did not take NCCL_ROOT's wheel layout: $(grep 'nccl library' "$work/cmake.log")"
fi
echo "ci/deps.sh: all checks passed"
