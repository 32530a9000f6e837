"""End to end on the CPU interpreter: a candidate that rebinds its process's clock or the timing
functions there, or rewrites the loop's code, changes nothing the judge records — every timing is a
replay, in a process the candidate never runs in — and is reported as `harness-tampering` by its
recording worker's seal (defence in depth); a worker whose answer claims less time than the judge's own
clock saw is `forged-timing`. The static checks are switched off where a kernel would not get past them,
to show the runtime holds alone."""

from __future__ import annotations

import json
import time

from kernelgen.devices import resolve_device
from kernelgen.opdir import open_operator
from kernelgen.verify.judge.runner import run_performance
from kernelgen.verify.judge.session import WorkerSession
from tests.support.broadcast import make_op_dir
from tests.support.judging import ADVERSARIAL, HONEST, run_harness


def test_a_slowed_clock_and_rebound_timing_functions_change_nothing_recorded(tmp_path):
    """The rebinding is harness-tampering (the worker's modules are sealed), and changes nothing recorded
    anyway: the loop uses the clock and functions it captured."""
    op = make_op_dir(tmp_path, ADVERSARIAL / "forge_cpu_clock.py")
    out = tmp_path / "perf.json"
    r = run_harness("performance", op, "--no-compile", "--json", str(out), bypass_static=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "VIOLATION harness-tampering" in r.stdout and "kernelgen.verify.timing.run_reps replaced" in r.stdout, r.stdout
    case = json.loads(out.read_text())["performance"]["cases"][0]
    # An interpreter call of this kernel takes milliseconds; the forged clock would have said microseconds.
    assert case["kernel"]["ms"] > 0.2, case["kernel"]
    assert case["timing_check"].startswith("claimed")


def test_a_rewritten_timing_loop_is_named_and_times_nothing(tmp_path):
    """The rewrite reaches only the recording worker's copy of the loop: its seal names it."""
    op = make_op_dir(tmp_path, ADVERSARIAL / "forge_timing_code.py")
    r = run_harness("performance", op, "--no-compile", bypass_static=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "VIOLATION harness-tampering" in r.stdout and "run_reps's code" in r.stdout, r.stdout


def test_a_worker_claiming_impossible_times_is_forged_timing(tmp_path, monkeypatch):
    """The worker's answers are rewritten on their way to the judge (as a candidate that owned the
    worker could): 1000x shorter than the calls took."""
    real = WorkerSession.request

    def forging(self, payload, **kw):
        reply = real(self, payload, **kw)
        if payload.get("op") == "time":
            # The interpreter's call of this kernel takes ~2.5 ms, within the CPU bound's 5 ms slack on a
            # request of few repetitions: 20 ms more per call puts the lie beyond doubt on any host.
            time.sleep(0.02 * (payload.get("reps", 0) + payload.get("warmup", 0)))
            reply.times_ms = [t / 1000 for t in reply.times_ms]
        return reply

    monkeypatch.setattr(WorkerSession, "request", forging)
    op = make_op_dir(tmp_path, HONEST)
    record = run_performance(open_operator(op), resolve_device("cpu"), no_compile=True)
    perf = record.performance
    assert record.status == "failed" and perf is not None and not perf.ok
    forged = [v for v in perf.violations if v.code == "forged-timing"]
    assert forged and "judge's own clock" in forged[0].message, perf.violations
