#!/usr/bin/env bash
# CTest helper: mpirun with a session folder of its own (--mca orte_tmpdir_base), removed after.
# mpiruns started together (ctest -j 2) race to create the shared /tmp/ompi.<host>.<uid>, and the
# loser fails in orte_init ("mkdir ... File exists", exit 1): seen 1 run in 6 of the mpi_exit2
# tests under load. mktemp's short /tmp path keeps the PMIx socket path under its 108 bytes.
#   mpirun_session.sh MPIEXEC ARGS...   (exit status: mpirun's)
set -uo pipefail
mpiexec=$1
shift
session=$(mktemp -d /tmp/ompi-XXXXXX) || exit 1
trap 'rm -rf "$session"' EXIT
"$mpiexec" --mca orte_tmpdir_base "$session" "$@"
