#!/usr/bin/env bash
# CTest helper: `dcpbench plot` on a results file with rows only (no "aggregates": DESIGN.md's
# contract asks for no more, and files written before cost model v2 have none) draws the same
# charts as on the file with them, and leaves no temporary copy behind (helper-33: it exited 1);
# a file written before 0b0a667 is drawn with today's aggregates, today's file as it is (helper-2).
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
# A file written before 0b0a667 (fractions as means of the steps' ratios) is drawn with the
# aggregates table, gate and evaluate use (a copy with them); today's file goes to the script as is.
cat > "$work/capture.py" <<'PY'
import json, os, sys
open(sys.argv[-1] + ".seen", "w").write(json.dumps({"path": sys.argv[-1], "aggregates": json.load(open(sys.argv[-1]))["aggregates"]}))
open(os.path.join(sys.argv[sys.argv.index("--out") + 1], "seen.png"), "wb").close()  # plot wants a chart
PY
/usr/bin/python3 - "$results" "$work/legacy.json" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
for a in doc["aggregates"]:
    rows = [r for r in doc["rows"] if (r["scenario"], r.get("setting", "published"), r["strategy"]) ==
            (a["scenario"], a.get("setting", "published"), a["strategy"]) and r.get("plan_valid", True) and not r.get("oom")]
    for k in ("bubble_frac", "comm_frac", "plan_efficiency"):
        if rows and a.get(k) is not None:
            a[k] = sum(r[k] for r in rows) / len(rows)
json.dump(doc, open(sys.argv[2], "w"))
PY
cp "$results" "$work/today.json"
for f in today legacy; do
  "$dcpbench" plot "$work/$f.json" --out "$work/charts-$f" --script "$work/capture.py" >/dev/null 2>&1 ||
    { echo "plot of the $f file with a capturing script failed"; exit 1; }
done
/usr/bin/python3 - "$work" "$results" <<'PY' || exit 1
import glob, json, os, sys
work, results = sys.argv[1], sys.argv[2]
seen = {os.path.basename(p): json.load(open(p)) for p in glob.glob(work + "/**/*.seen", recursive=True)}
today = seen.get("today.json.seen")
assert today and today["path"].endswith("/today.json"), f"today's file did not go to the script as it is: {list(seen)}"
legacy = [v for k, v in seen.items() if k != "today.json.seen"]
assert len(legacy) == 1 and not legacy[0]["path"].endswith("/legacy.json"), f"the older file was not copied: {list(seen)}"
want = json.load(open(results))["aggregates"]
assert legacy[0]["aggregates"] == want, "the older file's copy does not carry today's aggregates"
assert json.load(open(work + "/legacy.json"))["aggregates"] != want, "the test's older file is no different"
PY
echo "rows only: the same $(wc -w <<<"$rows") charts, nothing left behind; an older file drawn with today's aggregates"
