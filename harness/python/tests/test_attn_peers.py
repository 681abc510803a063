"""The CUDA attention benchmark's report script (harness/python/bench/attn_peers.py) on a
synthetic benchmark JSON, without PyTorch (--no-peers): what it reads, the ratios it derives, the
reasons it records, the chart, and bad input (exit 2, nothing written). Its PyTorch timing runs
only on the GPU machine (ci/gpu.sh)."""
import importlib.util
import json
import os

from common import SOURCE

spec = importlib.util.spec_from_file_location(
    "attn_peers", os.path.join(SOURCE, "harness", "python", "bench", "attn_peers.py"))
attn_peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(attn_peers)

CASES = [
    {"name": "dense L=512 d=128 causal", "lengths": [512] * 32, "heads": 16, "head_dim": 128, "causal": True,
     "flops_fwd": 1.0e12, "flops_bwd": 2.5e12},
    {"name": "varlen go.txt d=128 causal", "lengths": [9000, 7384], "heads": 16, "head_dim": 128, "causal": True,
     "flops_fwd": 2.0e12, "flops_bwd": 5.0e12},
]


def bench_json(path):
    rows = []
    for kind, tf in (("attn", 300.0), ("cublas", 600.0)):
        for direction, scale in (("fwd", 1.0), ("bwd", 0.8)):
            for c in CASES:
                rows.append({"name": f"{kind}_{direction}/{c['name']}/manual_time", "run_type": "iteration",
                             "TFLOPS": tf * scale, "real_time": 1.0})
    rows.append({"name": "attn_fwd/x/manual_time_mean", "run_type": "aggregate", "TFLOPS": 1.0})
    # The forward with one m16 tile per warp, timed on the varlen case only.
    rows.append({"name": f"tiles1_fwd/{CASES[1]['name']}/manual_time", "run_type": "iteration", "TFLOPS": 150.0,
                 "real_time": 1.0})
    with open(path, "w") as f:
        json.dump({"context": {"gpu": "NVIDIA H100 80GB HBM3", "git_sha": "abc"}, "benchmarks": rows}, f)


def test_report_without_peers(tmp_path):
    cases, bench, out, png = (tmp_path / n for n in ("cases.json", "bench.json", "out.json", "out.png"))
    cases.write_text(json.dumps(CASES))
    bench_json(bench)
    assert attn_peers.main(["--cases", str(cases), "--bench", str(bench), "--out", str(out), "--chart", str(png),
                            "--no-peers"]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "dcpbench.attn_bench.v1"
    assert doc["source"] == "measured:NVIDIA H100 80GB HBM3"
    assert len(doc["rows"]) == 4
    by = {(r["case"], r["direction"]): r for r in doc["rows"]}
    r = by[("varlen go.txt d=128 causal", "bwd")]
    assert r["ours_tflops"] == 240.0 and r["cublas_tflops"] == 480.0
    assert abs(r["ours_over_cublas"] - 0.5) < 1e-12
    assert r["fa2_tflops"] is None and r["ours_over_fa2"] is None and r["fa2_note"] == "--no-peers"
    assert r["tokens"] == 16384 and r["sequences"] == 2
    assert "ours_tiles1_tflops" not in r  # timed for the forward only
    assert by[("varlen go.txt d=128 causal", "fwd")]["ours_tiles1_tflops"] == 150.0
    assert by[("varlen go.txt d=128 causal", "fwd")]["ours_tflops"] == 300.0
    assert "ours_tiles1_tflops" not in by[("dense L=512 d=128 causal", "fwd")]
    assert png.stat().st_size > 0


def test_redraw_from_the_json(tmp_path):
    cases, bench, out, png = (tmp_path / n for n in ("cases.json", "bench.json", "out.json", "re.png"))
    cases.write_text(json.dumps(CASES))
    bench_json(bench)
    assert attn_peers.main(["--cases", str(cases), "--bench", str(bench), "--out", str(out), "--no-peers"]) == 0
    assert attn_peers.main(["--redraw", str(out), "--chart", str(png)]) == 0
    assert png.stat().st_size > 0
    assert attn_peers.main(["--redraw", str(out)]) == 2


def test_repetitions_report_the_median_row(tmp_path):
    rows = [{"name": "attn_fwd/dense L=512 d=128 causal/manual_time", "run_type": "iteration", "TFLOPS": t}
            for t in (100.0, 300.0, 200.0)]
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"context": {}, "benchmarks": rows}))
    got, _ = attn_peers.read_bench(str(path))
    assert got[("attn", "fwd", "dense L=512 d=128 causal")] == 200.0


def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert attn_peers.main(["--cases", str(tmp_path / "missing.json"), "--bench", str(tmp_path / "b.json"),
                            "--out", str(out), "--no-peers"]) == 2
    assert not out.exists()
    assert "missing.json" in capsys.readouterr().err


def test_a_varlen_kernel_error_is_that_rows_reason(monkeypatch):
    # A RuntimeError from PyTorch's varlen entry (a configuration its kernel refuses) is recorded as
    # that case's reason; it had escaped the probe, which caught only TypeError (the signature
    # test), and ended the whole peers script on the device without a report. Stand-in modules:
    # the probe is reached without PyTorch.
    import sys
    import types

    def refuse(*args, **kwargs):
        raise RuntimeError("no kernel for this configuration\nmore detail")

    varlen = types.ModuleType("torch.nn.attention.varlen")
    varlen.varlen_attn = refuse
    for name in ("torch", "torch.nn", "torch.nn.attention"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch.nn.attention.varlen", varlen)
    torch = types.SimpleNamespace(randn=lambda *a, **k: None, tensor=lambda *a, **k: None, bfloat16="bf16",
                                  int32="i32")
    reason = attn_peers.time_varlen(torch, None, CASES[1], "fa2")
    assert reason == "varlen_attn failed here: no kernel for this configuration"
