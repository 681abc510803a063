#!/usr/bin/python3
"""Charts of a dcpbench results file (schema dcpbench.results.v1), drawn from the JSON only.

Usage: /usr/bin/python3 harness/plot/plot_results.py RESULTS.json --out DIR
(normally through `dcpbench plot RESULTS.json --out DIR`). Needs Debian's python3-matplotlib.

Every number comes from the file's "aggregates" (computed once, in C++, by harness/aggregate.cpp);
this script does not aggregate rows again. Rows are read only for the step-0 pictures.

Writes into DIR:
  tflops.png               useful TFLOPS/GPU per strategy and scenario (time-weighted over steps):
                           as the scenario's script sets it (solid), tuned by `run --tune` (dotted
                           hatch, "(tuned)"), time-weighted over all steps,
                           and the published numbers of others (hatched "//", "(their number)",
                           their sources named in the title)
  speedup.png              speedup over the scenario's reference strategy (default packing):
                           ours as the scenario sets it (over the reference as set), ours tuned
                           (over the reference tuned), and published speedups (sources in the
                           note); the ratio of mean step times, or of 10%-trimmed means where the
                           scenario's published numbers are trimmed (Megatron's example); with
                           the file's "draws" section (`run --draws`) a whisker on each of ours
                           from the 5th to the 95th percentile over the draws, same statistic
  breakdown.png            mean step time split into compute / exposed comm / overhead (host floor,
                           micro-batch and iteration costs) / pipeline bubble / imbalance wait,
                           per strategy as the scenario sets it, one panel per scenario
  rank_busy_<scenario>.png busy time per DP x CP rank in step 0 (as the scenario sets it), one
                           panel per strategy
  plan_<scenario>.png      step-0 plan (as the scenario sets it): ranks x micro-batches, each
                           group coloured by its CP size, the same colour per size in every chart
Every chart says in its title or footer that the numbers are simulated and with which cost model
and calibration (the rows' "source").
"""
import argparse
import json
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

SCHEMA = "dcpbench.results.v1"
STRATEGY_ORDER = ["bshd", "packing", "megatron-pr2000", "megatron-dev", "nvidia-prototype", "dcp"]
COLORS = {"bshd": "#9e9e9e", "packing": "#4c72b0", "megatron-pr2000": "#dd8452",
          "megatron-dev": "#55a868", "nvidia-prototype": "#937860", "dcp": "#c44e52"}


def short_sha(sha):
    """The first 12 hex digits, keeping a "-dirty" suffix (a tree with uncommitted changes)."""
    sha = str(sha)
    return sha[:12] + ("-dirty" if sha.endswith("-dirty") else "")

def text_width(fig, text, fontsize):
    """The drawn width of one line of `text`, as a fraction of the figure's width."""
    w, _h, _d = fig.canvas.get_renderer().get_text_width_height_descent(text, FontProperties(size=fontsize), False)
    return w / fig.bbox.width


def fitted(fig, text, fontsize, width=0.96):
    """`text` wrapped at spaces so that each line, as drawn, is at most `width` of the figure wide
    (measured, not guessed from a character count: a title wrapped to a guessed width and centred
    over a narrower axes was cut at both ends)."""
    lines = []
    for word in text.split():
        if lines and text_width(fig, lines[-1] + " " + word, fontsize) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def finish(fig, doc, path, dpi, title, fontsize, note=None, legend=None):
    """Footer, title (and a one-line note under it) drawn first and measured, then the panels laid
    out in the room between them, then saved. The title is the figure's (fig.suptitle), centred
    over the figure, or over what a figure legend at the top right leaves; nothing relies on
    tight_layout knowing about the suptitle (matplotlib >= 3.3 does, and counted it twice)."""
    r = fig.canvas.get_renderer()
    height = fig.bbox.height
    bottom = footer(fig, doc).get_window_extent(r).y1 / height + 0.06 / fig.get_figheight()
    right, top = 1.0, 1.0 - 0.06 / fig.get_figheight()
    if legend is not None:
        box = legend.get_window_extent(r)
        right = box.x0 / fig.bbox.width - 0.01
    t = fig.suptitle(fitted(fig, title, fontsize, width=0.96 * right), fontsize=fontsize, x=right / 2, y=top,
                     ha="center", va="top")
    t.set_in_layout(False)
    top = t.get_window_extent(r).y0 / height
    if note:
        n = fig.text(right / 2, top - 0.03 / fig.get_figheight(), fitted(fig, note, fontsize - 1.5, width=0.96 * right),
                     fontsize=fontsize - 1.5, style="italic", color="#333333", ha="center", va="top")
        n.set_in_layout(False)
        top = n.get_window_extent(r).y0 / height
    if legend is not None:
        top = min(top, legend.get_window_extent(r).y0 / height)
    for _ in range(2):  # twice: one pass misjudges the margins a long tick label needs once the axes moved
        fig.tight_layout(rect=(0, bottom, 1, top - 0.06 / fig.get_figheight()))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


# The aggregate keys the charts draw (harness/aggregate.cpp writes them as numbers, or null).
NUMERIC_AGGREGATE_KEYS = ("tflops_per_gpu", "step_time_s", "speedup_vs_reference", "trimmed_speedup_vs_reference",
                          "compute_s", "comm_s", "overhead_s", "bubble_s", "imbalance_s", "tokens_per_s_per_gpu")


def fail(msg):
    print("plot_results.py: error: " + msg, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if doc.get("schema") != SCHEMA:
        fail(f"{path}: \"schema\" is not \"{SCHEMA}\"")
    if not isinstance(doc.get("rows"), list):
        fail(f"{path}: \"rows\" is missing")
    return doc


def strategy_key(s):
    return (STRATEGY_ORDER.index(s) if s in STRATEGY_ORDER else len(STRATEGY_ORDER), s)


def color(s):
    return COLORS.get(s, "#8172b3")


def cp_color(k):
    """One colour per CP size in every plan chart, from tab20 by log2(k): its ten dark hues for CP 1
    to 512, then their light ones up to 2^19 (sizes are powers of two, scenario.cpp). A size's colour
    had been re-assigned per chart, CP 4 yellow in one and green in the next."""
    i = int(math.log2(max(1, k))) % 20
    return plt.get_cmap("tab20")((2 * i) % 20 + i // 10)


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def hyphen_wrapped(name, width=10):
    """A strategy name on lines of about `width` characters, broken after hyphens: "nvidia-\nprototype"
    (level labels of six strategies overlapped in a 5.2-inch panel when slanted)."""
    lines = []
    for part in re.findall(r"[^-]+-?|-", name):
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(lines)


def aggregates_of(doc):
    """(scenario, strategy, setting) -> the C++ aggregate, and the scenario/strategy order."""
    aggs = doc.get("aggregates")
    if not isinstance(aggs, list):
        fail("the results file has no \"aggregates\" (written by dcpbench run since cost model v2; re-run it)")
    out, order = {}, []
    for i, a in enumerate(aggs):
        if not isinstance(a, dict) or not isinstance(a.get("scenario"), str) or not isinstance(a.get("strategy"), str):
            fail(f"\"aggregates[{i}]\" has no \"scenario\" and \"strategy\" strings")
        for k, v in a.items():  # a metric drawn from the file: a number or null (oom), nothing else
            if k in NUMERIC_AGGREGATE_KEYS and v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                fail(f"\"aggregates[{i}].{k}\"={json.dumps(v)[:40]} is not a number")
        key = (a["scenario"], a["strategy"], a.get("setting", "published"))
        out[key] = a
        if key[2] == "published":
            order.append((key[0], key[1]))
    return out, order


def label_of(a):
    if a.get("valid"):
        return None
    return "out of memory" if a.get("oom_steps") else "invalid plan"


def footer(fig, doc):
    ctx = doc.get("context", {})
    sources = sorted({r.get("source", "?") for r in doc["rows"]})
    kinds = sorted({s.split(":", 1)[0] for s in sources})  # "simulated" and/or "measured", from the rows
    text = ("ours: " + ", ".join(sources) + f" ({' + '.join(kinds)}) | git {short_sha(ctx.get('git_sha', '?'))}"
            f" | {ctx.get('date', '')}")
    # Smaller on a narrow (one-scenario) figure rather than cut at its right edge.
    size = 7.0
    while size > 4.0 and text_width(fig, text, size) > 0.98:
        size -= 0.25
    t = fig.text(0.01, 0.005, fitted(fig, text, size, width=0.98), fontsize=size, color="#555555", ha="left",
                 va="bottom")
    t.set_in_layout(False)
    return t


def kind_of(doc):
    """How ours was obtained, from the rows: "simulated", "measured" or "simulated and measured"."""
    kinds = sorted({r.get("source", "?").split(":", 1)[0] for r in doc["rows"]})
    return " and ".join(k for k in kinds if k in ("simulated", "measured")) or "simulated"


def published_of(doc):
    """Others' published numbers per scenario; none beside measured rows (a rank share's busy time and
    rate are not a whole step's, so the table does not compare them either)."""
    if kind_of(doc) != "simulated":
        return {}
    pub = {}
    for s in doc.get("scenarios", []):
        if isinstance(s, dict) and isinstance(s.get("published"), dict):
            pub[s["name"]] = s["published"]
    return pub


def draw_spreads(doc, statistic="speedup"):
    """(scenario, setting, strategy) -> (p5, p95) of the speedup over the draws of `run --draws`
    (`statistic`: "speedup", of summed step times, or "trimmed_speedup", of 10%-trimmed mean step
    times: the bars' own), and the number of draws (0: no section)."""
    d = doc.get("draws")
    if not isinstance(d, dict):
        return {}, 0
    out = {}
    for sc in d.get("scenarios") or []:
        for setting, study in (("published", sc), ("tuned", sc.get("tuned"))):
            if not isinstance(study, dict):
                continue
            for st, v in (study.get("strategies") or {}).items():
                sp = (v or {}).get(statistic) or {}
                if "p5" in sp and "p95" in sp:
                    out[(sc.get("scenario"), setting, st)] = (sp["p5"], sp["p95"])
    return out, d.get("draws", 0)


def trimmed_scenarios(doc):
    """The scenarios whose published numbers are 10%-trimmed means (Megatron's example computes its
    iteration time so): their speedups are drawn as trimmed means too, like for like."""
    return {sc for sc, p in published_of(doc).items() if p.get("statistic") == "trimmed_mean_10"}


def short_source(src, most=70):
    """A source's name: the text before its first "(", cut after a whole word at `most` characters."""
    s = src.split("(")[0].strip()
    if len(s) <= most:
        return s
    cut = s.rfind(" ", 0, most)
    return s[:cut if cut > 0 else most] + "…"


def plot_tflops(doc, agg, order, out):
    """One panel per scenario: our bars per strategy, then published bars (hatched) beside them.
    The x labels are vertical and a panel is as wide as its bars need (a --tune run with two
    published numbers has 14 bars, whose slanted labels overlapped in a 4.4-inch panel)."""
    scenarios = list(dict.fromkeys(k[0] for k in order))
    pub = published_of(doc)
    bars = {}  # scenario -> [(label, strategy, our aggregate or their number, "published" | "tuned" | "theirs")]
    for sc in scenarios:
        strategies = sorted({k[1] for k in order if k[0] == sc}, key=strategy_key)
        bars[sc] = [(s + ("\n(tuned)" if setting == "tuned" else ""), s, agg[(sc, s, setting)], setting)
                    for s in strategies for setting in ("published", "tuned") if (sc, s, setting) in agg]
        bars[sc] += [(v["strategy"] + "\n(their number)", v["strategy"], v["tflops_per_gpu"], "theirs")
                     for v in (pub.get(sc, {}).get("values") or []) if "tflops_per_gpu" in v]
    cols = min(4, len(scenarios))
    rows = math.ceil(len(scenarios) / cols)
    panel_w = max(4.4, 1.2 + 0.3 * max(len(b) for b in bars.values()))
    fig, axes = plt.subplots(rows, cols, figsize=(panel_w * cols, 4.0 * rows + 0.9), squeeze=False)
    for n, sc in enumerate(scenarios):
        ax = axes[n // cols][n % cols]
        # (solid: as the scenario sets it; dotted: tuned; hatched //: published by others)
        for x, (_label, s, v, what) in enumerate(bars[sc]):
            if what == "theirs":
                ax.bar(x, v, 0.7, color=color(s), hatch="//", edgecolor="black", alpha=0.5)
                ax.text(x, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
                continue
            a, hatch = v, (".." if what == "tuned" else None)
            if a["valid"]:
                ax.bar(x, a["tflops_per_gpu"], 0.7, color=color(s), hatch=hatch, edgecolor="white" if hatch else None)
                ax.text(x, a["tflops_per_gpu"], f"{a['tflops_per_gpu']:.0f}", ha="center", va="bottom", fontsize=7)
            else:
                ax.text(x, 0, label_of(a), rotation=90, ha="center", va="bottom", fontsize=7, color="red")
        ax.set_xticks(range(len(bars[sc])))
        ax.set_xticklabels([b[0] for b in bars[sc]], rotation=90, ha="center", fontsize=7)
        ax.set_xlim(-0.6, len(bars[sc]) - 0.4)
        ax.set_title(sc, fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.12)
        if n % cols == 0:
            ax.set_ylabel("useful TFLOPS/GPU", fontsize=8)
    for n in range(len(scenarios), rows * cols):
        axes[n // cols][n % cols].axis("off")
    sources = sorted({short_source(p.get("source", "?")) for sc, p in pub.items() if sc in scenarios
                      and any("tflops_per_gpu" in v for v in (p.get("values") or []))})
    tuned_drawn = any(b[3] == "tuned" for sc in scenarios for b in bars[sc])
    what = ("ours simulated as the scenario's script sets it (solid)" + (" and tuned (dotted)" if tuned_drawn else "") +
            ", time-weighted over all steps (not trimmed); hatched // = their number, "
            "published by others on their hardware" + (" (" + "; ".join(sources) + ")" if sources else "")
            ) if kind_of(doc) == "simulated" else (
            f"ours {kind_of(doc)}; a measured bar is one rank's share of the step on one stage (README)")
    finish(fig, doc, os.path.join(out, "tflops.png"), 110,
           "Useful TFLOPS per GPU (Megatron formula, real lengths, no recompute): " + what, 9)


def plot_speedup(doc, agg, order, out):
    scenarios = list(dict.fromkeys(k[0] for k in order))
    refs = {sc: next((a.get("reference", "packing") for k, a in agg.items() if k[0] == sc), "packing") for sc in scenarios}
    strategies = [s for s in sorted({k[1] for k in order}, key=strategy_key)
                  if not all(s == refs[sc] for sc in scenarios)]
    pub = published_of(doc)
    # Trimmed where the published numbers are and every aggregate of ours has the trimmed value
    # (aggregate.cpp writes it beside the plain one; a file without it is drawn plain, and says so).
    trimmed = {sc for sc in trimmed_scenarios(doc) & set(scenarios)
               if all(a.get("trimmed_speedup_vs_reference") is not None for k, a in agg.items()
                      if k[0] == sc and a.get("valid") and a.get("speedup_vs_reference") is not None)}
    spreads, draws = draw_spreads(doc)
    trimmed_spreads, _ = draw_spreads(doc, "trimmed_speedup")
    fig, ax = plt.subplots(figsize=(min(18, 4 + 1.6 * len(scenarios)), 5.5))
    bars = [(s, setting) for s in strategies for setting in ("published", "tuned")]
    width = 0.8 / (len(bars) + 1)
    seen, left_out, sources = set(), [], {}
    tuned_drawn = False
    label_top = 0.0
    for i, sc in enumerate(scenarios):
        for j, (s, setting) in enumerate(bars):
            a = agg.get((sc, s, setting))
            # Where the published numbers are trimmed means, ours are drawn as trimmed means too.
            key = "trimmed_speedup_vs_reference" if sc in trimmed else "speedup_vs_reference"
            if not a or not a.get("valid") or a.get(key) is None or s == refs[sc]:
                continue
            x = i + (j - len(bars) / 2) * width
            lab = s + (" (tuned)" if setting == "tuned" else "")
            ax.bar(x, a[key], width, color=color(s), hatch=".." if setting == "tuned" else None,
                   edgecolor="white" if setting == "tuned" else None, label=lab if lab not in seen else None)
            seen.add(lab)
            tuned_drawn = tuned_drawn or setting == "tuned"
            own = trimmed_spreads if sc in trimmed else spreads
            top = a[key]
            if (sc, setting, s) in own:  # draw 0 (the bar) may lie outside its own p5-p95
                lo, hi = own[(sc, setting, s)]
                ax.vlines(x, lo, hi, color="black", lw=0.7)
                ax.hlines([lo, hi], x - width / 4, x + width / 4, color="black", lw=0.7)
                top = max(top, hi)
            # Upright, above the bar and its whisker: level labels of ~100 bars ran into each other
            # and into the whiskers.
            ax.text(x, top, f" {a[key]:.2f}", ha="center", va="bottom", fontsize=5, rotation=90)
            label_top = max(label_top, top)
        # Published speedups are over packing (the scenario's "published" values carry
        # speedup_vs_packing): beside ours only where ours are over packing too.
        theirs = [v for v in (pub.get(sc, {}).get("values") or []) if "speedup_vs_packing" in v]
        if theirs and refs[sc] != "packing":
            left_out.append(sc)
            continue
        x = i + (len(bars) / 2) * width
        drawn = set()  # one bar per published speedup (a scenario may set it beside two of ours)
        source = short_source(pub[sc].get("source", "?")) if theirs else ""
        for v in theirs:
            if v["speedup_vs_packing"] not in drawn:
                drawn.add(v["speedup_vs_packing"])
                # One legend entry per strategy of ours it stands beside (its colour); the sources
                # are named in the note under the title.
                tag = ("pub", v["strategy"])
                lab = f"published, beside our {v['strategy']}" if tag not in seen else None
                seen.add(tag)
                seen.add("pub")
                sources.setdefault(source, None)
                ax.bar(x, v["speedup_vs_packing"], width, color=color(v["strategy"]), hatch="//",
                       edgecolor="black", alpha=0.55, label=lab)
                ax.text(x, v["speedup_vs_packing"], f" {v['speedup_vs_packing']:.2f}", ha="center", va="bottom",
                        fontsize=6, rotation=90)
                label_top = max(label_top, v["speedup_vs_packing"])
    ax.axhline(1.0, color="black", lw=0.8)
    if label_top > 0:  # room for the upright labels above the highest bar or whisker
        ax.set_ylim(top=max(ax.get_ylim()[1], 1.14 * label_top))
    ax.set_xticks(range(len(scenarios)))
    # Level and broken after hyphens (slanted, a long first name ran off the figure's left edge);
    # vertical where there are many.
    ax.set_xticklabels([hyphen_wrapped(sc, 20) for sc in scenarios], fontsize=8,
                       rotation=90 if len(scenarios) > 8 else 0)
    ax.set_ylabel("speedup over the reference strategy (same batches)")
    # Outside the axes, right: inside, "best" placement weighs the bars but not their value labels,
    # and could cover one.
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
    else:  # nothing drawn (e.g. every reference out of memory): say so, not an empty legend box
        ax.text(0.5, 0.5, "no speedup to draw", transform=ax.transAxes, ha="center", va="center", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ref_names = sorted(set(refs.values()))
    notes = []
    # Scenarios whose reference has no valid, fitting row in any setting have no speedups at all
    # (new-user trial, helper-73: the chart was left empty without a word).
    no_ref = [sc for sc in scenarios
              if not any((agg.get((sc, refs[sc], st)) or {}).get("valid") for st in ("published", "tuned"))]
    if no_ref:
        notes.append("No speedups for " + ", ".join(no_ref) + ": the reference (" +
                     ", ".join(sorted({refs[sc] for sc in no_ref})) + ") does not fit the GPU or has no valid plan there.")
    if sources:
        named = "; ".join(sources)
        notes.append("Published (//, on their hardware): " + named + ("" if named.endswith("…") else "."))
    if left_out:
        notes.append("Published speedups (over packing) left out for " + ", ".join(left_out) + ": ours there are over " +
                     ", ".join(sorted({refs[sc] for sc in left_out})) + ".")
    note = " ".join(notes) or None
    statistic = ("ratio of mean step times" + (" (10%-trimmed means for " + ", ".join(sc for sc in scenarios if sc in trimmed) +
                                               ", the statistic Megatron publishes)" if trimmed else ""))
    finish(fig, doc, os.path.join(out, "speedup.png"), 120,
           "Speedup over " + ", ".join(ref_names) + f" ({kind_of(doc)}; {statistic}): as the scenario's script sets "
           "it (solid, over the reference as set)" +
           (", each strategy tuned (dotted, over the reference tuned)" if tuned_drawn else "") +
           (", published by others (//, on their hardware)" if "pub" in seen else "") +
           (f"; whiskers: p5-p95 over {draws} draws of the batches (a bar, one draw, may lie outside)"
            if draws else ""), 9, note=note)


def plot_breakdown(doc, agg, order, out):
    scenarios = list(dict.fromkeys(k[0] for k in order))
    cols = min(3, len(scenarios))
    rows = math.ceil(len(scenarios) / cols)
    most = max(len({k[1] for k in order if k[0] == sc}) for sc in scenarios)
    fig, axes = plt.subplots(rows, cols, figsize=(max(5.2, 1.0 + 0.75 * most) * cols, 3.6 * rows + 0.9), squeeze=False)
    # Colours of their own (Okabe-Ito), none a strategy's: compute had been packing's blue, comm
    # megatron-pr2000's orange, imbalance dcp's red.
    parts = [("compute_s", "compute (incl. recompute)", "#0072b2"), ("comm_s", "exposed comm", "#e69f00"),
             ("overhead_s", "overhead (host floor, micro-batch, iteration)", "#cc79a7"),
             ("bubble_s", "pipeline bubble", "#c7c7c7"),
             ("imbalance_s", "imbalance wait (idle beyond the bubble: waiting for slower ranks)", "#505050")]
    for n, sc in enumerate(scenarios):
        ax = axes[n // cols][n % cols]
        strategies = sorted({k[1] for k in order if k[0] == sc}, key=strategy_key)
        for j, s in enumerate(strategies):
            a = agg[(sc, s, "published")]
            if not a["valid"]:
                ax.text(j, 0, label_of(a), rotation=90, ha="center", va="bottom", color="red", fontsize=7)
                continue
            bottom = 0.0
            for k, label, c in parts:
                v = a.get(k, 0) or 0
                ax.bar(j, v, 0.6, bottom=bottom, color=c)
                bottom += v
        ax.set_xticks(range(len(strategies)))
        ax.set_xlim(-0.6, len(strategies) - 0.4)  # every slot, also an oom one at the end (a label, no bar)
        ax.set_xticklabels([hyphen_wrapped(s) for s in strategies], fontsize=7)
        ax.set_ylabel("seconds per step (mean over GPUs)", fontsize=7)
        ax.set_title(sc, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ymax = max((agg[(sc, s, "published")].get("step_time_s", 0) for s in strategies
                    if agg[(sc, s, "published")]["valid"]), default=0)
        times = sorted(agg[(sc, s, "published")].get("step_time_s", 0) for s in strategies
                       if agg[(sc, s, "published")]["valid"])
        if len(times) > 2 and ymax > 4 * times[-2]:  # e.g. padded layouts: clip so the others stay readable
            ax.set_ylim(0, 1.6 * times[-2])
            ax.text(0.01, 0.97, "slowest bar clipped", transform=ax.transAxes, fontsize=6, va="top")
    for n in range(len(scenarios), rows * cols):
        axes[n // cols][n % cols].axis("off")
    # One legend for the figure, at its top right: inside the first panel it could cover a bar.
    legend = fig.legend(handles=[Patch(facecolor=c, label=label) for _k, label, c in parts], loc="upper right",
                        fontsize=7, ncol=1 if cols < 2 else 2)
    finish(fig, doc, os.path.join(out, "breakdown.png"), 110,
           f"Step time breakdown ({kind_of(doc)}; strategies as the scenarios set them; mean over the scenario's steps"
           + ("; a measured step is one GPU's busy time, all compute)" if "measured" in kind_of(doc) else ")"), 11,
           legend=legend)


def step_count(doc, scenario):
    """How many steps the scenario's rows hold (the step-0 charts say "step 0 of N")."""
    return len({r.get("step") for r in doc["rows"] if r["scenario"] == scenario})


def step0_rows(doc, scenario):
    rs = [r for r in doc["rows"] if r["scenario"] == scenario and r.get("step") == 0
          and r.get("setting", "published") == "published"]
    return sorted(rs, key=lambda r: strategy_key(r["strategy"]))


def plot_rank_busy(doc, scenario, out):
    rs = [r for r in step0_rows(doc, scenario) if r.get("plan_valid") and r.get("rank_busy_s") and r.get("step_time_s")]
    if not rs:
        return None
    fig, axes = plt.subplots(len(rs), 1, figsize=(9, 1.7 * len(rs) + 0.8), sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], rs):
        busy = r["rank_busy_s"]
        ax.bar(range(len(busy)), busy, color=color(r["strategy"]))
        ax.axhline(r["step_time_s"], color="black", lw=0.8, ls="--", label="step time")
        mean = sum(busy) / len(busy)
        ax.axhline(mean, color="gray", lw=0.8, ls=":", label="mean busy")
        ax.set_ylabel("busy (s)", fontsize=7)
        ax.set_title(f"{r['strategy']}: max/mean {max(busy) / mean if mean else 0:.2f}, "
                     f"step {r['step_time_s']:.3f} s", fontsize=8)
        ax.tick_params(labelsize=7)
    # Above the first panel's right end, outside it: inside, it covered the last ranks' bars.
    axes[0, 0].legend(fontsize=6, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False,
                      borderaxespad=0.1)
    axes[-1, 0].set_xlabel("DP x CP rank (busy = compute + exposed CP comm, DP gradient sync excluded; mean over its "
                           "PP stages)", fontsize=8)
    path = os.path.join(out, f"rank_busy_{safe(scenario)}.png")
    steps = step_count(doc, scenario)
    finish(fig, doc, path, 110, f"{scenario}: per-rank busy time, step 0 of {steps}, as the scenario sets it "
           f"({kind_of(doc)})", 10)
    return path


def plot_plan(doc, scenario, out):
    rs = [r for r in step0_rows(doc, scenario) if r.get("plan_valid") and isinstance(r.get("plan"), list)]
    if not rs:
        return None
    sizes = sorted({g[1] for r in rs for mb in r["plan"] for g in mb})
    size_color = {k: cp_color(k) for k in sizes}  # the same colour for a CP size in every chart
    fig, axes = plt.subplots(len(rs), 1, figsize=(11, 1.9 * len(rs) + 1.0), squeeze=False)
    for ax, r in zip(axes[:, 0], rs):
        patches, colors = [], []
        pool = 0
        for m, mb in enumerate(r["plan"]):
            for first, k, _n, _tok in mb:
                patches.append(Rectangle((m, first), 1, k))
                colors.append(size_color[k])
                pool = max(pool, first + k)
        # Group edges: white on small pools; on larger ones faint dark hairlines (white edges made
        # the CP 1 cells of a 64-rank pool look pink); none on very long plans.
        small = pool <= 16
        pc = PatchCollection(patches, facecolor=colors, edgecolor="white" if small else (0, 0, 0, 0.35),
                             linewidth=0 if len(r["plan"]) >= 200 else (0.4 if small else 0.2))
        ax.add_collection(pc)
        ax.set_xlim(0, max(1, len(r["plan"])))
        ax.set_ylim(pool, 0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("rank", fontsize=7)
        count = len(r["plan"])
        ax.set_title(f"{r['strategy']}: {count} micro-batch{'' if count == 1 else 'es'}", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel("micro-batch (schedule order)")
    handles = [Patch(facecolor=size_color[k], label=f"CP {k}") for k in sizes]
    legend = fig.legend(handles=handles, loc="upper right", fontsize=7, ncol=min(len(handles), 8))
    path = os.path.join(out, f"plan_{safe(scenario)}.png")
    steps = step_count(doc, scenario)
    finish(fig, doc, path, 110, f"{scenario}: plan of step 0 of {steps}, as the scenario sets it (groups coloured "
           "by CP size)", 10, legend=legend)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    doc = load(args.results)
    agg, order = aggregates_of(doc)
    if not order:
        fail(f"{args.results}: no rows")
    try:  # only once there is something to draw: a refused file leaves no folder behind
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        fail(f"--out {args.out}: {e.strerror or e}")
    if not os.path.isdir(args.out):
        fail(f"--out {args.out}: not a folder")
    written = []
    plot_tflops(doc, agg, order, args.out)
    written.append("tflops.png")
    plot_speedup(doc, agg, order, args.out)
    written.append("speedup.png")
    plot_breakdown(doc, agg, order, args.out)
    written.append("breakdown.png")
    for sc in dict.fromkeys(k[0] for k in order):
        for p in (plot_rank_busy(doc, sc, args.out), plot_plan(doc, sc, args.out)):
            if p:
                written.append(os.path.basename(p))
    print(f"plot_results.py: wrote {len(written)} charts to {args.out}: " + ", ".join(written))


if __name__ == "__main__":
    main()
