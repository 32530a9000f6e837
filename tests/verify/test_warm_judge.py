"""The judge's own speed without weaker checks: its first workers (the candidate's recording worker and
the replay worker) start before the judge is ready (and are the ones used), an accuracy seed's replays
are one round trip, a layout is recorded once, and perf inputs are drawn in the workers rather than
copied, unless a worker's draw differs from the judge's."""

from __future__ import annotations

import collections

import pytest

from kernelgen.devices import DeviceInfo
from kernelgen.opdir import open_operator
from kernelgen.verify.judge import session
from kernelgen.verify.judge.accuracy import check_accuracy
from kernelgen.verify.digest import digest, same_digest
from kernelgen.verify.judge.inputs import PERF_SEED, SPECIAL_CASES, DrawnInputs
from kernelgen.verify.judge.compare import as_tuple
from kernelgen.verify.judge.judge import KernelSource
from kernelgen.verify.judge.performance import measure_performance
from kernelgen.verify.judge.runner import kernel_source, open_judge
from tests.support.broadcast import make_op_dir
from tests.support.judging import HONEST


CPU = DeviceInfo("cpu", "cpu", interpreter=True)


@pytest.fixture
def requests(monkeypatch):
    """Every request the judge sends, by op; and how many workers it started."""
    seen: collections.Counter = collections.Counter()
    request, init = session.WorkerSession.request, session.WorkerSession.__init__

    def counting(self, payload, **kw):
        seen[payload.get("op") + (" refill" if payload.get("refill") else "")] += 1  # refill: new values, same buffers
        return request(self, payload, **kw)

    def starting(self, *a, **kw):
        seen["worker started"] += 1
        init(self, *a, **kw)

    monkeypatch.setattr(session.WorkerSession, "request", counting)
    monkeypatch.setattr(session.WorkerSession, "__init__", starting)
    return seen


def test_the_workers_started_early_run_the_checks_in_batches(tmp_path, requests):
    op = open_operator(make_op_dir(tmp_path, HONEST))
    with open_judge(op, CPU) as judge:
        assert requests["worker started"] == 2  # the recording and replay spares, before the judge sized its arena
        result = check_accuracy(judge, kernel_source(op, None), seeds=(0, 1))
    assert result.correct, result.violations
    assert requests["worker started"] == 2 and requests["arena"] == 2
    n_seeds = len({(c.case, c.variant, c.dtype, c.seed) for c in result.checks})
    stale = sum(1 for c in result.checks if c.call == "stale-probe")
    assert requests["batch"] == n_seeds and requests["replay"] == stale
    # one recording per input layout (the scaled and special-value cases share their case's), and one more
    # per stale probe
    shared = lambda v: (v or "").startswith("scaled") or v in SPECIAL_CASES  # noqa: E731
    layouts = len({(c.case, c.variant, c.dtype) for c in result.checks if not shared(c.variant)})
    assert requests["record"] == layouts + stale and requests["call"] == 0


def test_perf_inputs_are_drawn_in_the_worker_unless_its_draw_differs(tmp_path, requests, monkeypatch):
    op = open_operator(make_op_dir(tmp_path, HONEST))
    with open_judge(op, CPU) as judge:
        perf = measure_performance(judge, kernel_source(op, None))
        # drawn where it is recorded and where it is replayed
        assert perf.ok and perf.cases and requests["draw"] == 2 * len(perf.cases) and requests["put"] == 0
        assert requests["draw refill"] >= len(perf.cases)  # drawn anew there before each timing request

        # inputs that do not match their recipe (as when another GPU's generator gives other numbers)
        import kernelgen.verify.judge.performance as performance

        drawn = performance.perf_inputs
        monkeypatch.setattr(performance, "perf_inputs", lambda j, *a: _nudged(j, drawn(j, *a)[0]))
        perf = measure_performance(judge, kernel_source(op, None))
    # sent instead, and right (to the replay worker: the kernel's plan on this layout is already recorded)
    assert perf.ok and requests["put"] == len(perf.cases), perf.cases[0].spot_check


def _nudged(judge, inputs):
    bumped = [t.clone() for t in inputs]
    bumped[0].view(-1)[0] += 1.0
    return DrawnInputs(bumped, *inputs.recipe), as_tuple(judge.baseline(*bumped))


def test_digest_tells_draws_apart_and_survives_garbage():
    from kernelgen.spec import draw_inputs, validate_spec_data
    from tests.support.broadcast import SMALL_BROADCAST

    spec = validate_spec_data(SMALL_BROADCAST)
    case = spec.test_cases[0]
    a = draw_inputs(spec, case, "float32", PERF_SEED, "cpu", on_device=True)
    assert same_digest(digest(draw_inputs(spec, case, "float32", PERF_SEED, "cpu", on_device=True)), digest(a))
    assert not same_digest(digest(draw_inputs(spec, case, "float32", PERF_SEED + 1, "cpu", on_device=True)), digest(a))
    for garbage in (None, 3, "x", [[1]], [["float32"]] * 2, [[1, 2, 3, ["a"]]] * 2):
        assert not same_digest(garbage, digest(a))


def test_a_worker_started_on_a_wrong_guess_of_the_device_is_not_used(tmp_path, requests):
    op = open_operator(make_op_dir(tmp_path, HONEST))
    with session.early_worker("cpu") as spare:
        assert spare is not None and requests["worker started"] == 2  # its recording and replay workers
        elsewhere = DeviceInfo("cpu", "cpu", interpreter=True, pin="1")  # not what the spare was started for
        with open_judge(op, elsewhere, spare=spare) as judge:
            assert spare.closed
            assert check_accuracy(judge, kernel_source(op, None), seeds=(0,)).correct
    assert requests["worker started"] == 4  # the judge's own recording and replay workers


def test_a_judge_given_the_early_workers_starts_none_of_its_own(tmp_path, requests):
    """`bench`, `test` and `new` start the judge's recording and replay workers before they import torch:
    the judge takes both (on an H100 a softmax `bench` waited 6 s of its 22 for a replay worker the judge
    started later)."""
    op = open_operator(make_op_dir(tmp_path, HONEST))
    with session.early_worker("cpu") as spare:
        assert spare is not None and spare.replay is not None and requests["worker started"] == 2
        early_replay = spare.replay
        with open_judge(op, CPU, spare=spare) as judge:
            assert check_accuracy(judge, kernel_source(op, None), seeds=(0,)).correct
            assert judge.replayer.worker() is early_replay
    assert requests["worker started"] == 2


def test_a_judge_of_many_untrusted_kernels_keeps_the_next_worker_warm(tmp_path, requests):
    op = open_operator(make_op_dir(tmp_path, HONEST))
    honest = HONEST.read_text(encoding="utf-8")
    with open_judge(op, CPU) as judge:
        judge.keep_spare = True  # as optimize sets it
        first, _ = judge.load(KernelSource(honest, op.file("triton").name, "llm"))
        assert requests["worker started"] == 3  # the replay spare, the one it took, and the next one already starting
        second, _ = judge.load(KernelSource(honest + "\n# another candidate\n", op.file("triton").name, "llm"))
        assert second is not first and requests["worker started"] == 4
        assert check_accuracy(judge, KernelSource(honest + "\n# another candidate\n", op.file("triton").name, "llm"),
                              seeds=(0,)).correct


def test_a_resident_case_gets_its_own_inputs_back_after_its_timing(tmp_path, requests):
    """Timing draws the inputs anew in the worker's buffers before each request (timed.py); a case the
    judge keeps resident is drawn back afterwards, so the next timing's spot check (on the case's own
    inputs, against the kept expected values) still passes."""
    from kernelgen.verify.judge.judge import RESIDENT_BYTES

    op = open_operator(make_op_dir(tmp_path, HONEST))
    with open_judge(op, CPU) as judge:
        judge.resident_bytes = RESIDENT_BYTES
        first = measure_performance(judge, kernel_source(op, None))
        rotated = requests["draw refill"]
        second = measure_performance(judge, kernel_source(op, None))
    assert first.ok and second.ok, (first.cases[0].spot_check, second.cases[0].spot_check, second.violations)
    # drawn once where it is replayed, kept resident there, and once where it is recorded (once per judge)
    assert requests["draw"] == 2 * len(first.cases)
    assert rotated >= 2 * len(first.cases)  # at least one rotation and the restore per case
