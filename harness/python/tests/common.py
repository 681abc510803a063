"""What the pytest files of this folder share: where the source tree and the dcpbench binary are
(CTest passes DCP_SOURCE_DIR and DCPBENCH), the toy external scheduler, and the conformance cases."""
import glob
import json
import os

SOURCE = os.environ.get("DCP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DCPBENCH = os.environ.get("DCPBENCH", os.path.join(SOURCE, "build", "dcpbench"))
CASES_DIR = os.path.join(SOURCE, "scenarios", "conformance")
TOY = os.path.join(os.path.dirname(__file__), "toy_scheduler.py")


def load_cases():
    cases = []
    for path in sorted(glob.glob(os.path.join(CASES_DIR, "*.json"))):
        with open(path) as f:
            cases.append(json.load(f))
    return cases


CASES = load_cases()
