"""Memory that fits: an operator's peak GPU memory is estimated before it starts, it starts on a GPU
only where that fits, a large one alone, and one that runs out of memory beside others runs again
alone; if it still does not fit, it is reported as `memory` (what it needs, what the GPU has), never
as a wrong kernel, and left out of the pass rate and fast_p. The GPU's memory and the steps' out-of-
memory errors are simulated here (a fake free-memory reader; a step wrapper that prints PyTorch's
message)."""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from pathlib import Path

from kernelgen.batch.footprint import CONTEXT_BYTES, PROCESSES, memory_need
from kernelgen.batch.job import JobRequest
from kernelgen.batch.local import LocalEngine
from kernelgen.batch.placement import GiB, JobQueue
from kernelgen.batch.report import build_report, summary_text
from kernelgen.batch.step import WRAPPER_ENV
from kernelgen.batch.targets import Target
from kernelgen.spec import validate_spec_data

SHARE0, SHARE1 = Target("cuda", "0", 0, share=0), Target("cuda", "0", 1, share=1)
GPU1 = Target("cuda", "1", 2, share=0)
MiB = 1 << 20  # a [512, 512] float32 tensor
CONTEXTS = PROCESSES * CONTEXT_BYTES


def _spec(reference: str, shape: list[int]):  # noqa: ANN202
    return validate_spec_data({"name": "op", "inputs": [{"name": "x"}], "outputs": [{"name": "out"}],
                               "dtypes": ["float32"], "test_cases": [{"x": [4, 4]}], "perf_cases": [{"x": shape}],
                               "reference": reference})


def test_the_need_counts_judge_worker_peers_truth_and_comparison():
    """x + 1 at [512, 512] float32: inputs I = outputs O = 1 MiB, eager's peak P = 2 MiB, the float64
    truth's peak P64 = 4 MiB (the input upcast, its output), the comparison's four float64 copies of the
    output 8 MiB. Timing: the judge I + O + max(P - I, P64, O + 8, a timed output read on rotated inputs:
    P + O + 8 + P64 / 8) = 13.5, the worker I + 3 O = 4, the peers P + O + P64 / 8 (a truth for a peer off
    eager) = 3.5; and three CUDA contexts."""
    simple = _spec("def op(x):\n    return x + 1\n", [512, 512])
    assert memory_need(simple) == int(21 * MiB) + CONTEXTS
    # a reduction: the truth (the input upcast: 2 MiB) outweighs the comparison of one element
    view = _spec("def op(x):\n    return x.view(-1).sum()\n", [512, 512])
    assert memory_need(view) == (MiB + 4 + 2 * MiB + 8) + (MiB + 12) + (MiB + 4 + 4 + (2 * MiB + 8) // 8) + CONTEXTS
    # a chain's temporaries are eager's: x, one temporary, out alive at once
    chain = _spec("def op(x):\n    return (x + 1) * 2 + 3\n", [512, 512])
    assert memory_need(chain) > memory_need(simple)
    assert memory_need(_spec("def op(x):\n    return torch.nonzero(x)\n", [512, 512])) is None  # no meta kernel: no estimate


class Gpu:
    """A simulated 80 GiB GPU whose free memory the test sets."""

    def __init__(self, free_gib: float):
        self.free = int(free_gib * GiB)

    def __call__(self, device_id: str) -> tuple[int, int]:
        return self.free, 80 * GiB


def _job(name: str, need_gib: float | None = None, spec_file: str | None = None, out: str = "out") -> JobRequest:
    return JobRequest(name=name, spec_file=spec_file or f"{name}.yaml", spec_label=name, out_root=out, log_file=f"{out}/{name}.log",
                      need_bytes=None if need_gib is None else int(need_gib * GiB))


def test_an_operator_waits_for_room_while_a_smaller_one_goes_first():
    gpu = Gpu(free_gib=30)
    waits: list[str] = []
    queue = JobQueue([_job("a", 30), _job("b", 35), _job("c", 10)], probe=gpu, poll_s=0.02,
                     on_wait=lambda job, target, msg: waits.append(f"{job.name}: {msg}"))
    assert queue.take(SHARE0).name == "a"  # an idle GPU: it starts, whatever the free memory says
    assert queue.take(SHARE1).name == "c"  # b (35 GiB) does not fit beside a (30 GiB free): c (10 GiB) goes first
    taken: list[str] = []
    waiter = threading.Thread(target=lambda: taken.append(queue.take(SHARE1).name))
    waiter.start()
    time.sleep(0.2)
    assert taken == [] and waits == ["b: waiting for room on cuda:0#1: it needs about 35.0 GiB, 30.0 GiB free and 2 "
                                     "operator(s) of the batch running there"]
    gpu.free = 70 * GiB
    queue.done(SHARE0, a := _job("a", 30))
    waiter.join(timeout=5)
    assert taken == ["b"]  # 35 <= min(70 free, 80 - 10 reserved by c)
    assert queue.take(SHARE0) is None and a.name == "a"  # empty: the worker is done


def test_a_large_operator_runs_alone_and_nothing_starts_beside_it():
    queue = JobQueue([_job("small", 5), _job("large", 50), _job("other", 5)], probe=Gpu(free_gib=79), poll_s=0.02)
    assert queue.take(SHARE0).name == "small"
    assert queue.take(SHARE1).name == "other"  # large (over half the GPU) needs the GPU idle: other goes first
    assert queue.take(GPU1).name == "large"  # an idle GPU: the large one starts there, alone
    assert queue.take(Target("cuda", "1", 3, share=1)) is None  # nothing left; nothing would start beside it anyway


def test_the_head_of_the_queue_claims_a_gpu_instead_of_starving():
    gpu = Gpu(free_gib=79)
    queue = JobQueue([_job("s0", 5), _job("large", 50), *[_job(f"s{i}", 5) for i in (1, 2, 3)]], probe=gpu, poll_s=0.02,
                     claim_after_s=0.1)
    assert queue.take(SHARE0).name == "s0"
    assert queue.take(SHARE1).name == "s1"  # large needs the GPU idle: the small ones go first ...
    queue.done(SHARE1, _job("s1", 5))
    time.sleep(0.15)
    got: list[str] = []
    threading.Thread(target=lambda: got.append(queue.take(SHARE1).name)).start()
    time.sleep(0.2)
    assert got == []  # ... until large has waited claim_after_s: then the GPU takes nothing else
    queue.done(SHARE0, _job("s0", 5))
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
    assert got == ["large"]


def test_an_operator_retried_alone_waits_for_an_idle_gpu():
    queue = JobQueue([_job("a", 5), _job("b", 5)], probe=Gpu(free_gib=79), poll_s=0.02)
    a, b = queue.take(SHARE0), queue.take(SHARE1)
    assert queue.had_company(a) and queue.had_company(b)
    queue.done(SHARE1, b)
    queue.retry_alone(b.model_copy(update={"attempt": 2}))
    got: list[str] = []
    threading.Thread(target=lambda: got.append(queue.take(SHARE1).name)).start()
    time.sleep(0.2)
    assert got == []  # a still runs on that GPU
    queue.done(SHARE0, a)
    time.sleep(0.2)
    assert got == ["b"] and not queue.had_company(b)


def test_a_retry_alone_waits_for_the_idle_gpus_memory_to_drain():
    """A GPU with nothing of the batch running can still hold what the operators before it held until
    their processes end: a retry waits for its need to be free there, for at most drain_s."""
    gpu = Gpu(free_gib=10)  # 70 GiB still held by an operator's processes that are ending
    queue = JobQueue([_job("a", 40)], probe=gpu, poll_s=0.02, drain_s=5)
    a = queue.take(SHARE0)
    queue.done(SHARE0, a)
    queue.retry_alone(a.model_copy(update={"attempt": 2}))
    got: list[str] = []
    threading.Thread(target=lambda: got.append(queue.take(SHARE0).name)).start()
    time.sleep(0.3)
    assert got == []  # idle, but 10 GiB free of the 40 it needs
    gpu.free = 75 * GiB
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
    assert got == ["a"]
    # and what never drains (not the batch's) holds a retry up only drain_s
    stuck = JobQueue([_job("b", 40)], probe=Gpu(free_gib=10), poll_s=0.02, drain_s=0.3)
    b = stuck.take(SHARE0)
    stuck.done(SHARE0, b)
    stuck.retry_alone(b.model_copy(update={"attempt": 2}))
    t0 = time.monotonic()
    assert stuck.take(SHARE0).name == "b" and 0.25 <= time.monotonic() - t0 < 5


def test_an_operator_larger_than_the_gpu_starts_when_it_is_alone():
    queue = JobQueue([_job("huge", 500)], probe=Gpu(free_gib=79), poll_s=0.01)
    assert queue.take(SHARE0).name == "huge"


def test_no_probe_no_gate():
    queue = JobQueue([_job("a", 500), _job("b", 500)], probe=None)
    assert [queue.take(SHARE0).name, queue.take(SHARE1).name] == ["a", "b"]


# --- through the engine: a simulated out-of-memory error -------------------------------------------
OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 11.55 GiB is free.")
STEPS = textwrap.dedent('''
    """Stands in for `python -c BOOT STEP ARGS...` (kernelgen.batch.step): logs when each step runs, prints
    PyTorch's out-of-memory error for the operators named in OOM_OPS, and otherwise succeeds."""
    import json, os, sys, time
    step, args = sys.argv[4], sys.argv[5:]
    target = args[0]
    name = os.path.splitext(os.path.basename(target))[0] if step == "new" else os.path.basename(target)
    log = os.environ["STEPS_LOG"]
    with open(log, "a") as f:
        f.write(json.dumps(["start", name, step, time.monotonic()]) + "\\n")
    if step == "new":
        os.makedirs(os.path.join(args[args.index("--out") + 1], name), exist_ok=True)
    time.sleep(0.6)
    with open(log, "a") as f:
        f.write(json.dumps(["end", name, step, time.monotonic()]) + "\\n")
    if name in os.environ.get("OOM_OPS", "").split(","):
        print("• " + name + ": checking accuracy of rounds/round_0/x_triton.py on cuda", flush=True)
        print("Traceback (most recent call last):")
        print(os.environ["OOM_LINE"])
        sys.exit(1)
    print("• " + name + ": generating the kernel (offline)", flush=True)
''')


def _overlaps(log: Path, name: str, since: float) -> list[str]:
    """The other operators that had a step running while a step of `name` started at `since` or later ran."""
    spans, started = [], {}
    for kind, op, step, t in (json.loads(ln) for ln in log.read_text().splitlines()):
        if kind == "start":
            started[(op, step)] = t
        else:
            spans.append((op, started.pop((op, step)), t))
    own = [(s, e) for op, s, e in spans if op == name and s >= since]
    return sorted({op for op, s, e in spans if op != name and any(s < oe and e > os_ for os_, oe in own)})


def test_out_of_memory_beside_others_is_retried_alone_then_reported_as_memory(tmp_path, monkeypatch):
    steps = tmp_path / "steps.py"
    steps.write_text(STEPS)
    log = tmp_path / "steps.log"
    monkeypatch.setenv(WRAPPER_ENV, f"{sys.executable} {steps}")
    monkeypatch.setenv("STEPS_LOG", str(log))
    monkeypatch.setenv("OOM_OPS", "b")
    monkeypatch.setenv("OOM_LINE", OOM_LINE)
    out = tmp_path / "out"
    jobs = [JobRequest(name=n, spec_file=str(tmp_path / f"{n}.yaml"), spec_label=f"{n}.yaml", out_root=str(out),
                       log_file=str(out / "_batch" / "logs" / f"{n}.log"), rounds=0, device="cuda", spec_data={},
                       need_bytes=10 * GiB) for n in ("a", "b", "c")]
    gpu = Gpu(free_gib=70)
    engine = LocalEngine([SHARE0, SHARE1], out / "_batch", probe=gpu)
    events: list[str] = []
    results = {r.name: r for r in engine.run(jobs, lambda e: events.append(f"{e.op} {e.kind} {e.message}"))}

    assert results["a"].status == results["c"].status == "finished"
    b = results["b"]
    assert b.status == "memory" and b.attempts == 2, b
    assert b.reason.startswith("needs about 10.0 GiB, this GPU (cuda:0") and "has 80.0 GiB, 70.0 GiB free now" in b.reason
    assert "out of memory also alone on an idle GPU; out of GPU memory in `kernelgen new`: " + OOM_LINE in b.reason
    assert any(e.startswith("b step ") and "it runs again alone on an idle GPU" in e for e in events), events
    # the second attempt ran with nothing else of the batch on the GPU
    starts = [json.loads(ln) for ln in log.read_text().splitlines() if json.loads(ln)[:2] == ["start", "b"]]
    assert len(starts) == 2 and _overlaps(log, "b", starts[1][3]) == []
    assert not (out / "b" / "batch_job.json").exists()  # not a verdict: a rerun tries it again

    report = build_report(out, list(results.values()), engine.describe())
    s = report.summary
    assert (s.operators, s.correct, s.memory) == (2, 2, 1)  # not counted as a wrong kernel
    assert s.fast_p["eager"]["0"] == 1.0  # fast_0: the correct share of the operators judged
    assert "pass rate 2/2 (100%)" in summary_text(report) and "1 more did not fit their GPU's memory" in summary_text(report)
    assert next(r for r in report.operators if r.name == "b").status == "memory"


def test_the_baselines_timed_ahead_are_counted_and_the_next_ones_start_only_where_they_fit():
    """x + 1 at [512, 512] float32 (I = O = 1 MiB, P = 2 MiB): timed ahead, the baselines' process holds
    P + O = 3 MiB beside the judge and worker, and its peers' child P + O + P64 / 8 = 3.5 MiB (counted for
    both: 7 MiB): one more context.
    The next operator's baselines are timed ahead beside a running one only where they fit the GPU, once."""
    from kernelgen.batch.footprint import ahead_bytes

    simple = _spec("def op(x):\n    return x + 1\n", [512, 512])
    assert memory_need(simple, ahead=True) == memory_need(simple) + 3 * MiB + CONTEXT_BYTES
    assert ahead_bytes(simple) == 7 * MiB + 2 * CONTEXT_BYTES

    def ahead(name: str, need_gib: float, ahead_gib: float) -> JobRequest:
        return _job(name, need_gib).model_copy(update={"ahead": True, "ahead_bytes": int(ahead_gib * GiB)})

    gpu = Gpu(free_gib=60)
    queue = JobQueue([ahead("a", 30, 1), ahead("b", 30, 40), ahead("c", 5, 1)], probe=gpu, poll_s=0.02)
    a = queue.take(SHARE0)
    assert a is not None and a.name == "a"
    assert queue.upcoming(SHARE0, a) is None  # b's 40 GiB of baselines do not fit the 60 - 30 GiB left beside a
    gpu.free = int(79 * GiB)
    nxt = queue.upcoming(SHARE0, a)
    assert nxt is not None and nxt.name == "b"
    third = queue.upcoming(SHARE0, a)
    assert third is not None and third.name == "c"
    assert queue.upcoming(SHARE0, a) is None  # each once
    assert JobQueue([_job("plain", 1)], probe=gpu).upcoming(SHARE0, a) is None  # not timed ahead at all
