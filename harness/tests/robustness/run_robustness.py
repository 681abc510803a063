#!/usr/bin/env python3
"""The `robustness` CTest (issue 11): runs the dcpbench CLI on a corpus of bad inputs and checks
the contract "bad input: exit 2, one line on stderr naming the bad value, nothing written".

For every case: exit code 2 (unless the case says otherwise), stdout empty, stderr exactly one
line "dcpbench: error: ..." of at most 317 characters (the 300 of core/text.h one_line plus the
prefix) with no control byte, the expected fragments in it (so the right check fired, not a
later out-of-memory), within the time limit, and the work folder unchanged: no file created,
none replaced or modified (lstat of every entry: type, inode, size, mtime), including the
FIFO, symlink, folder and (as root) character device that --out points at.

Usage: run_robustness.py DCPBENCH REPO_ROOT [-k SUBSTRING]
The inputs are generated here (deep JSON, binary bytes from a seeded RNG, ...) in a temporary
folder; nothing in the source tree is written. Cases are grouped by the class of bug they guard.
"""
import json
import os
import random
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time

MAX_LINE = 300 + len("dcpbench: error: ")
TIMEOUT_S = 60  # every refusal is a check before the work; a case near this is a regression
MEM_LIMIT = 6 << 30  # address space of the child: a regression fails here instead of eating the machine


def snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


class Runner:
    def __init__(self, exe, repo, work):
        self.exe, self.repo, self.work = exe, repo, work
        self.failures, self.count = [], 0

    def case(self, name, args, expect=(), rc=2, stdout_ok=False, timeout=TIMEOUT_S, stdout_file=None):
        self.count += 1
        before = snapshot(self.work)
        t0 = time.monotonic()
        try:
            out = open(stdout_file, "wb") if stdout_file else subprocess.PIPE
            p = subprocess.run([self.exe] + args, cwd=self.work, stdout=out, stderr=subprocess.PIPE, timeout=timeout,
                               preexec_fn=limit_memory)
            if stdout_file:
                out.close()
                p.stdout = b""
        except subprocess.TimeoutExpired:
            self.failures.append(f"{name}: still running after {timeout} s")
            return
        secs = time.monotonic() - t0
        problems = []
        if p.returncode != rc:
            problems.append(f"exit {p.returncode}, expected {rc}")
        err = p.stderr
        if rc == 2:
            if not stdout_ok and p.stdout:
                problems.append(f"stdout not empty: {p.stdout[:120]!r}")
            if err.count(b"\n") != 1 or not err.endswith(b"\n"):
                problems.append(f"stderr is {err.count(chr(10).encode())} lines: {err[:400]!r}")
            line = err.rstrip(b"\n")
            if not line.startswith(b"dcpbench: error: "):
                problems.append(f"stderr does not start with 'dcpbench: error: ': {line[:200]!r}")
            if any(b < 0x20 or b == 0x7F for b in line):
                problems.append(f"control byte in the message: {line[:400]!r}")
            text = line.decode("utf-8", errors="replace")
            if len(text) > MAX_LINE:
                problems.append(f"message is {len(text)} characters (> {MAX_LINE})")
            for frag in expect:
                if frag not in text:
                    problems.append(f"message lacks {frag!r}: {text!r}")
        after = snapshot(self.work)
        if after != before:
            added = sorted(set(after) - set(before))
            removed = sorted(set(before) - set(after))
            changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])
            problems.append(f"work folder changed: added {added[:5]}, removed {removed[:5]}, changed {changed[:5]}")
        status = "ok  " if not problems else "FAIL"
        shown = err.decode("utf-8", errors="replace").rstrip("\n")[:160] if rc == 2 else f"exit {p.returncode}"
        print(f"{status} {name} ({secs:.2f} s): {shown}")
        if problems:
            self.failures.append(f"{name}: " + "; ".join(problems))


def write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def main():
    # The CLI's refusals must not depend on the machine: no GPU is visible to the cases (the
    # --measure and calibrate cases expect the no-device refusal).
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    exe, repo = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv else None
    rng = random.Random(11)
    work = tempfile.mkdtemp(prefix="dcp_robust_")
    try:
        w = lambda *p: os.path.join(work, *p)
        # ---- inputs -------------------------------------------------------------------------
        deep = "[" * 70000 + "]" * 70000
        write(w("deep.json"), deep)
        write(w("go.txt"), open(os.path.join(repo, "scenarios/data/go.txt")).read())
        # A small valid scenario (scenarios/SCHEMA.md), written here so the committed scenarios can
        # change without changing what these cases test.
        base = {"name": "robust", "model": "megatron-dcp-bench",
                "dataset": {"source": "lognormal", "mean": 1024, "sigma": 1.5, "min": 128, "max": 8192,
                            "pad_multiple": 8},
                "cluster": {"gpus": 4, "cp": 4, "gpus_per_node": 4},
                "training": {"global_batch": 64, "max_seqlen": 8192, "max_seqlen_per_rank": 2048, "steps": 1,
                             "seed": 7},
                "strategies": ["packing", "bshd", "megatron-dev", "dcp"]}

        def scenario(fname, edit=None, text=None):
            s = json.loads(json.dumps(base))
            if edit:
                edit(s)
            write(w(fname), text if text is not None else json.dumps(s))

        scenario("ok.json")
        scenario("ds-deep.json", lambda s: s.__setitem__("dataset", {"source": "file", "path": "deep.json"}))
        scenario("unknown-deep.json", text=json.dumps(base)[:-1] + ', "extra": ' + deep + "}")
        mix = '{"source":"mixture","components":[' + '{"share":1,"source":"mixture","components":[' * 20000
        mix += '{"share":1,"source":"lognormal","mean":100,"sigma":1}' + "]}" * 20000 + "]}"
        no_ds = json.loads(json.dumps(base))
        no_ds.pop("dataset")
        scenario("mix-deep.json", text=json.dumps(no_ds)[:-1] + ', "dataset": ' + mix + "}")

        def nest(levels):
            m = {"source": "lognormal", "mean": 100, "sigma": 1}
            for _ in range(levels):
                m = {"source": "mixture", "components": [dict(m, share=1)]}
            return m
        scenario("mix-9.json", lambda s: s.__setitem__("dataset", nest(9)))
        scenario("gb-1e7.json", lambda s: s["training"].__setitem__("global_batch", 10**7))
        mock = {"source": "megatron-mock", "mean": 1024, "sigma": 1.5, "min": 128, "max": 8192,
                "train_samples": 640, "skip_steps": 2, "shift": 1, "pad_multiple": 8}
        scenario("mock-draws.json", lambda s: s.__setitem__("dataset", mock))
        scenario("mock-pool.json", lambda s: s.__setitem__("dataset", dict(mock, size=2**25, train_samples=2**25)))
        scenario("mock-mix.json", lambda s: s.__setitem__("dataset", {"source": "mixture", "components": [dict(mock, share=1)]}))
        scenario("gb-max.json", lambda s: s["training"].__setitem__("global_batch", 2**18))
        scenario("pool-2p20.json", lambda s: (s.__setitem__("cluster", {"gpus": 2**20, "cp": 2**20}),
                                              s["training"].__setitem__("global_batch", 1024)))
        scenario("pp-vpp.json", lambda s: (s.__setitem__("cluster", {"gpus": 1024, "pp": 1024, "vpp": 1024}),
                                           s["training"].update(global_batch=4096, max_seqlen_per_rank=8192)))
        scenario("gb-2p63.json", text=json.dumps(base).replace('"global_batch": 64', '"global_batch": 9223372036854775808'))
        scenario("seed-2p64.json", text=json.dumps(base).replace('"seed": 7', '"seed": 18446744073709551615'))
        scenario("gpus-float.json", lambda s: s["cluster"].__setitem__("gpus", 4.5))
        scenario("key-twice.json", text=json.dumps(base).replace('"name": ', '"name": "first", "name": ', 1))
        scenario("name-long.json", lambda s: s.__setitem__("name", "a" * 101))
        scenario("pp-over-layers.json", lambda s: s["cluster"].update(gpus=96, pp=24))  # 12 layers
        scenario("tp-3.json", lambda s: (s["cluster"].update(gpus=12, tp=3, gpus_per_node=12),  # 16 heads
                                         s["training"].__setitem__("sequence_parallel", True)))
        scenario("tp-2.json", lambda s: s["cluster"].update(gpus=8, tp=2))  # a valid layout, without SP
        scenario("tp-8-nodes.json", lambda s: (s["cluster"].update(gpus=32, tp=8),  # nodes of 4 GPUs
                                               s["training"].__setitem__("sequence_parallel", True)))
        scenario("maxlen-unpadded.json", lambda s: s["training"].update(max_seqlen=8188, max_seqlen_per_rank=2047))
        scenario("cal-deep.json", lambda s: s.__setitem__("calibration", "deep.json"))
        scenario("name-ctrl.json", lambda s: s.__setitem__("name", "bad\x1b[31mname\n"))
        scenario("strategy-long.json", lambda s: s.__setitem__("strategies", ["packing", "x" * 100000]))

        def huge_doc(s):
            s["dataset"] = {"source": "file", "path": "huge-doc.txt"}
            s["training"].update(max_seqlen=1, max_seqlen_per_rank=1)
        write(w("huge-doc.txt"), "1000000000000\n")
        scenario("huge-doc.json", huge_doc)
        write(w("big-lengths.txt"), "5\n" * 300000)
        write(w("binary.bin"), b"\x7fELF" + bytes(rng.randrange(256) for _ in range(4096)) + b"\0")
        write(w("high-bytes.txt"), "12\n".encode() + bytes(rng.randrange(128, 256) for _ in range(2000)) + b"\n")
        write(w("garbage-line.txt"), "12\n" + "9" * 1000000 + "x\n")
        write(w("text.idx"), "100\n200\n")
        write(w("bad.py"), "raise ValueError('boom\\nsecond line')\n")
        write(w("esc\x1b[31m\nname.txt"), "abc\n")
        write(w("tall.txt"), "3000000\n")  # needs a bigger pool than --dp 1 --cp 1 gives
        write(w("len-2p41.txt"), f"{2**41}\n")  # over README's 2^40 tokens per sample, within a pool's reach
        write(w("five.txt"), "5\n")
        plan_v1 = {"schema": "dcpbench.plan.v1", "planner": "hand", "dp": 1, "cp": 1, "max_seqlen_per_rank": 10,
                   "microbatches": [{"groups": [{"ranks": [0], "cp_size": 1, "samples": [0]}]}]}
        write(w("plan-v9.json"), json.dumps(dict(plan_v1, schema="dcpbench.plan.v9")))
        write(w("plan-no-planner.json"), json.dumps({"microbatches": []}))
        write(w("plan-2p41.json"), json.dumps(dict(plan_v1, cp=2, max_seqlen_per_rank=2**40, microbatches=[
            {"groups": [{"ranks": [0, 1], "cp_size": 2, "samples": [0]}]}])))
        os.mkdir(w("cases-array"))
        write(w("cases-array", "arr.json"), "[1, 2]")
        results = json.load(open(os.path.join(repo, "harness/fuzz/corpus_results/detail.json")))
        write(w("results.json"), json.dumps(results))
        r = json.loads(json.dumps(results))
        r["rows"][0]["step"] = 2**63
        write(w("step-2p63.json"), json.dumps(r))
        r = json.loads(json.dumps(results))
        r["rows"][0]["tokens"] = 1e300
        write(w("tokens-1e300.json"), json.dumps(r))
        r = json.loads(json.dumps(results))
        r["scenarios"][0]["gpus"] = "many"
        write(w("facts-type.json"), json.dumps(r))
        r = json.loads(json.dumps(results))
        r["rows"][0]["rank_busy_s"] = [1.0]  # the pool has 4 ranks (helper-20: drawn as one)
        write(w("busy-short.json"), json.dumps(r))
        r = json.loads(json.dumps(results))
        r["rows"][0]["plan"] = [[[0, 400, 8, 2184]]]
        write(w("plan-group-outside.json"), json.dumps(r))
        # Output targets that must never be replaced.
        write(w("existing.json"), "keep me\n")
        os.symlink("existing.json", w("link.json"))
        os.mkdir(w("folder"))
        os.mkdir(w("charts"))
        os.symlink("../existing.json", w("charts", "tflops.png"))
        os.mkfifo(w("fifo"))
        cal = {"schema": "dcpbench.calibration.v1", "name": "robust", "profile": "h100-sxm", "obtained": "synthetic",
               "gpus_per_node": 2**40}
        write(w("cal-2p40.json"), json.dumps(cal))
        scenario("cal-2p40-scenario.json", lambda s: s.__setitem__("calibration", "cal-2p40.json"))
        # A rate of 0 read as "free" (a faster step), a time of 1e300 printed with 300 digits (helper-20).
        write(w("cal-hbm-0.json"), json.dumps(dict(cal, gpus_per_node=8, hbm_bytes_per_s=0)))
        scenario("cal-hbm-0-scenario.json", lambda s: s.__setitem__("calibration", "cal-hbm-0.json"))
        write(w("cal-1e300.json"), json.dumps(dict(cal, gpus_per_node=8, iteration_overhead_s=1e300)))
        scenario("cal-1e300-scenario.json", lambda s: s.__setitem__("calibration", "cal-1e300.json"))
        # Convergence reports whose charted fields plot_converge.py cannot draw: refused before it runs.
        conv_report = json.load(open(os.path.join(repo, "results/converge-moby.json")))
        for name, mutate in [("step-kinds-int", lambda r: r.__setitem__("step_kinds", 5)),
                             ("dloss-strings", lambda r: r["strategies"]["dcp"].__setitem__(
                                 "dloss_rel", ["x"] * r["steps"])),
                             ("order-unknown", lambda r: r.__setitem__("strategy_order", ["foo"])),
                             ("bounds-list", lambda r: r.__setitem__("bounds", [1]))]:
            r = json.loads(json.dumps(conv_report))
            mutate(r)
            write(w(f"conv-{name}.json"), json.dumps(r))
        write(w("draws-nothing.py"), "print('hello')\n")
        targets = {"link.json": "is a symbolic link", "folder": "is a directory", "fifo": "is a FIFO",
                   "": "empty path", "missing/x.json": "does not exist", "folder/": "names a folder"}
        if os.geteuid() == 0:
            os.mknod(w("chardev"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null
            targets["chardev"] = "is a character device"

        R = Runner(exe, repo, work)
        case = R.case if only is None else (lambda n, *a, **k: R.case(n, *a, **k) if only in n else None)
        sched = ["schedule", "--planner", "dcp", "--dp", "1", "--cp", "8", "--max-seqlen-per-rank", "3000000"]

        # ---- 1. JSON nested deeply: refused while parsing, before anything recurses --------------
        for cmd, args in [("schedule", ["schedule", "--lengths", "deep.json", "--planner", "dcp", "--dp", "1",
                                        "--cp", "1", "--max-seqlen-per-rank", "10"]),
                          ("run", ["run", "deep.json", "--out", "r.json"]), ("table", ["table", "deep.json"]),
                          ("gate", ["gate", "--baseline", "deep.json", "--current", "results.json"]),
                          ("plot", ["plot", "deep.json", "--out", "charts-new"])]:
            case(f"json-depth/{cmd}", args, ["nested deeper than the limit of 64 levels"])
        case("json-depth/check", ["check", "--plan", "deep.json", "--lengths", "go.txt"], ["nested deeper than the limit"])
        case("json-depth/scenario-dataset-file", ["run", "ds-deep.json", "--out", "r.json"],
             ["ds-deep.json", "dataset.path", "nested deeper than the limit of 64"])
        case("json-depth/scenario-unknown-key", ["run", "unknown-deep.json", "--out", "r.json"], ["nested deeper"])
        case("json-depth/scenario-calibration", ["run", "cal-deep.json", "--out", "r.json"], ["nested deeper"])
        # ---- 2. scenario nesting ------------------------------------------------------------------
        case("scenario-depth/mixture-20000", ["run", "mix-deep.json", "--out", "r.json"], ["nested deeper"])
        case("scenario-depth/mixture-9", ["run", "mix-9.json", "--out", "r.json"],
             ["nests mixtures deeper than the limit of 8 levels"])
        # ---- 3. output policy: every command with --out, every kind of target ---------------------
        for target, says in targets.items():
            case(f"out/schedule/{target or 'empty'}", ["schedule", "--lengths", "go.txt"] + sched[1:] + ["--out", target], [says])
            case(f"out/run/{target or 'empty'}", ["run", "ok.json", "--out", target], [says])
        for target, says in targets.items():
            case(f"out/conform/{target or 'empty'}", ["conform", "--planner", "packing", "--out", target], [says])
            case(f"out/converge/{target or 'empty'}", ["converge", "--scenario",
                                                        os.path.join(repo, "scenarios/converge-short.json"),
                                                        "--out", target], [says])
        # A folder access(2) calls writable that takes no file: as root, a pseudo file system. The
        # probe after the other checks refuses it before the work (stop 45: converge trained 33 s,
        # conform ran every case first).
        if os.geteuid() == 0 and os.path.isdir("/proc") and os.access("/proc", os.W_OK):
            for cmd, args in [("converge", ["converge", "--scenario", os.path.join(repo, "scenarios/converge-short.json")]),
                              ("conform", ["conform", "--planner", "dcp"]), ("run", ["run", "ok.json"]),
                              ("schedule", ["schedule", "--lengths", "go.txt"] + sched[1:]),
                              ("evaluate", ["evaluate", "results.json", "--focus", "packing"])]:
                case(f"out/{cmd}/pseudo-file-system", args + ["--out", "/proc/dcpbench-out.json"],
                     ["cannot create a file in its folder \"/proc\""], timeout=10)
        # Bad input after the --out checks leaves --out's folder as it was, its modification time
        # included (the snapshot compares it): the probe file is made after every input check.
        os.mkdir(w("outdir"))
        case("out/probe-after-input/share", ["share", "ok.json", "--strategy", "nope", "--out", "outdir/s.json"],
             ['--strategy "nope"'])
        case("out/probe-after-input/schedule", ["schedule", "--lengths", "go.txt", "--planner", "packing", "--dp", "1",
                                                "--cp", "8", "--max-seqlen-per-rank", "3000000", "--min-cp", "2",
                                                "--out", "outdir/p.json"], ["--min-cp 2: planner 'packing' is static"])
        # refused inside the planner: the probe comes after the plan (stop 46 probed before it)
        case("out/probe-after-input/schedule-sample-too-long", ["schedule", "--lengths", "go.txt", "--planner", "dcp",
                                                                "--dp", "1", "--cp", "2", "--max-seqlen-per-rank", "64",
                                                                "--out", "outdir/p.json"], ["which needs CP size"])
        # and a plan whose JSON dcpbench could not read back (~71 MiB: 768 one-sample micro-batches
        # listing 8192 ranks each; ~3 s, ~0.3 GB)
        write(w("long-samples.txt"), "16384\n" * 768)
        case("out/probe-after-input/schedule-plan-too-large", ["schedule", "--lengths", "long-samples.txt", "--planner",
                                                               "bshd", "--dp", "1", "--cp", "8192",
                                                               "--max-seqlen-per-rank", "2", "--out", "outdir/p.json"],
             ["the JSON would be", "above the limit of 64 MiB"])
        case("out/probe-after-input/evaluate", ["evaluate", "results.json", "--out", "outdir/e.md"],
             ['has no rows of "dcp"'])
        case("out/probe-after-input/run-strategies", ["run", "ok.json", "--strategies", "nope", "--out", "outdir/r.json"],
             ['--strategies: "nope" is not a known planner'])
        case("out/probe-after-input/run-same-scenario-twice", ["run", "ok.json", "ok.json", "--out", "outdir/r.json"],
             ['is used by another scenario of this run'])
        for target, says in [("existing.json", "not a folder"), ("link.json", "not a folder"),
                             ("fifo", "not a folder"), ("missing/charts", "does not exist"), ("", "empty path")]:
            case(f"out/plot/{target or 'empty'}", ["plot", "results.json", "--out", target], [says])
        have_mpl = subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], capture_output=True).returncode == 0
        if have_mpl:  # the real script draws; the PNG that would replace a symlink stops every move
            case("out/plot/symlink-inside-folder", ["plot", "results.json", "--out", "charts"],
                 ['charts/tflops.png": is a symbolic link'], timeout=120)
        # --out naming one of the command's own inputs (scenario, its length file, lengths, results)
        scenario("file-ds.json", lambda s: s.__setitem__("dataset", {"source": "file", "path": "go.txt"}))
        conv = json.load(open(os.path.join(repo, "scenarios/converge-short.json")))
        conv["data"]["text_dir"] = os.path.join(repo, "scenarios", conv["data"]["text_dir"])
        write(w("conv.json"), json.dumps(conv))
        for name, args in [("run/scenario", ["run", "ok.json", "--out", "ok.json"]),
                           ("run/length-file", ["run", "file-ds.json", "--out", "go.txt"]),
                           ("schedule/lengths", ["schedule", "--lengths", "go.txt"] + sched[1:] + ["--out", "go.txt"]),
                           ("evaluate/results", ["evaluate", "results.json", "--out", "results.json"]),
                           ("converge/scenario", ["converge", "--scenario", "conv.json", "--out", "conv.json"])]:
            case(f"out/{name}-is-an-input", args, ["is an input of this command"])
        os.mkdir(w("cases"))
        shutil.copy(os.path.join(repo, "scenarios/conformance/gen-fill-empty-000.json"), w("cases"))
        case("out/conform/into-the-cases-folder", ["conform", "--planner", "packing", "--cases", "cases",
                                                   "--reference", "none", "--out", "cases/gen-fill-empty-000.json"],
             ["is inside the cases folder"])
        shutil.copytree(conv["data"]["text_dir"], w("corpus"))  # a copy: a failing check writes there
        write(w("conv-local.json"), json.dumps(dict(conv, data=dict(conv["data"], text_dir="corpus"))))
        case("out/converge/into-the-corpus", ["converge", "--scenario", "conv-local.json", "--out", "corpus/report.json"],
             ["is inside the text corpus"])
        case("out/bad-input-leaves-existing-file", ["schedule", "--lengths", "deep.json"] + sched[1:] + ["--out", "existing.json"],
             ["nested deeper"])
        case("out/second-scenario-bad", ["run", "ok.json", "gb-1e7.json", "--out", "r.json"], ["global_batch"])
        # ---- 4. sizes computed before allocating ------------------------------------------------
        # A replayed pool (megatron-mock): its size limit, not inside a mixture, and --draws that
        # would read the held-out batches again refused before anything runs (640 samples hold 10
        # batches of 64: 1 step + 1 held out per draw, so 9 draws fit and 10 do not).
        case("size/mock-pool-2p25", ["run", "mock-pool.json", "--out", "r.json"],
             ["\"dataset.size\"=33554432 is above the maximum 16777216"])
        case("scenario/mock-in-mixture", ["run", "mock-mix.json", "--out", "r.json"],
             ["is an ordered replay, which a mixture cannot draw from"])
        case("size/mock-draws", ["run", "mock-draws.json", "--draws", "10", "--out", "r.json"],
             ["holds 640 samples, 10 global batches of 64: steps 0 to 9 and the 1 before them"])
        case("size/global-batch-1e7", ["run", "gb-1e7.json", "--out", "r.json"],
             ["\"training.global_batch\"=10000000 is above the maximum 262144"])
        case("size/samples-x-pool", ["run", "pool-2p20.json", "--out", "r.json"],
             ["x the DP x CP pool of 1048576 ranks = 1073741824 is above the limit of 134217728"])
        case("size/samples-x-stages", ["run", "pp-vpp.json", "--out", "r.json"],
             ["x pp x vpp = 4294967296 is above the limit of 8388608"])
        case("size/schedule-samples-x-pool", ["schedule", "--lengths", "go.txt", "--planner", "dcp", "--dp", "1048576",
                                              "--cp", "1", "--max-seqlen-per-rank", "4096"], ["more than the limit of 134217728"])
        case("size/result-rows", ["run", "ok.json", "--steps", "30000", "--out", "r.json"],
             ["up to 120000 result rows", "limit of 40000"])
        case("size/held-samples", ["run", "gb-max.json", "--steps", "200", "--out", "r.json"],
             ["would hold 52428800 samples at once", "limit of 33554432"])
        case("size/schedule-300000-samples", ["schedule", "--lengths", "big-lengths.txt"] + sched[1:],
             ["300000 samples, more than the limit of 262144"])
        case("size/cp-attn-4096-heads", ["cp-attn", "--heads", "4096", "--kv-heads", "4096", "--head-dim", "4096"],
             ["estimated 1.83e+13 units of work", "budget"])
        case("size/cp-attn-memory", ["cp-attn", "--ranks", "1", "--no-all-groups", "--lengths", "2", "--heads", "4096",
                                     "--kv-heads", "4096", "--head-dim", "4096"], ["GiB of memory, over the limit"])
        # ---- 5. input file size -----------------------------------------------------------------
        case("file-size/schedule-dev-zero", ["schedule", "--lengths", "/dev/zero"] + sched[1:],
             ["/dev/zero: lengths file is larger than the limit of 1 GiB"])
        case("file-size/run-dev-zero", ["run", "/dev/zero", "--out", "r.json"], ["larger than the limit of 16 MiB"])
        case("file-size/table-dev-zero", ["table", "/dev/zero"], ["larger than the limit of 64 MiB"])
        case("file-size/check-dev-zero", ["check", "--plan", "/dev/zero", "--lengths", "go.txt"], ["64 MiB"])
        case("file-size/evaluate-dev-zero", ["evaluate", "/dev/zero", "--out", "e.md"], ["larger than the limit of 64 MiB"])
        case("contract/evaluate-focus-absent", ["evaluate", "results.json", "--focus", "dcp", "--out", "e.md"],
             ['results.json: scenario "tiny" has no rows of "dcp" (the --focus strategy)'])
        # A second file without the focus is named too (stop 44: it was dropped without a word).
        r2 = json.loads(json.dumps(results))  # another scenario, without megatron-dev's rows
        r2["rows"] = [dict(x, scenario="tiny2") for x in r2["rows"] if x["strategy"] != "megatron-dev"]
        r2["aggregates"] = [dict(x, scenario="tiny2") for x in r2["aggregates"] if x["strategy"] != "megatron-dev"]
        r2["scenarios"] = [dict(x, name="tiny2") for x in r2["scenarios"]]
        write(w("results-no-dev.json"), json.dumps(r2))
        case("contract/evaluate-second-file-without-focus", ["evaluate", "results.json", "results-no-dev.json",
                                                             "--focus", "megatron-dev", "--out", "e.md"],
             ['results-no-dev.json: scenario "tiny2" has no rows of "megatron-dev"'])
        case("option/run-time-budget-no-searching-strategy", ["run", "ok.json", "--strategies", "packing,bshd",
                                                              "--time-budget-ms", "5", "--out", "r.json"],
             ["--time-budget-ms 5: no strategy of this run searches", "search (dcp)"])
        # The default peers leave the focus out: --focus packing without --peers is a valid request.
        case("contract/evaluate-focus-a-default-peer", ["evaluate", "results.json", "--focus", "packing"], rc=0,
             stdout_ok=True)
        case("value/evaluate-focus-unknown", ["evaluate", "results.json", "--focus", "nope", "--out", "e.md"],
             ['--focus: "nope" is not a known planner'])
        case("contract/share-unknown-strategy", ["share", "ok.json", "--strategy", "nope", "--out", "s.json"],
             ['--strategy "nope" is not one of the strategies of ok.json'])
        case("contract/share-strategy-not-in-scenario", ["share", "ok.json", "--strategy", "megatron-pr2000",
                                                         "--out", "s.json"], ['--strategy "megatron-pr2000"'])
        case("contract/share-rank-outside-pool", ["share", "ok.json", "--strategy", "dcp", "--rank", "4",
                                                  "--out", "s.json"], ["--rank 4", "pool of 4"])
        case("contract/share-attention-backend-without-table", ["share", "ok.json", "--strategy", "dcp",
                                                                "--attention-backend", "dcpbench", "--out", "s.json"],
             ['--attention-backend "dcpbench"'])
        case("contract/share-measure-without-device", ["share", "ok.json", "--strategy", "dcp", "--measure",
                                                       "--out", "s.json"], ["--measure needs a CUDA"])
        # --measured takes a measured run's row of the share: a simulated results file has none
        case("contract/share-measured-without-row", ["share", "ok.json", "--strategy", "dcp", "--measured",
                                                     "results.json", "--out", "s.json"],
             ['--measured results.json: no measured row of scenario', 'strategy "dcp", step 0'])
        case("contract/share-measure-and-measured", ["share", "ok.json", "--strategy", "dcp", "--measure",
                                                     "--measured", "results.json", "--out", "s.json"], ["are exclusive"])
        case("contract/share-measured-not-results", ["share", "ok.json", "--strategy", "dcp", "--measured", "ok.json",
                                                     "--out", "s.json"], ["ok.json"])
        case("contract/calibrate-bad-backend", ["calibrate", "--backend", "cpu", "--out", "c.json"],
             ['--backend "cpu"'])
        case("contract/calibrate-unknown-model", ["calibrate", "--backend", "cuda", "--model", "gpt-9",
                                                  "--out", "c.json"], ["gpt-9"])
        # the name is checked before the device (minutes of measuring would be lost on a bad one)
        case("value/calibrate-name-empty", ["calibrate", "--backend", "cuda", "--name", "", "--out", "c.json"],
             ['--name "" must be 1 to 100 characters long'])
        case("value/calibrate-name-at", ["calibrate", "--backend", "cuda", "--name", "h100@x", "--out", "c.json"],
             ['--name "h100@x" may only contain letters, digits'])
        case("contract/calibrate-without-device", ["calibrate", "--backend", "cuda", "--out", "c.json"],
             ["calibrate --backend cuda needs a CUDA"])
        case("contract/share-backend-without-table", ["share", "ok.json", "--strategy", "dcp", "--attention-backend",
                                                      "dcpbench", "--out", "s.json"], ['"dcpbench" has no table'])
        case("contract/share-calibration-missing", ["share", "ok.json", "--strategy", "dcp", "--calibration",
                                                    "nope.json", "--out", "s.json"], ['--calibration "nope.json"'])
        case("contract/share-reps-without-measure", ["share", "ok.json", "--strategy", "dcp", "--reps", "2",
                                                     "--out", "s.json"], ["--reps 2", "without --measure"])
        case("contract/share-stage-outside-pp", ["share", "ok.json", "--strategy", "dcp", "--stage", "1",
                                                 "--out", "s.json"], ["--stage 1", "1 pipeline stages"])
        case("contract/run-cuda-without-device", ["run", "ok.json", "--backend", "cuda", "--out", "r.json"],
             ["--backend cuda needs a CUDA"])
        case("contract/run-bad-backend", ["run", "ok.json", "--backend", "gpu", "--out", "r.json"],
             ["--backend: gpu not in {sim,cuda}"])
        case("contract/run-reps-without-cuda", ["run", "ok.json", "--reps", "2", "--out", "r.json"],
             ["--reps is given without --backend cuda"])
        case("contract/run-comm-without-cuda", ["run", "ok.json", "--comm", "nccl", "--out", "r.json"],
             ["--comm is given without --backend cuda"])
        case("contract/run-cuda-tune", ["run", "ok.json", "--backend", "cuda", "--tune", "--out", "r.json"],
             ["--tune with --backend cuda"])
        case("contract/run-cuda-sensitivity", ["run", "ok.json", "--backend", "cuda", "--sensitivity", "--out", "r.json"],
             ["--sensitivity with --backend cuda"])
        case("contract/run-cuda-draws", ["run", "ok.json", "--backend", "cuda", "--draws", "5", "--out", "r.json"],
             ["--draws 5 with --backend cuda"])
        case("contract/run-draws-zero", ["run", "ok.json", "--draws", "0", "--out", "r.json"],
             ['--draws: "0" is below the minimum 1'])
        case("contract/run-draws-too-many", ["run", "ok.json", "--draws", "1001", "--out", "r.json"], ["--draws", "1000"])
        case("file-size/gate-dev-zero", ["gate", "--baseline", "/dev/zero", "--current", "results.json"], ["64 MiB"])
        # ---- 6. cp-attn work budget -------------------------------------------------------------
        case("budget/cp-attn-16384", ["cp-attn", "--ranks", "1", "--lengths", "16384"], ["6.87e+10 units", "budget"])
        case("budget/cp-attn-65536", ["cp-attn", "--lengths", "65536"], ["units of work"])
        # ---- 7. one line, no raw bytes, values quoted short -------------------------------------
        case("text/planner-newline", ["schedule", "--lengths", "go.txt", "--planner", "dc\np", "--dp", "1", "--cp", "8",
                                      "--max-seqlen-per-rank", "3000000"], ['unknown planner "dc\\np"'])
        case("text/planner-100k", ["schedule", "--lengths", "go.txt", "--planner", "y" * 100000, "--dp", "1", "--cp", "8",
                                   "--max-seqlen-per-rank", "3000000"], ["(100000 bytes)"])
        case("text/path-newline-escape", ["schedule", "--lengths", "no\nsuch\x1b[31m.txt"] + sched[1:], ["cannot open"])
        case("text/path-with-escape-exists", ["schedule", "--lengths", "esc\x1b[31m\nname.txt"] + sched[1:],
             ["esc\\x1b[31m\\nname.txt", "is not an integer length"])
        case("text/binary-lengths", ["schedule", "--lengths", "binary.bin"] + sched[1:], ["binary content"])
        case("text/high-bytes-lengths", ["schedule", "--lengths", "high-bytes.txt"] + sched[1:], ["is not an integer length"])
        case("text/megabyte-line", ["schedule", "--lengths", "garbage-line.txt"] + sched[1:], ["(1000001 bytes)"])
        case("text/idx-bad-magic", ["schedule", "--lengths", "text.idx"] + sched[1:], ["not a Megatron .idx file (bad magic)"])
        case("text/scenario-name-control", ["run", "name-ctrl.json", "--out", "r.json"], ['"bad\\u001b[31mname\\n"'])
        case("text/strategy-100k", ["run", "strategy-long.json", "--out", "r.json"], ["(100000 bytes)"])
        case("text/plot-bad-script", ["plot", "results.json", "--out", "charts-new", "--script", "bad.py"],
             ["exited with status 1", "second line"])
        case("text/plot-script-draws-nothing", ["plot", "results.json", "--out", "charts-new", "--script",
                                                "draws-nothing.py"], ["drew no chart", "hello"])
        for name, says in [("step-kinds-int", '"step_kinds" is not an array of'),
                           ("dloss-strings", 'strategy "dcp" has no "dloss_rel" that is an array of'),
                           ("order-unknown", '"strategy_order" names "foo"'), ("bounds-list", 'no "bounds" object')]:
            case(f"value/plot-converge-{name}", ["plot", f"conv-{name}.json", "--out", "charts-new"], [says])
        case("value/calibration-rate-0", ["run", "cal-hbm-0-scenario.json", "--out", "r.json"],
             ['"hbm_bytes_per_s"=0 must be > 0'])
        case("value/calibration-time-1e300", ["run", "cal-1e300-scenario.json", "--out", "r.json"],
             ['"iteration_overhead_s"=1e+300 is above the maximum 3600'])
        case("option/plot-script-empty", ["plot", "results.json", "--out", "charts-new", "--script", ""],
             ["--script: empty path"])
        case("option/given-twice", ["plot", "results.json", "--out", "charts-new", "--out", "charts-other"],
             ["--out is given 2 times; give it once"])
        case("text/unknown-command", ["frob"], ['unknown command "frob"'])
        case("text/unknown-option-before-command", ["--frob"], ['unknown option "--frob" before the command'])
        case("text/no-command", [], ["subcommand is required"])
        case("text/unknown-flag", ["schedule", "--lengths", "go.txt"] + sched[1:] + ["--frob", "1"], ["--frob"])
        case("option/min-cp-static-planner", ["schedule", "--lengths", "go.txt", "--planner", "packing", "--dp", "1",
                                              "--cp", "8", "--max-seqlen-per-rank", "3000000", "--min-cp", "4"],
             ["--min-cp 4", "'packing' is static"])
        case("option/time-budget-planner-without-search", ["schedule", "--lengths", "go.txt", "--planner", "packing",
                                                           "--dp", "1", "--cp", "8", "--max-seqlen-per-rank", "3000000",
                                                           "--time-budget-ms", "5"],
             ["--time-budget-ms 5", "'packing' does not search", "planners that search (dcp)"])
        case("option/converge-run-scenario", ["converge", "--scenario",
                                              os.path.join(repo, "scenarios/megatron-example-4gpu.json")],
             ['has "cluster": it is a run scenario (dcpbench run), not a convergence scenario'])
        # the reference gradients (and float32 parameters) rank 0 keeps per step are bounded before anything trains
        case("value/converge-reference-gradients", ["converge", "--scenario", "conv.json", "--steps", "10000",
                                                     "--dtype", "f32", "--out", "conv-big.json"],
             ["10006 steps (main and edge cases) x 56472 parameters x 20 bytes = 10.53 GiB", "limit of 8 GiB"])
        # fields that must be > 0 say so for negatives too (they had read "is below the minimum 0.0")
        for v in (-1.5, 0):
            scenario(f"sigma-{v}.json", lambda s, v=v: s["dataset"].__setitem__("sigma", v))
            case(f"value/sigma-{v}", ["run", f"sigma-{v}.json", "--out", "r.json"],
                 [f'"dataset.sigma"={v}', "must be > 0"])
        # and the converse: a convergence scenario given to run (it had named "model.layers" missing)
        case("option/run-converge-scenario", ["run", "conv.json", "--out", "conv-run.json"],
             ['conv.json: has "pool": it is a convergence scenario (dcpbench converge --scenario), not a run scenario'])
        # a convergence scenario's name is checked as a run scenario's (control bytes reached the terminal)
        for label, bad_name in [("escape", "x\u001b[31my"), ("slash", "a b/c"), ("long", "z" * 101)]:
            conv_named = json.loads(json.dumps(conv))
            conv_named["name"] = bad_name
            write(w(f"conv-name-{label}.json"), json.dumps(conv_named))
            case(f"value/converge-name-{label}", ["converge", "--scenario", f"conv-name-{label}.json",
                                                   "--out", "conv-name.json"],
                 ['"name"=', "letters, digits" if label != "long" else "1 to 100 characters"])
        case("plan/check-missing-planner", ["check", "--plan", "plan-no-planner.json", "--lengths", "five.txt"],
             ['plan-no-planner.json: plan JSON: "planner" is missing'])
        case("plan/check-schema-v9", ["check", "--plan", "plan-v9.json", "--lengths", "five.txt"],
             ['"schema"="dcpbench.plan.v9" is not dcpbench.plan.v1'])
        case("conform/case-not-an-object", ["conform", "--planner", "megatron-dev", "--cases", "cases-array"],
             ["arr.json: the file holds [1,2], not a JSON object"])
        # ---- 8. integers range-checked ------------------------------------------------------------
        case("int/cp-attn-seed-minus-1", ["cp-attn", "--seed", "-1"], ['--seed: "-1" is below the minimum 0'])
        case("int/cp-attn-ranks-2p64", ["cp-attn", "--ranks", "18446744073709551616"], ["--ranks", "out of range"])
        case("int/cp-attn-heads-hex", ["cp-attn", "--heads", "0x10"], ['"0x10" is not an integer'])
        case("int/cp-attn-lengths-negative", ["cp-attn", "--lengths", "1,-2"], ['"-2" is below the minimum 0'])
        case("int/schedule-dp-minus-1", ["schedule", "--lengths", "go.txt", "--planner", "dcp", "--dp", "-1", "--cp", "8",
                                         "--max-seqlen-per-rank", "3000000"], ['--dp: "-1" is below the minimum 1'])
        case("int/schedule-m-2p63", ["schedule", "--lengths", "go.txt", "--planner", "dcp", "--dp", "1", "--cp", "8",
                                     "--max-seqlen-per-rank", "9223372036854775808"], ["--max-seqlen-per-rank"])
        case("int/schedule-sample-2p41", ["schedule", "--lengths", "len-2p41.txt", "--planner", "dcp", "--dp", "1",
                                          "--cp", "2", "--max-seqlen-per-rank", str(2**40)],
             ["sample 0 has length 2199023255552, above the limit of 1099511627776 tokens"])
        case("int/check-sample-2p41", ["check", "--plan", "plan-2p41.json", "--lengths", "len-2p41.txt"],
             ["sample 0 has length 2199023255552, above the limit of 1099511627776 tokens"])
        case("int/schedule-max-seqlen-2p41",
             ["schedule", "--lengths", "go.txt"] + sched[1:] + ["--max-seqlen", str(2**41)],
             ['--max-seqlen: "2199023255552" is above the maximum 1099511627776'])
        case("int/schedule-dp-float", ["schedule", "--lengths", "go.txt", "--planner", "dcp", "--dp", "1e3", "--cp", "8",
                                       "--max-seqlen-per-rank", "3000000"], ['"1e3" is not an integer'])
        case("int/check-dp-minus-1", ["check", "--plan", "results.json", "--lengths", "go.txt", "--dp", "-1"],
             ['--dp: "-1" is below the minimum 1'])
        case("int/converge-steps-2p63", ["converge", "--scenario", os.path.join(repo, "scenarios/converge-short.json"),
                                         "--steps", "9223372036854775808"], ["--steps", "out of range"])
        case("int/run-steps-0", ["run", "ok.json", "--steps", "0", "--out", "r.json"], ['--steps: "0" is below the minimum 1'])
        case("int/run-time-budget-0", ["run", "ok.json", "--time-budget-ms", "0", "--out", "r.json"],
             ['--time-budget-ms: "0" is below the minimum 1'])
        case("int/schedule-time-budget-float", ["schedule", "--lengths", "go.txt"] + sched[1:] + ["--time-budget-ms", "1.5"],
             ['--time-budget-ms: "1.5" is not an integer'])
        case("int/gate-step-2p63", ["gate", "--baseline", "results.json", "--current", "step-2p63.json"],
             ['"step"=9223372036854775808 is not in [0, 2147483647]'])
        case("value/gate-tolerance-not-a-number", ["gate", "--baseline", "results.json", "--current", "results.json",
                                                   "--tolerance", "0.02abc"], ['--tolerance: "0.02abc" is not a number'])
        # NaN compares false with everything: it would have passed every step (helper-61's review)
        case("value/gate-tolerance-nan", ["gate", "--baseline", "results.json", "--current", "results.json",
                                          "--tolerance", "nan"], ['--tolerance: "nan" is not in [0, 1)'])
        case("value/gate-sim-tolerance-1", ["gate", "--baseline", "results.json", "--current", "results.json",
                                            "--sim-tolerance", "1"], ['--sim-tolerance: "1" is not in [0, 1)'])
        case("int/table-tokens-1e300", ["table", "tokens-1e300.json"], ['"tokens" is not an integer'])
        case("int/table-facts-type", ["table", "facts-type.json"], ['scenarios[0]."gpus" is not an integer'])
        case("value/table-busy-short", ["table", "busy-short.json"], ['"rank_busy_s" has 1 entries, its pool 4 ranks'])
        case("value/plot-plan-group-outside", ["plot", "plan-group-outside.json", "--out", "charts-new"],
             ['group of ranks [0, 400) outside its pool of 4 ranks'])
        case("int/scenario-global-batch-2p63", ["run", "gb-2p63.json", "--out", "r.json"], ["is above the maximum 262144"])
        case("int/scenario-seed-2p64", ["run", "seed-2p64.json", "--out", "r.json"], ['"training.seed"=18446744073709551615'])
        case("value/pp-over-layers", ["run", "pp-over-layers.json", "--out", "r.json"],
             ['"pp"=24 x "vpp"=1 does not divide the model\'s 12 layers'])
        case("value/tp-not-dividing-heads", ["run", "tp-3.json", "--out", "r.json"],
             ['"tp"=3 does not divide the model\'s 16 attention heads'])
        case("json/key-twice", ["run", "key-twice.json", "--out", "r.json"], ['key "name" appears twice in one object'])
        case("value/tp-without-sequence-parallel", ["run", "tp-2.json", "--out", "r.json"],
             ['"training.sequence_parallel"=false must be true with "cluster.tp"=2'])
        case("value/tp-over-nodes", ["run", "tp-8-nodes.json", "--out", "r.json"],
             ['"tp"=8 does not divide gpus_per_node=4'])
        case("value/name-too-long", ["run", "name-long.json", "--out", "r.json"],
             ['must be 1 to 100 characters long'])
        case("value/converge-bound-0", ["converge", "--scenario", "conv.json", "--bound", "0"],
             ['--bound: "0" is not a finite number > 0'])
        case("value/strategies-twice", ["run", "ok.json", "--strategies", "dcp,dcp", "--out", "r.json"],
             ['--strategies: "dcp" is listed twice'])
        case("value/strategies-empty-item", ["run", "ok.json", "--strategies", "dcp,,packing", "--out", "r.json"],
             ['--strategies: "dcp,,packing" has an empty item (item 2 of 3)'])
        case("value/strategies-trailing-comma", ["run", "ok.json", "--strategies", "dcp,", "--out", "r.json"],
             ['--strategies: "dcp," has an empty item (item 2 of 2)'])
        case("value/cp-attn-lengths-empty-item", ["cp-attn", "--lengths", "1,,2"],
             ['--lengths: "1,,2" has an empty item (item 2 of 3)'])
        case("int/cp-attn-lengths-float-item", ["cp-attn", "--lengths", "1,2.5"], ['--lengths: "2.5" is not an integer'])
        case("value/evaluate-peers-unknown", ["evaluate", "results.json", "--peers", "foo,packing"],
             ['--peers: "foo" is not a known planner'])
        case("value/evaluate-peers-twice", ["evaluate", "results.json", "--peers", "packing,packing"],
             ['--peers: "packing" is listed twice'])
        case("value/evaluate-peers-focus", ["evaluate", "results.json", "--peers", "dcp"],
             ['--peers: "dcp" is the --focus strategy itself'])
        case("value/evaluate-peers-empty-item", ["evaluate", "results.json", "--peers", ",packing"],
             ['--peers: ",packing" has an empty item (item 1 of 2)'])
        case("value/max-seqlen-not-padded", ["run", "maxlen-unpadded.json", "--out", "r.json"],
             ['"training.max_seqlen"=8188 is not a multiple of "dataset.pad_multiple"=8'])
        case("int/scenario-gpus-float", ["run", "gpus-float.json", "--out", "r.json"], ['"cluster.gpus"=4.5 is not an integer'])
        # ---- the contract's classes ---------------------------------------------------------------
        case("int/calibration-gpus-per-node-2p40", ["run", "cal-2p40-scenario.json", "--out", "r.json"],
             ['"gpus_per_node"=1099511627776 is above the maximum 1048576'])
        case("file/fifo-without-writer-as-lengths", ["schedule", "--lengths", "fifo"] + sched[1:], ["no sample lengths"],
             timeout=10)
        case("file/fifo-without-writer-as-scenario", ["run", "fifo", "--out", "r.json"], ["fifo: is empty, no JSON in it"],
             timeout=10)
        if os.path.exists("/dev/full"):
            case("file/stdout-full", ["schedule", "--lengths", "go.txt"] + sched[1:], ["stdout: write failed"],
                 stdout_file="/dev/full")
        case("contract/missing-file", ["schedule", "--lengths", "nope.txt"] + sched[1:], ["nope.txt: cannot open"])
        case("contract/folder-as-lengths", ["schedule", "--lengths", "folder"] + sched[1:], ["is a directory"])
        case("contract/unplaceable-sample", ["schedule", "--lengths", "tall.txt", "--planner", "dcp", "--dp", "1", "--cp", "1",
                                             "--max-seqlen-per-rank", "1000"], ["sample 0 has length 3000000"])
        case("contract/missing-required", ["schedule", "--lengths", "go.txt"], ["--planner"])
        # ---- sized, not refused: a 10^12-token document is counted, not split into 10^12 chunks ---
        case("size/huge-document-runs", ["run", "huge-doc.json", "--out", "-", "--quiet"], rc=0, timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"robustness: {R.count - len(R.failures)} of {R.count} cases pass")
    for f in R.failures:
        print("FAIL " + f)
    return 1 if R.failures else 0


if __name__ == "__main__":
    sys.exit(main())
