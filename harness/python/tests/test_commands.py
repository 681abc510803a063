"""dcpbench's commands run as processes from pytest: `conform --planner-cmd` against deliberately
wrong toy schedulers (toy_scheduler.py) and schedulers that misbehave in other ways, its report and
bad input, interrupting `conform` and `plot`, and `check` on plan files. (Split from
test_dcpbench.py, which tests the Python module.)

Run by CTest (python_dcpbench) with PYTHONPATH=<build>/python, DCPBENCH=<build>/dcpbench and
DCP_SOURCE_DIR=<source tree>.
"""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import dcpbench

from common import CASES, DCPBENCH, SOURCE, TOY


def conform(bug, filt, timeout="5"):
    cmd = f"{sys.executable} {TOY} --bug {bug}"
    r = subprocess.run([DCPBENCH, "conform", "--planner-cmd", cmd, "--filter", filt, "--timeout", timeout],
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout


def test_conform_passes_a_correct_external_scheduler():
    code, out = conform("none", "s7")
    assert code == 0, out
    assert "PASSED" in out


@pytest.mark.parametrize("bug,filt,expect", [
    ("negative-index", "s7", "invalid plan: micro-batch 0: sample"),
    ("reorder", "s8", "differs from megatron-dev's"),
    ("hang", "s7f", "timeout: no answer within 1 s"),
    ("traceback", "s7j", "crash: exit status 1 with"),
    ("accept-all", "s7i", "returned a plan where no valid plan exists"),
    # killed by a signal under the shell: a crash on every case, never a clean one-line error
    # (which would pass every case that must be refused)
    ("segfault", "s7", "crash: exit status 139: the shell reports it killed by signal 11"),
])
def test_conform_catches_wrong_toy_schedulers(bug, filt, expect):
    code, out = conform(bug, filt, timeout="1")
    assert code == 1, out
    assert "FAIL" in out and expect in out, out
    if bug == "segfault":
        assert ": 0 passed," in out, out


def test_conform_judges_what_a_scheduler_said_not_how_it_left(tmp_path):
    # helper-77's trial. (1) A process left behind holding stdout: the answer counts, 1 s after the
    # shell exits, instead of "no answer" at the deadline. (2) A scheduler's control bytes are
    # escaped and (3) its megabyte error line cut in the table and the report. (4) A plan.v1 answer
    # whose "pool" contradicts its plan fails, as `dcpbench check` fails it.
    def run(cmd, timeout="20", **kw):
        out = tmp_path / "report.json"
        start = time.time()
        r = subprocess.run([DCPBENCH, "conform", "--planner-cmd", cmd, "--filter", "s7p-ties-n4", "--all",
                            "--timeout", timeout, "--out", str(out)], capture_output=True, text=True, timeout=120, **kw)
        return r, time.time() - start, json.loads(out.read_text())["cases"][0]
    r, took, case = run(f"{sys.executable} {TOY} --bug none; sleep 60 &")
    assert r.returncode == 0 and case["pass"], r.stdout
    assert took < 10, took  # not the 20 s deadline
    # The same from a plain shell answer (milliseconds) with the deadline inside the 1 s grace: the
    # answer stands (it had read as a timeout), and with SIGCHLD ignored by conform's parent (the
    # kernel would reap the shell itself and every case ran to its deadline; helper-78).
    case_file = json.loads(open(os.path.join(SOURCE, "scenarios", "conformance", "s7p-ties-n4.json")).read())["input"]
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(dcpbench.schedule(case_file["seqlens"], "megatron-dev", dp=case_file["dp"],
                                                   cp=case_file["cp"],
                                                   max_seqlen_per_dp_cp_rank=case_file["max_seqlen_per_dp_cp_rank"])))
    quick = f"cat >/dev/null; cat {answer}; sleep 60 &"
    r, took, case = run(quick, timeout="0.8")
    assert r.returncode == 0 and case["pass"], r.stdout
    r, took, case = run(quick, timeout="20", preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
    assert r.returncode == 0 and case["pass"] and took < 10, (took, r.stdout)
    r, _, case = run("cat >/dev/null; printf 'bad \\033[2J\\033[31mRED\\n' >&2; exit 1")
    assert "\x1b" not in r.stdout and "\x1b" not in case["reason"], repr(case["reason"])
    assert case["reason"].endswith("bad \\x1b[2J\\x1b[31mRED"), repr(case["reason"])
    r, _, case = run("cat >/dev/null; head -c 1000000 /dev/zero | tr '\\0' x >&2; echo >&2; exit 1")
    assert len(case["reason"]) <= 310 and max(len(line) for line in r.stdout.splitlines()) < 500, len(case["reason"])
    lie = tmp_path / "lie.py"
    lie.write_text("import json, sys, dcpbench\n"
                   "c = json.load(sys.stdin)\n"
                   "p = json.loads(dcpbench.plan(c['seqlens'], dp=c['dp'], cp=c['cp'],\n"
                   "    max_seqlen_per_dp_cp_rank=c['max_seqlen_per_dp_cp_rank']).to_json())\n"
                   "p['pool'] += 1\n"
                   "print(json.dumps(p))\n")
    r, _, case = run(f"{sys.executable} {lie}")
    assert r.returncode == 1 and not case["pass"], r.stdout
    assert "the dcpbench.plan.v1 answer contradicts its plan: \"pool\" is" in case["reason"], case["reason"]
    # A summary is held to its plan also where the plan's own recorded config would fail it (its
    # max_seqlen is not the case's, which judge() validates under): a padded plan recording
    # another max_seqlen than its pad_to, with a false token count (helper-79).
    liar = json.loads(dcpbench.plan(case_file["seqlens"], "bshd", dp=case_file["dp"], cp=case_file["cp"],
                                    max_seqlen_per_dp_cp_rank=case_file["max_seqlen_per_dp_cp_rank"],
                                    max_seqlen=max(case_file["seqlens"])).to_json())
    liar["max_seqlen"] = liar["summary"]["pad_to"] + 2
    liar["summary"]["tokens"] = 999999
    (tmp_path / "liar.json").write_text(json.dumps(liar))
    out = tmp_path / "liar-report.json"
    r = subprocess.run([DCPBENCH, "conform", "--planner-cmd", f"cat >/dev/null; cat {tmp_path / 'liar.json'}",
                        "--filter", "s7p-ties-n4", "--reference", "none", "--out", str(out)], capture_output=True,
                       text=True, timeout=120)
    case = json.loads(out.read_text())["cases"][0]
    assert r.returncode == 1 and '"summary.tokens" is 999999, the plan has' in case["reason"], case["reason"]
    # A plan.v1 answer with a sample id past the batch and a summary: its violation, not a segfault
    # of conform recomputing the summary (helper-78).
    bad_id = {"schema": "dcpbench.plan.v1", "planner": "x", "dp": case_file["dp"], "cp": case_file["cp"],
              "max_seqlen_per_rank": case_file["max_seqlen_per_dp_cp_rank"], "min_cp": 1, "vpp_group": None,
              "microbatches": [{"groups": [{"ranks": list(range(case_file["dp"] * case_file["cp"])),
                                            "cp_size": case_file["dp"] * case_file["cp"], "samples": [262143]}]}],
              "summary": {"samples": 1}}
    (tmp_path / "bad_id.json").write_text(json.dumps(bad_id))
    r, _, case = run(f"cat >/dev/null; cat {tmp_path / 'bad_id.json'}")
    assert r.returncode == 1 and not case["pass"] and "262143" in case["reason"], (r.returncode, r.stdout)


def test_interrupting_conform_leaves_no_scheduler_running(tmp_path):
    # The scheduler runs in its own process group (out of the terminal's SIGINT); conform kills
    # that group before it ends on SIGINT / SIGTERM. It had left the hanging scheduler running.
    # The scheduler writes its pid once it hangs: waiting for a process whose command line holds a
    # tag found conform itself (the tag is in its --planner-cmd), so the signal could come before
    # any scheduler ran and "none left" proved nothing.
    def running(pid, pid_file):
        # a zombie (its parent gone, not yet reaped) has an empty command line, and a pid reused by
        # another process has another one: neither is our scheduler
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return str(pid_file).encode() in f.read()
        except OSError:
            return False

    for sig in (signal.SIGINT, signal.SIGTERM):
        pid_file = tmp_path / f"scheduler-{sig.name}.pid"
        cmd = f"{sys.executable} {TOY} --bug hang --pid-file {pid_file}"
        # SIGINT at its default in conform even when this test runs with it ignored (a background
        # job of a non-interactive shell), as in a terminal
        p = subprocess.Popen([DCPBENCH, "conform", "--planner-cmd", cmd, "--filter", "s7f", "--timeout", "60"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None and not pid_file.exists():
            time.sleep(0.05)
        if not pid_file.exists():
            p.kill()
            p.wait()
        assert pid_file.exists(), "the scheduler never reached its hang"
        pid = int(pid_file.read_text())
        assert running(pid, pid_file)
        p.send_signal(sig)
        assert p.wait(timeout=30) == -sig  # conform itself ends by the signal, as before
        # SIGKILL to the group comes before conform ends, but the kernel may take a moment to end
        # a process on a loaded machine: a bounded wait
        deadline = time.time() + 10
        while time.time() < deadline and running(pid, pid_file):
            time.sleep(0.05)
        left = running(pid, pid_file)
        if left:
            os.kill(pid, signal.SIGKILL)  # not an hour's sleeper left behind by a failed test
        assert not left, f"scheduler (pid {pid}) still running after {sig.name}"


def test_interrupting_plot_leaves_no_staging_folder(tmp_path):
    # plot draws into a staging folder beside --out and moves the PNGs in only on success; an
    # interrupt had ended plot with the staging folder (and the script) left behind. Now the
    # script's process group is killed (a process it started too: it holds the output pipe), the
    # folder removed, and plot still ends by the signal. A signal the caller ignores (nohup's
    # SIGHUP) does not stop the plot.
    results = tmp_path / "results.json"
    r = subprocess.run([DCPBENCH, "run", os.path.join(SOURCE, "scenarios", "megatron-example-4gpu.json"), "--steps", "1",
                        "--strategies", "packing", "--quiet", "--out", str(results)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pid_file = tmp_path / "script.pid"
    go_file = tmp_path / "go"
    slow = tmp_path / "slow_plot.py"
    slow.write_text("import os, subprocess, sys, time\n"
                    "out = sys.argv[sys.argv.index('--out') + 1]\n"
                    "open(os.path.join(out, 'chart.png'), 'wb').write(b'x')\n"
                    "child = subprocess.Popen(['sleep', '120'])  # inherits the output pipe\n"
                    f"open({str(pid_file)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
                    "deadline = time.time() + 60\n"
                    f"while not os.path.exists({str(go_file)!r}) and time.time() < deadline:\n"
                    "    time.sleep(0.05)\n"
                    "child.kill()\n")

    def alive(pid):
        try:
            os.kill(pid, 0)
            return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            return False

    def start(out_dir, **kw):
        for f in (pid_file, go_file):
            if f.exists():
                f.unlink()
        p = subprocess.Popen([DCPBENCH, "plot", str(results), "--out", str(out_dir), "--script", str(slow)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        deadline = time.time() + 30
        while time.time() < deadline and not (pid_file.exists() and pid_file.read_text()):
            time.sleep(0.05)
        assert pid_file.exists(), "the plot script never started"
        staging = glob.glob(str(tmp_path / ".dcpbench-dir.*"))
        assert staging and os.path.exists(os.path.join(staging[0], "chart.png")), staging
        return p, [int(x) for x in pid_file.read_text().split()]

    for sig in (signal.SIGINT, signal.SIGTERM):
        out_dir = tmp_path / f"charts-{sig.name}"
        p, pids = start(out_dir)
        p.send_signal(sig)
        assert p.wait(timeout=30) == -sig  # plot ends by the signal, as a command should
        assert not glob.glob(str(tmp_path / ".dcpbench-dir.*")), "staging folder left behind"
        assert not out_dir.exists()
        time.sleep(0.2)
        for pid in pids:
            assert not alive(pid), f"process {pid} of the plot script still running after {sig.name}"
    # SIGHUP ignored by the caller: the plot goes on and publishes its chart.
    out_dir = tmp_path / "charts-nohup"
    p, _ = start(out_dir, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    p.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    go_file.write_text("go")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert (out_dir / "chart.png").exists()


def test_conform_report(tmp_path):
    report = tmp_path / "r.json"
    r = subprocess.run([DCPBENCH, "conform", "--planner", "megatron-pr2000", "--reference", "megatron-pr2000",
                        "--out", str(report)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(report.read_text())
    assert rep["schema"] == "dcpbench.conform.v1"
    assert rep["total"] == len(CASES) and rep["failed"] == 0 and rep["passed"] == len(CASES)
    assert {c["name"] for c in rep["cases"]} == {c["name"] for c in CASES}
    # --out -: the report alone on stdout (the table goes to stderr)
    r = subprocess.run([DCPBENCH, "conform", "--planner", "megatron-pr2000", "--reference", "megatron-pr2000",
                        "--filter", "s7", "--out", "-"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "dcpbench.conform.v1"
    assert "PASSED" in r.stderr
    # megatron-pr2000 judged against megatron-dev's exact plans: conform fails and names a micro-batch.
    r = subprocess.run([DCPBENCH, "conform", "--planner", "megatron-pr2000", "--out", str(report)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    rep = json.loads(report.read_text())
    assert rep["failed"] > 0 and any("differs from megatron-dev's" in c["reason"] for c in rep["cases"])


def test_conform_bad_input_exits_2_with_one_line(tmp_path):
    for args in (["--planner", "nope"], ["--planner", "megatron-dev", "--timeout", "0"],
                 ["--planner", "megatron-dev", "--reference", "main"], ["--planner", "megatron-dev", "--filter", "zzz"],
                 ["--planner", "megatron-dev", "--cases", str(tmp_path)], []):
        r = subprocess.run([DCPBENCH, "conform"] + args, capture_output=True, text=True)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


# ---------------------------------------------------------------- dcpbench check
def test_check_plan_files(tmp_path):
    lengths = tmp_path / "l.txt"
    lengths.write_text("400\n400\n100\n")
    # Every planner's own plan file checks valid: its summary agrees with its plan (four samples:
    # bshd gives each DP replica one per micro-batch).
    four = tmp_path / "four.txt"
    four.write_text("400\n400\n100\n37\n")
    for planner in dcpbench.planners():
        out = tmp_path / f"{planner}.json"
        r = subprocess.run([DCPBENCH, "schedule", "--lengths", str(four), "--planner", planner, "--dp", "2", "--cp",
                            "2", "--max-seqlen-per-rank", "200", "--max-seqlen", "400", "--out", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, planner + ": " + r.stderr
        r = subprocess.run([DCPBENCH, "check", "--plan", str(out), "--lengths", str(four), "--max-seqlen", "400"],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "valid" in r.stdout, planner + ": " + r.stdout + r.stderr
    plan_file = tmp_path / "p.json"
    r = subprocess.run([DCPBENCH, "schedule", "--lengths", str(lengths), "--planner", "megatron-dev", "--dp", "4",
                        "--cp", "1", "--max-seqlen-per-rank", "200", "--out", str(plan_file)], capture_output=True)
    assert r.returncode == 0
    run = lambda *a: subprocess.run([DCPBENCH, "check", "--plan", str(plan_file), "--lengths", str(lengths)] + list(a),
                                    capture_output=True, text=True)
    r = run()
    assert r.returncode == 0 and "valid" in r.stdout, r.stdout + r.stderr
    r = run("--max-seqlen-per-rank", "100")  # a plan made for another budget
    assert r.returncode == 1 and "is not the requested one" in r.stdout
    # A plan made without --max-seqlen records none: checked against the lengths, never a config mismatch.
    r = run("--max-seqlen", "400")
    assert r.returncode == 0 and "valid" in r.stdout, r.stdout + r.stderr
    r = run("--max-seqlen", "300")  # a sample of 400 tokens is longer
    assert r.returncode == 2 and "> --max-seqlen 300" in r.stderr, r.stdout + r.stderr
    # A bshd plan padded to 400 is valid for --max-seqlen 400 only: checked for 500 it is not the
    # plan asked for (pad_to != max_seqlen).
    bshd_file = tmp_path / "bshd.json"
    r = subprocess.run([DCPBENCH, "schedule", "--lengths", str(lengths), "--planner", "bshd", "--dp", "1",
                        "--cp", "2", "--max-seqlen-per-rank", "250", "--max-seqlen", "400", "--out", str(bshd_file)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    check_bshd = lambda *a: subprocess.run([DCPBENCH, "check", "--plan", str(bshd_file), "--lengths", str(lengths)] +
                                           list(a), capture_output=True, text=True)
    r = check_bshd("--max-seqlen", "400")
    assert r.returncode == 0 and "valid" in r.stdout, r.stdout + r.stderr
    # The plan records the --max-seqlen it was made with: checked against it without the flag, and
    # another value is not the plan asked for.
    r = check_bshd()
    assert r.returncode == 0 and "valid" in r.stdout, r.stdout + r.stderr
    r = check_bshd("--max-seqlen", "500")
    assert r.returncode == 1 and "is not the requested one" in r.stdout and "max_seqlen 400)" in r.stdout, r.stdout
    # A batch with a sample longer than the plan's own max_seqlen: the plan does not fit it (exit 1,
    # INVALID), not bad input blaming a --max-seqlen never given (helper-76).
    longer = tmp_path / "longer.txt"
    longer.write_text("400\n500\n100\n")
    r = subprocess.run([DCPBENCH, "check", "--plan", str(bshd_file), "--lengths", str(longer)], capture_output=True,
                       text=True)
    assert r.returncode == 1 and r.stdout == ("dcpbench check: INVALID: sample 1 (length 500) is longer than the plan's "
                                              "max_seqlen 400\n"), r.stdout + r.stderr
    # A plan without the key (written before 2026-12-07, or by another tool) takes the flag's value.
    doc = json.loads(bshd_file.read_text())
    assert doc.pop("max_seqlen") == 400
    bshd_file.write_text(json.dumps(doc))
    r = check_bshd("--max-seqlen", "500")
    assert r.returncode == 1 and "pad_to 400 != max_seqlen 500" in r.stdout, r.stdout + r.stderr
    doc = json.loads(plan_file.read_text())
    # A summary that contradicts the plan (readers take their counts from it) is invalid.
    for key, value, says in (("microbatch_count", 7, '"summary.microbatch_count" is 7, the plan has'),
                             ("cp_size_histogram", {"1": 99}, '"summary.cp_size_histogram" is {"1":99}')):
        bad = json.loads(json.dumps(doc))
        bad["summary"][key] = value
        bad_file = tmp_path / f"bad-{key}.json"
        bad_file.write_text(json.dumps(bad))
        r = subprocess.run([DCPBENCH, "check", "--plan", str(bad_file), "--lengths", str(lengths)],
                           capture_output=True, text=True)
        assert r.returncode == 1 and "INVALID: " + says in r.stdout, r.stdout + r.stderr
    doc["microbatches"][0]["groups"][0]["ranks"].append(99)  # ranks that contradict cp_size
    plan_file.write_text(json.dumps(doc))
    r = run()
    assert r.returncode == 2 and "are not the" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # Megatron's format, corrupted by the negative-index bug.
    groups = dcpbench.schedule([400, 400, 100], dp=4, cp=1, max_seqlen_per_dp_cp_rank=200)
    groups[0][0] = list(groups[0][-1])
    plan_file.write_text(json.dumps(groups))
    r = run("--dp", "4", "--cp", "1", "--max-seqlen-per-rank", "200")
    assert r.returncode == 1 and "INVALID: micro-batch 0: sample" in r.stdout, r.stdout
    r = run()  # Megatron's format needs the config
    assert r.returncode == 2 and "--dp is required" in r.stderr
    # A static planner's plan in Megatron's format at a cp that is no dynamic group size (cp 3 in
    # pools of 6 and 12, cp 6 in 12; max_seqlen a multiple of bshd's 2 x cp): `check` reads it as
    # static CP, as find_violation does; it had been INVALID "no CP group of size 3" (helper-84's
    # trial). At a power-of-two cp it is dynamic.
    odd = tmp_path / "odd.txt"
    odd.write_text("698\n873\n539\n100\n")
    for planner, dp, cp in (("packing", 2, 3), ("bshd", 2, 3), ("packing", 4, 3), ("packing", 2, 6)):
        lists = dcpbench.schedule([698, 873, 539, 100], planner=planner, dp=dp, cp=cp, max_seqlen_per_dp_cp_rank=1024,
                                  max_seqlen=1032)
        opts = ["--dp", str(dp), "--cp", str(cp), "--max-seqlen-per-rank", "1024", "--max-seqlen", "1032"]
        plan_file.write_text(json.dumps(lists))
        r = subprocess.run([DCPBENCH, "check", "--plan", str(plan_file), "--lengths", str(odd)] + opts,
                           capture_output=True, text=True)
        assert r.returncode == 0 and "valid" in r.stdout, (planner, dp, cp, r.stdout + r.stderr)
        assert dcpbench.find_violation(lists, [698, 873, 539, 100], dp=dp, cp=cp, max_seqlen_per_dp_cp_rank=1024,
                                       max_seqlen=1032) is None
    # A group of 3 in a pool of 6 among groups of 1 is no plan at all (dynamic: sizes 1, 2 and 6).
    plan_file.write_text(json.dumps([[[0], [1], [2], [3], [3], [3]]]))
    r = subprocess.run([DCPBENCH, "check", "--plan", str(plan_file), "--lengths", str(odd), "--dp", "2", "--cp", "3",
                        "--max-seqlen-per-rank", "1024"], capture_output=True, text=True)
    assert r.returncode == 1 and "no CP group of size 3" in r.stdout, r.stdout + r.stderr
    plan_file.write_text("{not json")
    r = run("--dp", "4", "--cp", "1", "--max-seqlen-per-rank", "200")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
