#!/usr/bin/env bash
# CTest dcpbench_converge_mpi_bitwise: `mpirun -np 8 dcpbench converge --backend mpi` must give
# bitwise the same losses, MTP losses and gradient norms as the thread run of the same scenario
# (issue 7: one process per rank, the same fixed-order reductions). Two main steps plus the edge
# cases keep it short; the exit code of each run (1 when the short run's loss has not yet fallen
# by 10%) does not matter here, only that both wrote their report and the reports agree.
#   converge_mpi_bitwise.sh DCPBENCH MPIEXEC SCENARIO WORKDIR
set -uo pipefail
dcpbench=$1 mpiexec=$2 scenario=$3 work=$4
mkdir -p "$work"
rm -f "$work/threads.json" "$work/mpi.json"
"$dcpbench" converge --scenario "$scenario" --steps 2 --quiet --out "$work/threads.json" > /dev/null 2>&1
"$mpiexec" --oversubscribe --allow-run-as-root -np 8 "$dcpbench" converge --backend mpi \
  --scenario "$scenario" --steps 2 --quiet --out "$work/mpi.json" > /dev/null 2>&1
python3 - "$work/threads.json" "$work/mpi.json" <<'PY'
import json, struct, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["pool"]["backend"] == "threads" and b["pool"]["backend"] == "mpi", "wrong backends"
bad = []
n = 0
for name, s in a["strategies"].items():
    t = b["strategies"].get(name)
    if t is None:
        bad.append(f"{name}: missing from the mpi report")
        continue
    for key in ("losses", "mtp_losses", "grad_norms"):
        # JSON carries doubles with 17 significant digits: equal text <=> equal bits.
        x = [struct.pack("<d", v) for v in s.get(key, [])]
        y = [struct.pack("<d", v) for v in t.get(key, [])]
        n += len(x)
        if x != y:
            i = next((k for k in range(min(len(x), len(y))) if x[k] != y[k]), min(len(x), len(y)))
            bad.append(f"{name} {key} step {i}: threads {s[key][i] if i < len(x) else None} mpi {t[key][i] if i < len(y) else None}")
if bad:
    print("converge threads vs mpi: NOT bitwise equal:\n  " + "\n  ".join(bad))
    sys.exit(1)
print(f"converge threads vs mpi: bitwise equal ({n} values over {len(a['strategies'])} runs)")
PY
