"""Runs Megatron-LM's own Dynamic-CP scheduler on one conformance case: the protocol of
README.md (one case on stdin, Megatron's plan on stdout, or one error line on stderr).

Needs Megatron-LM importable (and its dependency torch), e.g.:
    PYTHONPATH=/path/to/Megatron-LM dcpbench conform \
        --planner-cmd "python3 scenarios/conformance/megatron_adapter.py" --timeout 60
It constructs DefaultDynamicCPScheduler(max_seqlen_per_dp_cp_rank, cp_size, dp_size,
microbatch_group_size_per_vp_stage, min_cp_size=...) from
megatron/core/datasets/data_schedule.py and calls get_groups_and_subsamples on the list of
(global id, length) pairs, as DpBalancedScheduler.run does. An AssertionError (Megatron's own
check) is reported as one error line; any other exception propagates as a traceback, which conform
counts as a crash. Not run in CI (no Megatron-LM or torch there).
"""
import json
import sys


def main():
    case = json.load(sys.stdin)
    from megatron.core.datasets.data_schedule import DefaultDynamicCPScheduler

    scheduler = DefaultDynamicCPScheduler(
        case["max_seqlen_per_dp_cp_rank"], case["cp"], case["dp"], case["vpp_group"],
        min_cp_size=case["min_cp"])
    sample_id_seqlens = [(i, L) for i, L in enumerate(case["seqlens"])]
    try:
        groups = scheduler.get_groups_and_subsamples(sample_id_seqlens)
    except AssertionError as e:
        print(f"megatron: AssertionError: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    json.dump([[list(map(int, ids)) for ids in mb] for mb in groups], sys.stdout)


if __name__ == "__main__":
    main()
