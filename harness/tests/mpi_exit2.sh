#!/usr/bin/env bash
# CTest helper: a command under mpirun that must refuse its input the way every dcpbench command
# does: exit 2 (mpirun passes the processes' code on) and exactly one "dcpbench: error:" line,
# from the lowest failing rank (rank 0 when every rank fails alike), containing PATTERN (grep -E); no MPI_Abort.
#   mpi_exit2.sh MPIEXEC NP PATTERN COMMAND...
set -uo pipefail
mpiexec=$1 np=$2 pattern=$3
shift 3
err=$("$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$@" 2>&1 >/dev/null)
rc=$?
lines=$(grep -c '^dcpbench: error:' <<<"$err")
if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$err"; then
  echo "expected exit 2 and one error line matching '$pattern'; got exit $rc and $lines error lines:"
  echo "$err" | head -20
  exit 1
fi
echo "exit 2, one line: $(grep '^dcpbench: error:' <<<"$err" | cut -c1-200)"
