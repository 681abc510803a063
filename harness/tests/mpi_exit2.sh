#!/usr/bin/env bash
# CTest helper: a command under mpirun that must refuse its input the way every dcpbench command
# does: exit 2 (mpirun passes the processes' code on) and exactly one "dcpbench: error:" line,
# from the lowest failing rank (rank 0 when every rank fails alike), containing PATTERN (grep -E); no MPI_Abort.
# The code and the line alone pass MPI_Abort(..., 2) (OpenMPI passes its code on, and its banner
# "MPI_ABORT was invoked on rank ..." is no "dcpbench: error:" line), so stderr must hold nothing
# else but mpirun's notice that processes exited non-zero, which it prints on every such run
# (mpirun -q drops it, but the MPI_ABORT banner too).
#   mpi_exit2.sh MPIEXEC NP PATTERN COMMAND...
set -uo pipefail
mpiexec=$1 np=$2 pattern=$3
shift 3
# A session folder of its own: mpiruns started together (ctest -j 2) race to create the shared
# /tmp/ompi.<host>.<uid>, and the loser fails in orte_init ("mkdir ... File exists", exit 1).
session=$(mktemp -d) || exit 1
trap 'rm -rf "$session"' EXIT
err=$("$mpiexec" --oversubscribe --allow-run-as-root --mca orte_tmpdir_base "$session" -np "$np" "$@" 2>&1 >/dev/null)
rc=$?
lines=$(grep -c '^dcpbench: error:' <<<"$err")
# Every non-blank line but the error lines and mpirun's non-zero-exit notice (whole dashed blocks
# that say "terminated normally, but" or "exited with non-zero status"; any other block is kept).
others=$(grep -v '^dcpbench: error:' <<<"$err" | awk '
  /^----------+$/ {
    if (!open) { open = 1; block = $0; next }
    block = block "\n" $0; open = 0
    if (block !~ /terminated normally, but|exited with non-zero status/) print block
    next
  }
  open { block = block "\n" $0; next }
  { print }
  END { if (open) print block }' | grep -v '^[[:space:]]*$')
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
if [ -n "$others" ]; then
  echo "exit 2 and one error line, but stderr holds more:"
  echo "$others" | head -20
  exit 1
fi
echo "exit 2, one line: $(grep '^dcpbench: error:' <<<"$err" | cut -c1-200)"
