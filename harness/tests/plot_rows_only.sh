#!/usr/bin/env bash
# CTest helper: `dcpbench plot` on a results file with rows only (no "aggregates": DESIGN.md's
# contract asks for no more, and files written before cost model v2 have none) draws the same
# charts as on the file with them, and leaves no temporary copy behind (helper-33: it exited 1).
#   plot_rows_only.sh DCPBENCH RESULTS.json
set -uo pipefail
dcpbench=$1 results=$2
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "skipped: no /usr/bin/python3 with matplotlib"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work/tmp
mkdir "$TMPDIR"
/usr/bin/python3 - "$results" "$work/rows-only.json" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
assert "aggregates" in doc, "the input should have aggregates to remove"
del doc["aggregates"]
json.dump(doc, open(sys.argv[2], "w"))
PY
"$dcpbench" plot "$results" --out "$work/with" >/dev/null || { echo "plot of the full file failed"; exit 1; }
"$dcpbench" plot "$work/rows-only.json" --out "$work/rows" >/dev/null || { echo "plot of the rows-only file failed"; exit 1; }
with=$(cd "$work/with" && ls) rows=$(cd "$work/rows" && ls)
if [ -z "$rows" ] || [ "$with" != "$rows" ]; then
  echo "charts differ: with aggregates [$with], rows only [$rows]"
  exit 1
fi
if [ -n "$(ls -A "$TMPDIR")" ]; then
  echo "left in the temporary folder: $(ls -A "$TMPDIR")"
  exit 1
fi
echo "rows only: the same $(wc -w <<<"$rows") charts, nothing left behind"
