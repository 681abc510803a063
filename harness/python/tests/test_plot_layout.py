"""The layout of the charts of harness/plot/plot_results.py, checked on the drawn figures rather
than by eye: every text (suptitle, footer, axes titles, axis labels, tick labels, legends) lies
inside the figure, the x tick labels of a panel do not overlap each other, and no figure-level text
(suptitle, footer, figure legend) overlaps a panel. Also: published speedups (over packing) are
drawn only beside ours over packing.

The results files are small synthetic ones built here (the shapes that clipped or overlapped: one
scenario, --tune, published TFLOPS of two strategies, a bshd reference, six scenarios with draws),
plus `dcpbench run` of the 4-GPU example when the binary is there (DCPBENCH, common.py).
Needs /usr/bin/python3's matplotlib (Debian's python3-matplotlib); skipped without it.
"""
import importlib.util
import itertools
import json
import os
import subprocess
import sys

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

from common import DCPBENCH, SOURCE  # noqa: E402

spec = importlib.util.spec_from_file_location("plot_results",
                                              os.path.join(SOURCE, "harness", "plot", "plot_results.py"))
plot_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_results)

ALL = ["bshd", "packing", "megatron-pr2000", "megatron-dev", "nvidia-prototype", "dcp"]
SOURCE_TAG = "simulated:dcp-cost-v2@h100-sxm-public"
PUBLISHED_4GPU = {"source": "Megatron-LM README (test)", "statistic": "trimmed_mean_10",
                  "values": [{"strategy": "packing", "step_time_ms": 195.3},
                             {"strategy": "megatron-dev", "step_time_ms": 151.9, "speedup_vs_packing": 1.285}]}
PUBLISHED_13B = {"source": "NVIDIA blog (test)", "statistic": "mean",
                 "values": [{"strategy": "packing", "tflops_per_gpu": 195.88},
                            {"strategy": "nvidia-prototype", "tflops_per_gpu": 289.32, "speedup_vs_packing": 1.477}]}


def results(scenarios, strategies=ALL, tuned=False, reference="packing", published=None, draws=False):
    """A minimal dcpbench.results.v1 document: step-0 rows (rank busy times and a plan) and the
    aggregates the charts draw, as harness/aggregate.cpp writes them."""
    rows, aggs, scs, dr = [], [], [], []
    settings = ("published", "tuned") if tuned else ("published",)
    for n, sc in enumerate(scenarios):
        scs.append({"name": sc, "reference_strategy": reference, **({"published": published} if published else {})})
        times = {s: 1.0 + 0.3 * ((i * 7 + n) % 5) + (30.0 if s == "bshd" else 0) for i, s in enumerate(strategies)}
        entry = {"scenario": sc, "strategies": {}, "tuned": {"strategies": {}} if tuned else None}
        for setting in settings:
            for s in strategies:
                t = times[s] * (0.8 if setting == "tuned" else 1.0)
                ref = times[reference] * (0.8 if setting == "tuned" else 1.0)
                aggs.append({"scenario": sc, "strategy": s, "setting": setting, "reference": reference, "steps": 1,
                             "invalid_steps": 0, "oom_steps": 0, "valid": True, "source": SOURCE_TAG,
                             "step_time_s": t, "tflops_per_gpu": 300.0 / t, "tokens_per_s_per_gpu": 1e4 / t,
                             # (trimmed unlike plain, so a chart drawing the wrong one is seen)
                             "speedup_vs_reference": ref / t, "trimmed_speedup_vs_reference": 1.1 * ref / t,
                             "compute_s": 0.6 * t, "comm_s": 0.1 * t, "overhead_s": 0.1 * t, "bubble_s": 0.1 * t,
                             "imbalance_s": 0.1 * t})
                (entry["strategies"] if setting == "published" else entry["tuned"]["strategies"])[s] = {
                    "speedup": {"p5": 0.95 * ref / t, "p95": 1.05 * ref / t},
                    "trimmed_speedup": {"p5": 1.1 * 0.95 * ref / t, "p95": 1.1 * 1.05 * ref / t}}
                if n > 0:  # step-0 rows (rank busy, plan charts) of the first scenario only: quicker
                    continue
                rows.append({"scenario": sc, "strategy": s, "setting": setting, "reference": reference, "step": 0,
                             "source": SOURCE_TAG, "plan_valid": True, "oom": False, "step_time_s": t,
                             "rank_busy_s": [0.5 * t, 0.7 * t, 0.9 * t, 0.6 * t],
                             "plan": [[[0, 2, 1, 4096], [2, 1, 2, 2048], [3, 1, 1, 1024]], [[0, 4, 1, 8192]]]})
        dr.append(entry)
    doc = {"schema": "dcpbench.results.v1", "context": {"git_sha": "0123456789abcdef-dirty", "date": "2026-01-01"},
           "scenarios": scs, "rows": rows, "aggregates": aggs}
    if draws:
        doc["draws"] = {"draws": 20, "scenarios": dr}
    return doc


def inside(box, fig_box, tol=1.0):
    return (box.x0 >= fig_box.x0 - tol and box.y0 >= fig_box.y0 - tol and box.x1 <= fig_box.x1 + tol
            and box.y1 <= fig_box.y1 + tol)


def overlap(a, b, tol=0.5):
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def shown_ticklabels(ax, axis):
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t for loc, t in zip(ticks, labels) if lo - 1e-9 <= loc <= hi + 1e-9 and t.get_visible() and t.get_text()]


def layout_problems(fig, name):
    """What is clipped or overlapping in `fig`, drawn as the script left it."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    fb = fig.bbox
    bad = []

    def check_inside(what, artist):
        if artist is None or not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            return
        box = artist.get_window_extent(r)
        if not inside(box, fb):
            label = artist.get_text() if hasattr(artist, "get_text") else type(artist).__name__
            bad.append(f"{name}: {what} {label[:50]!r} at {box.extents.round(1)} outside the figure {fb.extents}")

    fig_texts = [t for t in fig.texts if t.get_visible() and t.get_text()]
    if fig._suptitle is not None and fig._suptitle.get_text() and fig._suptitle not in fig_texts:
        fig_texts.append(fig._suptitle)  # (matplotlib 3.6 lists it in fig.texts too)
    for t in fig_texts:
        check_inside("figure text", t)
    for leg in fig.legends:
        check_inside("figure legend", leg)
    panels = [ax for ax in fig.axes if ax.axison]
    for ax in panels:
        for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            check_inside("axes text", t)
        for t in shown_ticklabels(ax, "x") + shown_ticklabels(ax, "y"):
            check_inside("tick label", t)
        for t in ax.texts:
            check_inside("annotation", t)
            # A value label stays inside its panel (above the highest bar there is room for it).
            if t.get_visible() and t.get_text() and t.get_transform() == ax.transData and \
                    not inside(t.get_window_extent(r), ax.get_window_extent(r)):
                bad.append(f"{name}: annotation {t.get_text()[:30]!r} runs out of its panel {ax.get_title()[:40]!r}")
        shown = [t for t in ax.texts if t.get_visible() and t.get_text()]
        for a, b in itertools.combinations(shown, 2):
            if overlap(a.get_window_extent(r), b.get_window_extent(r)):
                bad.append(f"{name}: annotations {a.get_text()[:30]!r} and {b.get_text()[:30]!r} overlap")
                break
        if ax.get_legend() is not None:
            check_inside("legend", ax.get_legend())
            # A legend must not hide data: no bar of its panel under it, nor its panel's title
            # (rank_busy's sits in the title row, right of the title).
            lb = ax.get_legend().get_window_extent(r)
            if ax.get_title() and overlap(lb, ax.title.get_window_extent(r)):
                bad.append(f"{name}: the legend of {ax.get_title()[:40]!r} covers its title")
            for p in ax.patches:
                if p.get_visible() and p.get_height() > 0 and overlap(lb, p.get_window_extent(r)):
                    bad.append(f"{name}: the legend of {ax.get_title()[:40]!r} covers a bar")
                    break
        xl = shown_ticklabels(ax, "x")
        for a, b in itertools.combinations(xl, 2):
            if overlap(a.get_window_extent(r), b.get_window_extent(r)):
                bad.append(f"{name}: x tick labels {a.get_text()!r} and {b.get_text()!r} overlap")
    # Figure-level texts against the panels (title, labels, tick labels, legend), and panels
    # against each other.
    boxes = [(ax, ax.get_tightbbox(r)) for ax in panels]
    for t in fig_texts + list(fig.legends):
        tb = t.get_window_extent(r)
        for ax, ab in boxes:
            if overlap(tb, ab):
                what = t.get_text()[:50] if hasattr(t, "get_text") else "figure legend"
                bad.append(f"{name}: {what!r} overlaps the panel {ax.get_title()!r}")
    for a, b in itertools.combinations(fig_texts + list(fig.legends), 2):
        if overlap(a.get_window_extent(r), b.get_window_extent(r)):
            bad.append(f"{name}: figure-level texts/legends {getattr(a, 'get_text', str)()[:40]!r} and "
                       f"{getattr(b, 'get_text', str)()[:40]!r} overlap")
    for (a, ab), (b, bb) in itertools.combinations(boxes, 2):
        if overlap(ab, bb):
            bad.append(f"{name}: panels {a.get_title()!r} and {b.get_title()!r} overlap")
    return bad


def draw_all(tmp_path, monkeypatch, doc_or_path):
    """Runs the script's main() on a results file; returns (layout problems, {chart: facts})."""
    if isinstance(doc_or_path, dict):
        path = tmp_path / "results.json"
        path.write_text(json.dumps(doc_or_path))
    else:
        path = doc_or_path
    problems, facts = [], {}
    original = Figure.savefig

    def savefig(fig, fname, *a, **kw):
        name = os.path.basename(str(fname))
        # A chart must fit as drawn: bbox_inches="tight" would grow the PNG around what it clips here.
        assert kw.get("bbox_inches") is None, f"{name}: saved with bbox_inches"
        problems.extend(layout_problems(fig, name))
        facts[name] = {
            "hatches": [p.get_hatch() for ax in fig.axes for p in ax.patches],
            "bars": [(p.get_hatch(), p.get_height()) for ax in fig.axes for p in ax.patches],
            "whisker_tops": [max(seg[:, 1]) for ax in fig.axes for c in ax.collections
                             for seg in getattr(c, "get_segments", lambda: [])() if len(seg) and seg[0][0] == seg[-1][0]],
            "texts": [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts],
            "title": (fig._suptitle.get_text() if fig._suptitle is not None else "") +
                     " ".join(ax.get_title() for ax in fig.axes),
        }
        return original(fig, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", savefig)
    monkeypatch.setattr(sys, "argv", ["plot_results.py", str(path), "--out", str(tmp_path / "charts")])
    plot_results.main()
    assert {"tflops.png", "speedup.png", "breakdown.png"} <= set(facts)
    return problems, facts


def with_oom(doc):
    """The first scenario's dcp (as published) out of memory, as aggregate.cpp writes it."""
    for a in doc["aggregates"]:
        if a["strategy"] == "dcp" and a["setting"] == "published":
            for k in list(a):
                if k.endswith("_s") or k.endswith("_reference") or k in ("tflops_per_gpu", "tokens_per_s_per_gpu"):
                    del a[k]
            a.update(valid=False, oom_steps=1, error="out of memory")
            break
    return doc


SYNTHETIC = {
    "one-scenario": results(["megatron-example-4gpu"], published=PUBLISHED_4GPU),
    "one-scenario-long-name": results(["mix-web-code-prose-llama3-8b-with-a-long-suffix"], published=PUBLISHED_4GPU),
    "tuned": results(["megatron-example-4gpu"], tuned=True, published=PUBLISHED_4GPU),
    "tuned-published-tflops": results(["llama13b-github"], tuned=True, published=PUBLISHED_13B),
    "bshd-reference": results(["megatron-example-4gpu-bshdref"], reference="bshd", published=PUBLISHED_4GPU),
    "bshd-reference-tuned": results(["megatron-example-4gpu-bshdref"], tuned=True, reference="bshd",
                                    published=PUBLISHED_13B),
    "two-strategies": results(["megatron-example-4gpu"], strategies=["packing", "dcp"]),
    "six-scenarios-draws": results(["code-go-llama3-8b", "email-spamassassin-llama3-8b", "llama13b-lognormal16k",
                                    "mix-web-code-prose-llama3-8b", "prose-pydoc-llama3-8b", "prose-sotu-llama3-8b"],
                                   tuned=True, published=PUBLISHED_13B, draws=True),
    "ten-scenarios-oom": with_oom(results([f"llama3-8b-dataset-number-{i}" for i in range(10)],
                                          published=PUBLISHED_4GPU)),
}


@pytest.mark.parametrize("case", sorted(SYNTHETIC))
def test_no_text_clipped_or_overlapping(tmp_path, monkeypatch, case):
    problems, _ = draw_all(tmp_path, monkeypatch, SYNTHETIC[case])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("args", [[], ["--tune"]], ids=["published", "tuned"])
def test_charts_of_a_dcpbench_run(tmp_path, monkeypatch, args):
    if not os.access(DCPBENCH, os.X_OK):
        pytest.skip(f"no dcpbench binary at {DCPBENCH}")
    path = tmp_path / "run.json"
    r = subprocess.run([DCPBENCH, "run", os.path.join(SOURCE, "scenarios", "megatron-example-4gpu.json"), "--steps",
                        "1", "--quiet", "--out", str(path)] + args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    problems, _ = draw_all(tmp_path, monkeypatch, path)
    assert not problems, "\n".join(problems)


def test_charts_of_the_committed_demo(tmp_path, monkeypatch):
    """The charts a reviewer sees: results/demo.json as committed (nine scenarios, tuned, draws)."""
    path = os.path.join(SOURCE, "results", "demo.json")
    if not os.path.exists(path):
        pytest.skip(f"no {path}")
    problems, _ = draw_all(tmp_path, monkeypatch, path)
    assert not problems, "\n".join(problems)


def test_published_speedups_only_beside_ours_over_packing(tmp_path, monkeypatch):
    # Over packing: the published speedup (Megatron's, over their packing) is drawn, hatched //.
    _, facts = draw_all(tmp_path, monkeypatch, SYNTHETIC["one-scenario"])
    assert facts["speedup.png"]["hatches"].count("//") == 1
    # Over bshd: ours are over bshd, theirs over packing; no published bar, and a note says why.
    (tmp_path / "b").mkdir()
    _, facts = draw_all(tmp_path / "b", monkeypatch, SYNTHETIC["bshd-reference"])
    sp = facts["speedup.png"]
    assert "Speedup over bshd" in sp["title"]
    assert "//" not in sp["hatches"]
    assert any("published" in t.lower() and "packing" in t for t in sp["texts"]), sp["texts"]


def test_a_reference_out_of_memory_is_said_not_left_blank(tmp_path, monkeypatch):
    # Every row of the reference out of memory: no speedup exists; the chart says so in its note and
    # in the axes instead of an empty legend box (helper-73's trial).
    doc = results(["sc"])
    for a in doc["aggregates"]:
        if a["strategy"] == "packing":
            for k in [k for k in a if k.endswith("_s") or k.endswith("_reference") or k.startswith("tflops")
                      or k.startswith("tokens")]:
                del a[k]
            a.update(valid=False, oom_steps=1, error="out of memory")
        else:
            a.pop("speedup_vs_reference", None)
            a.pop("trimmed_speedup_vs_reference", None)
    problems, facts = draw_all(tmp_path, monkeypatch, doc)
    assert not problems, "\n".join(problems)
    texts = " ".join(" ".join(t.split()) for t in facts["speedup.png"]["texts"])
    assert "no speedup to draw" in texts, texts
    assert "No speedups for sc: the reference (packing) does not fit the GPU" in texts, texts
    # With the reference fitting, neither is said.
    (tmp_path / "ok").mkdir()
    _, facts = draw_all(tmp_path / "ok", monkeypatch, results(["sc"]))
    assert not any("No speedups" in t or "no speedup to draw" in t for t in facts["speedup.png"]["texts"])


@pytest.mark.parametrize("published,factor", [("4gpu", 1.1), ("13b", 1.0)], ids=["trimmed", "mean"])
def test_speedups_use_the_published_statistic(tmp_path, monkeypatch, published, factor):
    # Megatron's example publishes 10%-trimmed means: ours beside it are drawn trimmed, bars and
    # whiskers (the fixture's trimmed values are 1.1 x the plain ones); NVIDIA's are plain means.
    pub = PUBLISHED_4GPU if published == "4gpu" else PUBLISHED_13B
    doc = results(["sc"], tuned=True, published=pub, draws=True)
    _, facts = draw_all(tmp_path, monkeypatch, doc)
    sp = facts["speedup.png"]
    ours = sorted(round(h, 9) for hatch, h in sp["bars"] if hatch != "//")
    want = sorted(round(factor * a["speedup_vs_reference"], 9) for a in doc["aggregates"]
                  if a["strategy"] != "packing")
    assert ours == want
    tops = sorted(round(t, 9) for t in sp["whisker_tops"])
    want_tops = sorted(round(factor * 1.05 * a["speedup_vs_reference"], 9) for a in doc["aggregates"]
                       if a["strategy"] != "packing")
    assert tops == want_tops
    title = " ".join(sp["title"].split())  # (wrapped to the figure's width)
    assert ("10%-trimmed" in title) == (published == "4gpu"), title
    assert "over the reference tuned" in title
    # Without --tune rows the title says nothing of tuned bars.
    (tmp_path / "n").mkdir()
    _, facts = draw_all(tmp_path / "n", monkeypatch, results(["sc"], published=pub))
    assert "tuned" not in facts["speedup.png"]["title"], facts["speedup.png"]["title"]
