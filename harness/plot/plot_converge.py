#!/usr/bin/python3
"""Charts of a dcpbench convergence report (schema dcpbench.converge.v1), drawn from the JSON only.

Usage: /usr/bin/python3 harness/plot/plot_converge.py CONVERGE.json --out DIR
(normally through `dcpbench plot CONVERGE.json --out DIR`). Needs Debian's python3-matplotlib.

Writes into DIR:
  converge_loss.png    per-token LM loss per step of the reference and every strategy (they lie on
                       top of each other when the run passes), edge-case steps marked (each
                       starts from the initial model, so its loss is the untrained model's)
  converge_dloss.png   |loss - reference loss| / reference loss per step, log scale, with the bound
  converge_grad.png    max |g - g_ref| / max |g_ref| per step, log scale, with the bound
  converge_grad_same_params.png   float32 reports only: each step at the float32 reference's
                       parameters, the largest over the tensors of a tensor's difference / its own
                       bound, log scale, against 1
Every chart's footer says the numbers were executed (not simulated): dtype, ranks, backend, git sha.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from plot_results import COLORS as STRATEGY_COLORS, short_sha  # noqa: E402  (this folder, first on sys.path)

SCHEMA = "dcpbench.converge.v1"
COLORS = {"reference": "#000000", "reference_f64": "#777777", **STRATEGY_COLORS}
# Zero differences cannot be drawn on a log axis; they are drawn at this floor and said so.
ZERO_FLOOR = 1e-18



def fail(msg):
    print("plot_converge.py: error: " + msg, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if doc.get("schema") != SCHEMA:
        fail(f"{path}: \"schema\" is not \"{SCHEMA}\"")
    if not isinstance(doc.get("strategies"), dict) or "reference" not in doc["strategies"]:
        fail(f"{path}: no \"strategies\" with a \"reference\"")
    return doc


def order(doc):
    names = doc.get("strategy_order") or list(doc["strategies"])
    return [n for n in names if n in doc["strategies"] and "losses" in doc["strategies"][n]]


def footer(fig, doc):
    ctx = doc.get("context", {})
    pool = doc.get("pool", {})
    # context.device says where it ran (e.g. "cpu, threads backend, 8 ranks": ranks are not GPUs)
    text = (f"executed, not simulated: {'float32' if doc.get('dtype') == 'f32' else 'float64'}, "
            f"{ctx.get('device') or str(pool.get('ranks', '?')) + ' ranks (' + str(pool.get('backend', '?')) + ' backend)'}, "
            f"scenario {doc.get('scenario', '?')}, git {short_sha(ctx.get('git_sha', '?'))}, {ctx.get('date', '')}")
    fig.text(0.01, 0.01, text, fontsize=7, color="#555555")


def same_as(doc, key, names, twin=None):
    """For each strategy, a legend suffix naming the earlier strategy whose `key` series it equals
    bitwise on the most steps, if that is at least 90% of them (its line would hide the earlier
    one's: e.g. nvidia-prototype trains megatron-dev's plans where its search holds no m), else "".
    (Strategies whose sums happen to round alike agree on many steps, 50-70% here: not said.)
    `twin` (a dict), if given, receives that earlier strategy's name for each strategy with a suffix."""
    out, seen = {}, []
    for n in names:
        series = doc["strategies"][n].get(key)
        best, best_same = None, 0
        for m, other in seen:
            if series is None or other is None or len(other) != len(series):
                continue
            same = sum(1 for a, b in zip(series, other) if a == b)
            if same > best_same:
                best, best_same = m, same
        out[n] = ""
        if best is not None and series and 10 * best_same >= 9 * len(series):
            out[n] = f" (= {best}" + ("" if best_same == len(series) else f" on {best_same} of {len(series)} steps") + ")"
            if twin is not None:
                twin[n] = best
        seen.append((n, series))
    return out


def edge_steps(doc):
    """The indices of the edge-case steps (step_kinds "edge:<name>")."""
    return {i for i, k in enumerate(doc.get("step_kinds", [])) if isinstance(k, str) and k.startswith("edge:")}


def mark_edges(ax, doc, bottom=False):
    for i, kind in enumerate(doc.get("step_kinds", [])):
        if kind.startswith("edge:"):
            ax.axvline(i, color="#bbbbbb", lw=0.8, ls=":")
            ax.text(i, 0.02 if bottom else 1.0, kind[5:], rotation=90, fontsize=6,
                    va="bottom" if bottom else "top", ha="right",
                    transform=ax.get_xaxis_transform(), color="#777777")


def plot_loss(doc, out):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    names = order(doc)
    twins = same_as(doc, "losses", names)
    # Each edge case starts again from the initial model (converge.h): its loss is a point of its
    # own, not joined to the main steps' curve or to the other edge cases.
    edge = edge_steps(doc)
    for n in names:
        s = doc["strategies"][n]
        ref = n.startswith("reference")
        vals = [float("nan") if v is None else v for v in s["losses"]]
        main = [float("nan") if i in edge else v for i, v in enumerate(vals)]
        ax.plot(range(len(main)), main, label=n + twins[n], color=COLORS.get(n),
                lw=2.2 if ref else 1.0, ls="-" if ref else (":" if twins[n] else "--"), alpha=0.9)
        if edge:
            xs = sorted(i for i in edge if i < len(vals))
            ax.plot(xs, [vals[i] for i in xs], ls="none", marker="o" if ref else "x",
                    ms=6 if ref else 4, color=COLORS.get(n), alpha=0.9)
    if edge and doc.get("edge_case_start") == "initial_model":
        ax.text(0.99, 0.6, "edge cases: one step each\nfrom the initial model", transform=ax.transAxes,
                ha="right", va="center", fontsize=7, color="#777777")
    mark_edges(ax, doc, bottom=True)  # the edge cases' losses are near the top
    ax.set_xlabel("step")
    ax.set_ylabel("per-token LM loss (nats)")
    ax.set_title("Loss per step: every strategy vs the single-rank reference")
    ax.legend(fontsize=8)
    footer(fig, doc)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(os.path.join(out, "converge_loss.png"), dpi=120)
    plt.close(fig)


def plot_diff(doc, out, key, bound_key, ylabel, title, fname):
    fig, ax = plt.subplots(figsize=(8, 4.5))
    zeros = gaps = False
    names = order(doc)
    twin = {}
    twins = same_as(doc, key, names, twin)
    edge = edge_steps(doc)
    for n in names:
        s = doc["strategies"][n]
        if key not in s:
            continue
        # None: not finite (a diverged run; JSON has no NaN): left as a gap, said in the title
        vals = [float("nan") if v is None else (v if v > 0 else ZERO_FLOOR) for v in s[key]]
        zeros = zeros or any(v is not None and v <= 0 for v in s[key])
        gaps = gaps or any(v is None for v in s[key])
        # A series equal to an earlier one's on most steps is drawn dotted, without markers (the
        # earlier line shows through), and said so in the legend. The edge cases (each one step
        # from the initial model) are points, not joined to the main steps' line.
        main = [float("nan") if i in edge else v for i, v in enumerate(vals)]
        ax.plot(range(len(main)), main, label=n + twins[n], color=COLORS.get(n), lw=1.0,
                marker=None if twins[n] else ".", ms=3, ls=":" if twins[n] else "-")
        # A twin's edge points are drawn where they differ from its twin's (nvidia-prototype's
        # own plan on many_documents), hollow; the others are the twin's and show through.
        other = doc["strategies"][twin[n]][key] if n in twin else None
        xs = sorted(i for i in edge if i < len(vals) and (other is None or s[key][i] != other[i]))
        if xs:
            ax.plot(xs, [vals[i] for i in xs], ls="none", marker="o" if other is not None else ".", ms=5,
                    mfc="none" if other is not None else None, color=COLORS.get(n))
    bounds = doc.get("bounds", {})
    per_step = bounds.get(bound_key + "_per_step")
    bound = bounds.get(bound_key)
    finite = [v for v in per_step if isinstance(v, (int, float))] if isinstance(per_step, list) else []
    if finite and len(set(finite)) > 1:
        # float32: each step has its own bound (2 x that step's float32 drift + floor); None (a
        # diverged reference, JSON has no NaN) is left as a gap
        ax.step(range(len(per_step)), [float("nan") if v is None else v for v in per_step], where="mid",
                color="#c00000", lw=1.2, ls="--", label=f"bound per step (up to {max(finite):.2g})")
    elif isinstance(bound, (int, float)) and bound:
        ax.axhline(bound, color="#c00000", lw=1.2, ls="--", label=f"bound {bound:.2g}")
    mark_edges(ax, doc)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title + (f" (0 drawn at {ZERO_FLOOR:g})" if zeros else "") +
                 (" (gaps: not finite, the run diverged)" if gaps else ""))
    ax.legend(fontsize=8)
    footer(fig, doc)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(os.path.join(out, fname), dpi=120)
    plt.close(fig)


def same_params_view(doc):
    """A float32 report's same-parameter comparison (each step from the float32 reference's
    parameters of that step, converge.h) as a report of its own for plot_diff: each strategy's
    `same_params` series, whose gradient is judged tensor by tensor, each by its own bound, so what
    is drawn is `grad_bound_use` (the largest difference / own bound over the tensors) against 1;
    None when the report has none."""
    strategies = {n: s["same_params"] for n, s in doc["strategies"].items()
                  if not n.startswith("reference") and isinstance(s.get("same_params"), dict)
                  and "losses" in s["same_params"] and isinstance(s["same_params"].get("grad_bound_use"), list)}
    if not strategies:
        return None
    view = dict(doc)
    view["strategies"] = strategies
    view["strategy_order"] = [n for n in (doc.get("strategy_order") or list(doc["strategies"])) if n in strategies]
    view["bounds"] = {"grad_bound_use": 1.0}
    return view


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    doc = load(a.report)
    os.makedirs(a.out, exist_ok=True)
    plot_loss(doc, a.out)
    plot_diff(doc, a.out, "dloss_rel", "loss_rel", "|loss - ref| / ref",
              "Relative loss difference from the reference", "converge_dloss.png")
    plot_diff(doc, a.out, "grad_rel_diff", "grad_rel", "max |g - g_ref| / max |g_ref| (per tensor)",
              "Relative gradient difference from the reference", "converge_grad.png")
    written = ["converge_loss.png", "converge_dloss.png", "converge_grad.png"]
    same = same_params_view(doc)
    if same is not None:
        plot_diff(same, a.out, "grad_bound_use", "grad_bound_use",
                  "difference / that tensor's bound (largest over the tensors)",
                  "Gradient at the float32 reference's parameters: share of each tensor's bound",
                  "converge_grad_same_params.png")
        written.append("converge_grad_same_params.png")
    # (as plot_results.py says it: dcpbench plot passes the line on, naming DIR)
    print(f"plot_converge.py: wrote {len(written)} charts to {a.out}: " + ", ".join(written))


if __name__ == "__main__":
    main()
