"""Runs the Dynamic-CP scheduler of Megatron-LM PR #5811 (its main-stack port, refs/pull/5811/head)
on one conformance case: the protocol of README.md (one case on stdin, the plan on stdout, or one
error line on stderr). Needs no torch and no Megatron install, only the PR's
megatron/core/datasets/data_schedule_utils.py, e.g. from a Megatron-LM clone:

    git -C Megatron-LM show refs/pull/5811/head:megatron/core/datasets/data_schedule_utils.py > /tmp/pr_dsu.py
    build/dcpbench conform --reference megatron-dev --timeout 60 \
        --planner-cmd "python3 scenarios/conformance/pr5811_adapter.py /tmp/pr_dsu.py"

It reads three top-level functions of that file (next_hdp_group_packing_aware,
align_sample_id_groups, dcp_gpus_needed) and repeats what the PR's
DefaultDynamicCPScheduler.get_groups_and_subsamples does with them (data_schedule.py:393-411 at
55095561c6): samples longest first, next_hdp_group_packing_aware until none is left, then, with a
VPP group V, align_sample_id_groups(groups, V, min_final_microbatches=PP). The conformance cases
name no PP size: PP = V, Megatron's default V (--pp overrides it). That loop is ours, written from
55095561c6: a later change to the PR's data_schedule.py is not picked up.

The PR's file reads _DYNAMIC_CP_WORKLOAD_CAP_DELTA without defining it (a NameError as committed at
55095561c6); the adapter supplies it, 0.05 as in the dev line (d48bd6be0a data_schedule_utils.py:12)
unless --cap-delta says otherwise. An AssertionError (the PR's own check) is one error line (exit
2); any other exception propagates as a traceback, which conform counts as a crash, and so is a
file it cannot use (two lines: every case fails rather than some passing as refusals). Not run in
CI.
docs/megatron.md ("Megatron's main-stack port") gives what it found.
"""
import argparse
import ast
import json
import sys
from functools import lru_cache
from math import ceil, log2
from typing import Dict, List, Optional, Tuple

FUNCTIONS = ("next_hdp_group_packing_aware", "align_sample_id_groups", "dcp_gpus_needed")


def setup_error(message):
    # Two lines on purpose: one line with an exit status of 1-128 is a scheduler's refusal under
    # the protocol, which conform would count as a pass wherever an error is allowed; two lines are
    # a crash, so a wrong path fails every case instead of passing some.
    print("pr5811_adapter: setup error, no scheduler ran on this case:", file=sys.stderr)
    print(f"pr5811_adapter: {message}", file=sys.stderr)  # last: conform quotes the last line
    sys.exit(2)


def load_functions(path, cap_delta):
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError) as e:
        setup_error(f"cannot read {path}: {e}")
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in FUNCTIONS]
    missing = set(FUNCTIONS) - {n.name for n in body}
    if missing:
        setup_error(f"{path} has no top-level {', '.join(sorted(missing))}")
    namespace = {"lru_cache": lru_cache, "ceil": ceil, "log2": log2, "Dict": Dict, "List": List,
                 "Optional": Optional, "Tuple": Tuple, "_DYNAMIC_CP_WORKLOAD_CAP_DELTA": cap_delta}
    align = next(n for n in body if n.name == "align_sample_id_groups")
    if "min_final_microbatches" not in [a.arg for a in align.args.args + align.args.kwonlyargs]:
        # d48bd6be0a's and earlier files: their alignment rule is not the PR's (docs/megatron.md).
        setup_error(f"{path} is not PR #5811's data_schedule_utils.py "
                    "(its align_sample_id_groups has no min_final_microbatches)")
    exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), namespace)
    return namespace


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("utils", help="the PR's megatron/core/datasets/data_schedule_utils.py")
    parser.add_argument("--pp", type=int, default=None, help="pipeline size for the VPP rule (default: V)")
    parser.add_argument("--cap-delta", type=float, default=0.05, help="_DYNAMIC_CP_WORKLOAD_CAP_DELTA (default 0.05)")
    args = parser.parse_args()
    fn = load_functions(args.utils, args.cap_delta)
    case = json.load(sys.stdin)
    pool = case["dp"] * case["cp"]
    remaining = sorted(enumerate(case["seqlens"]), key=lambda item: item[1], reverse=True)
    groups = []
    try:
        while remaining:
            _, remaining, _, sample_ids = fn["next_hdp_group_packing_aware"](
                remaining, pool, max_seq_len_per_rank=case["max_seqlen_per_dp_cp_rank"],
                min_cp_size=case["min_cp"])
            groups.append(sample_ids)
        vpp = case["vpp_group"]
        if vpp is not None:
            groups = fn["align_sample_id_groups"](groups, vpp, min_final_microbatches=args.pp or vpp)
    except AssertionError as e:
        print(f"pr5811: AssertionError: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(groups))


if __name__ == "__main__":
    main()
