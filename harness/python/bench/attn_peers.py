#!/usr/bin/python3
"""Our CUDA attention kernels beside PyTorch's FlashAttention-2 and cuDNN backends (issue 9).

    build-gpu/impl/attn/bench_attn_cuda --dump-cases=CASES.json
    build-gpu/impl/attn/bench_attn_cuda --benchmark_out=BENCH.json --benchmark_out_format=json
    python3 harness/python/bench/attn_peers.py --cases CASES.json --bench BENCH.json \
        --out results/bench/attn_h100.json --chart results/bench/attn_h100.png

(ci/gpu.sh runs all three, then --redraw JSON --chart PNG with Debian's python3-matplotlib.) Reads our kernels' and cuBLAS's TFLOPS from the Google Benchmark
JSON of bench_attn_cuda, then, where PyTorch with CUDA is importable on this machine, times
torch.nn.functional.scaled_dot_product_attention on the same cases in the same run with the
FLASH_ATTENTION backend (FlashAttention-2) and the CUDNN_ATTENTION backend: bf16, layout
(batch, heads, L, d), forward alone and backward alone (out.backward with a kept graph), CUDA
events around one call after 3 warm-ups, L2 flushed (a write over twice its size) before each,
the median of --reps repetitions. Varlen packs run through PyTorch's varlen entry where this
PyTorch has one (torch.nn.attention.varlen.varlen_attn, FlashAttention-2), else they are marked
unavailable with the reason. FLOPs: FlashAttention's count, the same the benchmark uses (read from
CASES.json). PyTorch is never a dependency of the build: without it (or --no-peers) the peers'
columns are null and the JSON says why.

Writes one JSON (schema dcpbench.attn_bench.v1): context (GPU, git sha, torch version, timing) and
per (case, direction) our TFLOPS, the cuBLAS GEMM ceiling of the same FLOPs, FlashAttention-2 and
cuDNN TFLOPS and our ratios to them; and a chart (matplotlib) when --chart is given.
"""
import argparse
import json
import os
import sys

SCHEMA = "dcpbench.attn_bench.v1"


def read_bench(path):
    """{(kind, direction, case): TFLOPS} and the context of a Google Benchmark JSON."""
    with open(path) as f:
        j = json.load(f)
    runs = {}
    for b in j.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or "TFLOPS" not in b:
            continue
        head, _, case = b["name"].partition("/")
        case = case.split("/manual_time")[0]
        kind, _, direction = head.partition("_")
        runs.setdefault((kind, direction, case), []).append(float(b["TFLOPS"]))
    # Each row's TFLOPS comes from its median launch; with --benchmark_repetitions, the median row.
    out = {key: sorted(v)[len(v) // 2] for key, v in runs.items()}
    return out, j.get("context", {})


def torch_or_reason():
    try:
        import torch  # noqa: F401
    except Exception as e:  # pragma: no cover - depends on the machine
        return None, f"PyTorch not importable: {e}"
    import torch
    if not torch.cuda.is_available():
        return None, "PyTorch has no CUDA device"
    return torch, None


class Timer:
    """CUDA-event timing of one call after warm-up, L2 flushed before each repetition."""

    def __init__(self, torch, reps):
        self.torch = torch
        self.reps = reps
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush_buf = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")

    def median_s(self, fn):
        torch = self.torch
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(self.reps):
            self.flush_buf.zero_()
            # Keep the GPU busy (~1 ms at ~2 GHz) while Python dispatches the call, so the events
            # time the kernels and not the host's dispatch gap (SDPA's or autograd's Python is
            # tens of microseconds, a sizeable share of the smallest cases; helper-35).
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(2_000_000)
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3)
        times.sort()
        return times[len(times) // 2]


def time_dense(torch, timer, case, backend):
    """(fwd TFLOPS, bwd TFLOPS) of SDPA with one backend on a dense case, or a reason string."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    lengths = case["lengths"]
    if len(set(lengths)) != 1:
        return "dense SDPA needs equal lengths"
    b, L, h, d = len(lengths), lengths[0], case["heads"], case["head_dim"]
    mk = lambda: torch.randn(b, h, L, d, dtype=torch.bfloat16, device="cuda", requires_grad=True)  # noqa: E731
    q, k, v = mk(), mk(), mk()
    g = torch.randn(b, h, L, d, dtype=torch.bfloat16, device="cuda")
    be = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    try:
        with sdpa_kernel([be]):
            fwd = timer.median_s(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"]))
            out = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"])
            bwd = timer.median_s(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
    except RuntimeError as e:
        return f"{backend} unavailable here: {str(e).splitlines()[0]}"
    return case["flops_fwd"] / fwd / 1e12, case["flops_bwd"] / bwd / 1e12


def time_varlen(torch, timer, case, backend):
    """FlashAttention-2 varlen through PyTorch's varlen entry, when this PyTorch has one."""
    if backend != "fa2":
        return "no varlen entry for cuDNN in PyTorch's public API"
    try:
        from torch.nn.attention.varlen import varlen_attn
    except Exception as e:
        return f"torch.nn.attention.varlen.varlen_attn unavailable: {e}"
    lengths = case["lengths"]
    t, h, d = sum(lengths), case["heads"], case["head_dim"]
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    cu = torch.tensor(cu, dtype=torch.int32, device="cuda")
    mk = lambda: torch.randn(t, h, d, dtype=torch.bfloat16, device="cuda", requires_grad=True)  # noqa: E731
    q, k, v = mk(), mk(), mk()
    g = torch.randn(t, h, d, dtype=torch.bfloat16, device="cuda")
    m = max(lengths)
    # PyTorch 2.9 takes is_causal=; later versions a window_size=(left, right) ((-1, 0) = causal).
    forms = ((lambda: varlen_attn(q, k, v, cu, cu, m, m, is_causal=case["causal"])),  # noqa: E731
             (lambda: varlen_attn(q, k, v, cu, cu, m, m,  # noqa: E731
                                  window_size=(-1, 0) if case["causal"] else (-1, -1))))
    call = None
    for form in forms:
        try:
            form()
            call = form
            break
        except TypeError:
            continue
        except RuntimeError as e:  # e.g. a configuration this PyTorch's kernel refuses: this row only
            return f"varlen_attn failed here: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    if call is None:
        return "varlen_attn takes neither is_causal= nor window_size= here"
    try:
        fwd = timer.median_s(call)
        out = call()
        bwd = timer.median_s(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
    except (RuntimeError, TypeError) as e:
        return f"varlen_attn failed: {str(e).splitlines()[0]}"
    return case["flops_fwd"] / fwd / 1e12, case["flops_bwd"] / bwd / 1e12


def build(cases, bench, peers, reasons):
    rows = []
    for c in cases:
        for i, direction in enumerate(("fwd", "bwd")):
            ours = bench.get(("attn", direction, c["name"]))
            row = {"case": c["name"], "direction": direction, "tokens": sum(c["lengths"]),
                   "sequences": len(c["lengths"]), "heads": c["heads"], "head_dim": c["head_dim"],
                   "causal": c["causal"], "ours_tflops": ours,
                   "cublas_tflops": bench.get(("cublas", direction, c["name"]))}
            for backend in ("fa2", "cudnn"):
                got = peers.get((backend, c["name"]))
                val = got[i] if isinstance(got, tuple) else None
                row[f"{backend}_tflops"] = val
                row[f"ours_over_{backend}"] = ours / val if ours and val else None
                if not isinstance(got, tuple):
                    row[f"{backend}_note"] = got if got else reasons.get(backend)
            row["ours_over_cublas"] = ours / row["cublas_tflops"] if ours and row["cublas_tflops"] else None
            # Our forward with one m16 tile per warp (bench_attn_cuda's tiles1_fwd), where timed.
            tiles1 = bench.get(("tiles1", direction, c["name"]))
            if tiles1 is not None:
                row["ours_tiles1_tflops"] = tiles1
            rows.append(row)
    return rows


def chart(rows, context, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keep = [r for r in rows if r["head_dim"] == 128]
    cases = list(dict.fromkeys(r["case"] for r in keep))
    fig, axes = plt.subplots(2, 1, figsize=(max(10, len(cases) * 0.8), 9), sharex=True)
    series = (("ours_tflops", "dcpbench", "#c44e52"), ("fa2_tflops", "FlashAttention-2 (PyTorch)", "#4c72b0"),
              ("cudnn_tflops", "cuDNN (PyTorch)", "#55a868"), ("cublas_tflops", "cuBLAS GEMM, same FLOPs", "#9e9e9e"))
    for ax, direction in zip(axes, ("fwd", "bwd")):
        by = {r["case"]: r for r in keep if r["direction"] == direction}
        w = 0.2
        for k, (key, label, color) in enumerate(series):
            xs = [i + (k - 1.5) * w for i in range(len(cases))]
            ys = [by[c][key] or 0.0 for c in cases]
            ax.bar(xs, ys, w, label=label, color=color)
        ax.set_ylabel(f"{direction} TFLOPS")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    axes[1].set_xticks(range(len(cases)))
    axes[1].set_xticklabels(cases, rotation=60, ha="right", fontsize=7)
    fig.suptitle(f"Attention, head dim 128, bf16, 16k tokens per batch: measured on {context.get('gpu', '?')}")
    fig.text(0.01, 0.005, f"git {context.get('git_sha', '?')[:12]}; {context.get('timing', '')}; "
             "FLOPs: FlashAttention's count; 0 = not available (see the JSON)", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", help="bench_attn_cuda --dump-cases output")
    ap.add_argument("--bench", help="bench_attn_cuda --benchmark_out JSON")
    ap.add_argument("--out", help="JSON to write")
    ap.add_argument("--redraw", help="draw --chart from an existing output JSON (a Python with matplotlib "
                    "when the one with PyTorch has none)")
    ap.add_argument("--chart", help="PNG to write")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-peers", action="store_true", help="do not time PyTorch (columns null)")
    a = ap.parse_args(argv)
    if a.redraw:
        if not a.chart:
            print("attn_peers: --redraw needs --chart", file=sys.stderr)
            return 2
        try:
            with open(a.redraw) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"attn_peers: {e}", file=sys.stderr)
            return 2
        chart(doc["rows"], doc["context"], a.chart)
        return 0
    if not (a.cases and a.bench and a.out):
        print("attn_peers: --cases, --bench and --out are required (or --redraw with --chart)", file=sys.stderr)
        return 2
    if a.reps < 1:
        print(f"attn_peers: --reps {a.reps} must be >= 1", file=sys.stderr)
        return 2
    try:
        with open(a.cases) as f:
            cases = json.load(f)
        bench, context = read_bench(a.bench)
    except (OSError, ValueError) as e:
        print(f"attn_peers: {e}", file=sys.stderr)
        return 2
    peers, reasons = {}, {}
    torch, why = (None, "--no-peers") if a.no_peers else torch_or_reason()
    if torch is None:
        reasons = {"fa2": why, "cudnn": why}
    else:
        timer = Timer(torch, a.reps)
        for c in cases:
            for backend in ("fa2", "cudnn"):
                dense = c["name"].startswith("dense")
                peers[(backend, c["name"])] = (time_dense if dense else time_varlen)(torch, timer, c, backend)
                print(f"{backend:6} {c['name']}: {peers[(backend, c['name'])]}", file=sys.stderr)
        context = dict(context, torch=torch.__version__, torch_cuda=torch.version.cuda,
                       torch_gpu=torch.cuda.get_device_name(0))
    rows = build(cases, bench, peers, reasons)
    doc = {"schema": SCHEMA, "source": f"measured:{context.get('gpu', 'unknown GPU')}",
           "context": context, "rows": rows}
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    if a.chart:
        chart(rows, context, a.chart)
    print(f"{'case':<44} {'dir':>3} {'ours':>7} {'FA2':>7} {'cuDNN':>7} {'cuBLAS':>7} {'/FA2':>6}")
    fmt = lambda x: f"{x:7.1f}" if x else "      -"  # noqa: E731
    for r in rows:
        ratio = f"{r['ours_over_fa2']:6.2f}" if r["ours_over_fa2"] else "     -"
        tiles1 = f"  (1 tile/warp: {r['ours_tiles1_tflops']:.1f})" if r.get("ours_tiles1_tflops") else ""
        print(f"{r['case']:<44} {r['direction']:>3} {fmt(r['ours_tflops'])} {fmt(r['fa2_tflops'])} "
              f"{fmt(r['cudnn_tflops'])} {fmt(r['cublas_tflops'])} {ratio}{tiles1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
