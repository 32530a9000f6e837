"""End to end on the CPU interpreter: a candidate that rebinds its process's clock or the timing
functions there, or rewrites the loop's code, changes nothing the judge records — every timing is a
replay, in a process the candidate never runs in — and is reported as `harness-tampering` by its
recording worker's seal (defence in depth); a timing the judge's own clock contradicts is asked again
and said beside the case's timing, never a verdict. The static checks are switched off where a kernel would not get past them,
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


def test_a_timing_the_judges_clock_contradicts_is_asked_again_and_noted_never_a_verdict(tmp_path, monkeypatch):
    """The replay worker's answers are rewritten on their way to the judge, 1000x shorter than the calls
    took (what a busy host looks like to the bound, and more): each disagreeing request is asked again,
    up to TRIES times, and a disagreement that persists is said beside the case's timing. It is no
    verdict: the replay worker is KernelGen's own code, and on an H100 under a batch's compiles honest
    kernels fell under the bound twice in a row."""
    from kernelgen.verify.judge.timed import TRIES

    real = WorkerSession.request
    asked = []

    def forging(self, payload, **kw):
        reply = real(self, payload, **kw)
        if payload.get("op") == "time" and payload.get("reps"):
            asked.append(payload["reps"])
            # The interpreter's call of this kernel takes ~2.5 ms, within the CPU bound's 5 ms slack on a
            # request of few repetitions: 20 ms more per call puts the disagreement beyond doubt on any host.
            time.sleep(0.02 * (payload.get("reps", 0) + payload.get("warmup", 0)))
            reply.times_ms = [t / 1000 for t in reply.times_ms]
        return reply

    monkeypatch.setattr(WorkerSession, "request", forging)
    op = make_op_dir(tmp_path, HONEST)
    record = run_performance(open_operator(op), resolve_device("cpu"), no_compile=True)
    perf = record.performance
    assert perf is not None and perf.ok and record.status != "failed", perf and perf.violations
    assert not [v for v in perf.violations if v.code in ("forged-timing", "deferred-work")], perf.violations
    notes = [c.timing_check for c in perf.cases if c.kernel]
    assert notes and all("disturbed:" in n and "judge's own clock" in n and f"{TRIES} requests in a row" in n
                         for n in notes), notes
    # every timing request of the kernel was asked TRIES times: none was taken at its first answer
    assert len(asked) % TRIES == 0 and len(asked) >= TRIES * len(notes), asked
