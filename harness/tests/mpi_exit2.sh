#!/usr/bin/env bash
# CTest helper: a command under mpirun that must refuse its input the way every dcpbench command
# does: exit 2 (mpirun passes the processes' code on) and exactly one "dcpbench: error:" line,
# from the lowest failing rank (rank 0 when every rank fails alike), containing PATTERN (grep -E); no MPI_Abort.
# The code and the line alone pass MPI_Abort(..., 2) (OpenMPI passes its code on, and its banner
# "MPI_ABORT was invoked on rank ..." is no "dcpbench: error:" line), so that banner fails the test
# by name. (Other stderr lines are allowed: mpirun's notice that processes exited non-zero, which
# it prints on every such run, and host-dependent warnings such as unused InfiniBand ports.)
#   mpi_exit2.sh MPIEXEC NP PATTERN COMMAND...
set -uo pipefail
mpiexec=$1 np=$2 pattern=$3
shift 3
# A session folder of its own (cmake/mpirun_session.sh says why).
err=$("$(dirname "$0")/../../cmake/mpirun_session.sh" "$mpiexec" --oversubscribe --allow-run-as-root -np "$np" "$@" 2>&1 >/dev/null)
rc=$?
lines=$(grep -c '^dcpbench: error:' <<<"$err")
if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$err"; then
  echo "expected exit 2 and one error line matching '$pattern'; got exit $rc and $lines error lines:"
  echo "$err" | head -20
  exit 1
fi
if grep -q 'MPI_ABORT was invoked' <<<"$err"; then
  echo "exit 2 and one error line, but through MPI_Abort:"
  echo "$err" | head -20
  exit 1
fi
echo "exit 2, one line: $(grep '^dcpbench: error:' <<<"$err" | cut -c1-200)"
