#!/usr/bin/env bash
# CTest helper: mpirun with a session folder of its own, removed after.
# mpiruns started together (ctest -j 2) race to create the shared /tmp/ompi.<host>.<uid>, and the
# loser fails in orte_init ("mkdir ... File exists", exit 1): seen 1 run in 6 of the mpi_exit2
# tests under load. mktemp's short /tmp path keeps the PMIx socket path under its 108 bytes. The
# folder is given through the environment under both names: Open MPI 4's (ORTE) and Open MPI 5's
# (PRRTE); each ignores the one it does not know. TERM and INT are passed on to mpirun, so it
# never outlives the folder.
#   mpirun_session.sh MPIEXEC ARGS...   (exit status: mpirun's)
set -uo pipefail
mpiexec=$1
shift
session=$(mktemp -d /tmp/ompi-XXXXXX) || exit 1
export OMPI_MCA_orte_tmpdir_base="$session" PRTE_MCA_prte_tmpdir_base="$session"
"$mpiexec" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
wait "$pid"
rc=$?
while kill -0 "$pid" 2>/dev/null; do  # a trapped signal ended the wait, not mpirun
  wait "$pid"
  rc=$?
done
rm -rf "$session"
exit "$rc"
