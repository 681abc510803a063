"""Deliberately wrong toy schedulers for `dcpbench conform --planner-cmd` (the tests check that
conform catches each one). They speak the protocol of scenarios/conformance/README.md: one case
(JSON) on stdin; a plan in Megatron's format on stdout, or exit 2 with one error line on stderr.

    python3 toy_scheduler.py --bug none            # megatron-dev through the dcpbench module: correct
    python3 toy_scheduler.py --bug negative-index  # a fill loop that reads ranks[i - 1] at i = 0 (ranks[-1])
    python3 toy_scheduler.py --bug reorder         # valid plans, but the pack order differs from Megatron's
    python3 toy_scheduler.py --bug hang            # never answers on VPP cases
    python3 toy_scheduler.py --bug hang --pid-file F   # ... and writes its pid to F before it sleeps
    python3 toy_scheduler.py --bug traceback       # an uncaught IndexError on non-power-of-two pools
    python3 toy_scheduler.py --bug accept-all      # plans even inputs that must be rejected (length 0)
    python3 toy_scheduler.py --bug segfault        # killed by SIGSEGV after reading its input
"""
import argparse
import json
import os
import signal
import sys
import time

import dcpbench


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", default="none",
                        choices=["none", "negative-index", "reorder", "hang", "traceback", "accept-all", "segfault"])
    parser.add_argument("--pid-file", default="",
                        help="with --bug hang: write this process's pid here before sleeping, so a test "
                             "knows that the scheduler runs (and which process must be gone)")
    args = parser.parse_args()
    bug = args.bug
    case = json.load(sys.stdin)
    seqlens = case["seqlens"]
    n = case["dp"] * case["cp"]
    if bug == "segfault":  # under /bin/sh -c the shell reports it: exit 139, "Segmentation fault"
        os.kill(os.getpid(), signal.SIGSEGV)
    if bug == "hang" and case["vpp_group"]:
        if args.pid_file:  # whole or absent (renamed into place): the test never reads half a pid
            with open(args.pid_file + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(args.pid_file + ".tmp", args.pid_file)
        time.sleep(3600)
    if bug == "traceback" and n & (n - 1):
        empty = []
        empty[0]  # IndexError, printed as a traceback by Python
    if bug == "accept-all":
        seqlens = [max(1, L) for L in seqlens]
    try:
        groups = dcpbench.schedule(seqlens, "megatron-dev", dp=case["dp"], cp=case["cp"],
                                   max_seqlen_per_dp_cp_rank=case["max_seqlen_per_dp_cp_rank"],
                                   min_cp=case["min_cp"], vpp_group=case["vpp_group"])
    except ValueError as e:
        print(f"toy_scheduler: {e}", file=sys.stderr)
        sys.exit(2)
    if bug == "negative-index":
        # Megatron's fill_empty tests `sample_id_group[i]` before `i >= 0` (reference §7a). This toy
        # refills rank 0 from its left neighbour, which Python resolves to the LAST rank at i = 0.
        for mb in groups:
            i = 0
            if len(set(map(tuple, mb))) > 1:
                mb[i] = list(mb[i - 1])
    if bug == "reorder":
        for mb in groups:
            for ranks in mb:
                ranks.reverse()
    json.dump(groups, sys.stdout)


if __name__ == "__main__":
    main()
