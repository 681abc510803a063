"""Overhead of the Python call over the C++ solve (benchmark, not a test).

    PYTHONPATH=build/python python3 harness/python/bench/bench_schedule.py [--out FILE.json]

Same inputs as build/harness/bench_sched: log-normal lengths (mean 2000 tokens, sigma 1.7),
M = 8192, static cp 8, dp = N/8, seeded. For each (G samples, N ranks) it times
dcpbench.schedule() from Python (lengths list in, Megatron's nested lists out) and reads the C++
solve time the module measures around the planner (Plan.solve_ms), over repeated calls; overhead =
min(Python call) / min(C++ solve) - 1 (the minimum over the repetitions is the run least disturbed
by other processes on a shared machine; the medians are in the JSON too). Prints a table and,
with --out, writes JSON.
"""
import argparse
import json
import math
import platform
import random
import statistics
import time

import dcpbench


def lengths(g, seed):
    rng = random.Random(seed)
    sigma = 1.7
    mu = math.log(2000) - sigma * sigma / 2  # mean 2000 tokens
    return [max(1, min(8192 * 64, int(rng.lognormvariate(mu, sigma)))) for _ in range(g)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    rows = []
    print(f"{'planner':<16} {'G':>6} {'N':>5} {'python call ms':>15} {'C++ solve ms':>13} {'overhead':>9}")
    for planner in ("megatron-dev", "megatron-pr2000"):
        for g, n in ((2048, 64), (2048, 256), (16384, 64)):
            seqlens = lengths(g, seed=g * 1000 + n)
            kw = dict(dp=n // 8, cp=8, max_seqlen_per_dp_cp_rank=8192)
            dcpbench.schedule(seqlens, planner, **kw)  # warm-up
            calls, solves = [], []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                dcpbench.schedule(seqlens, planner, **kw)
                calls.append((time.perf_counter() - t0) * 1e3)
                solves.append(dcpbench.plan(seqlens, planner, **kw).solve_ms)
            # Minimum over the repetitions: the machine is shared, and the minimum is the run least
            # disturbed by other processes (the median is recorded too).
            call, solve = min(calls), min(solves)
            rows.append(dict(planner=planner, samples=g, pool=n, python_call_ms=call, cpp_solve_ms=solve,
                             overhead=call / solve - 1, python_call_ms_median=statistics.median(calls),
                             cpp_solve_ms_median=statistics.median(solves)))
            print(f"{planner:<16} {g:>6} {n:>5} {call:>15.3f} {solve:>13.3f} {100 * (call / solve - 1):>8.1f}%")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(context=dict(host=platform.node(), python=platform.python_version(),
                                        method="minimum (and median) of %d calls each; solve_ms measured in C++ around the planner"
                                        % args.reps), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
