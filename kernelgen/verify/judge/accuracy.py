"""The accuracy verdict, decided in the judge's process.

For every planned case (the spec's test cases x dtypes x seeds, plus the generated variants of
kernelgen.verify.judge.inputs), the judge draws fresh inputs and runs the baseline on its own copy. The
candidate's worker **records** one call on each new input layout (kernelgen.verify.judge.recorded: a
warm-up call, then two recorded calls that must agree; a refusal names what a replay cannot stand for),
and the judge's replay worker, which never imports the candidate, **replays** that plan on the inputs
of every seed and checks what comes back:
1. **guarded**: fresh allocations poisoned with this run's fill A: outputs must match, every element
   must be written, the inputs must be unchanged;
2. **second-fill**: the same with fill B (and, on the interpreter, programs in reversed order): it must
   match, and agree with replay 1 — an honest kernel never depends on memory it did not write;
3. **plain**: fill A again, programs shuffled on the interpreter: it must match too;
4. **ablated**: every Triton launch skipped: the output must come out wrong or unwritten, or the
   answer did not come from Triton (`answer-without-triton`).
Then the candidate records the same call again on new values: a different plan means its launches
depend on values (`host-read`), and that plan's replay on them is checked too; and the kernel is called
on meta tensors of each perf case's shapes (kernelgen.verify.judge.perfshapes): it must accept the
shapes it will be timed on. The verdict counts the checks it planned before the first call: fewer done
is a failure, and "0/0" never passes.

Outputs are measured by the oracle's one rule (kernelgen.verify.judge.oracle) against the case's
float64 truth (kernelgen.verify.judge.bigtruth), eager running under the user's precision policy; the
ablated call is "right" by the same rule. Only the spec's deciding dtypes (`primary_dtypes`: float32 for a
KernelBench problem) decide the verdict; the others are checked and reported beside them, and a
kernel raising in one of them stops only that case. Every input comes from one seed base, a hash of
the kernel's bytes and the spec unless given (`kernelgen test --seed N`): the same kernel, the same
verdict. A generated case the reference itself refuses is not a valid input: it is dropped with a
note; the reference refusing a case of the spec's own is ReferenceFailedError, naming the case.
"""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.errors import ReferenceFailedError
from kernelgen.verify.judge.bigtruth import case_truth
from kernelgen.verify.judge.compare import Comparison, agree, as_tuple, compare_outputs
from kernelgen.verify.judge.devicelock import device_lock
from kernelgen.verify.judge.inputs import STALE_OFFSET, CheckCase, draw, plan_checks, seed_base, tolerance_of
from kernelgen.verify.judge.judge import Judge, KernelSource, LoadError, static_problems
from kernelgen.verify.judge.plans import CandidatePlans
from kernelgen.verify.replay.extract import ExtractError
from kernelgen.verify.worker.interpreter import LIMIT_TEXTS
from kernelgen.verify.judge.perfshapes import perf_shape_cases, probe
from kernelgen.precision import precision_policy
from kernelgen.verify.judge.precision import applied
from kernelgen.verify.judge.seedcalls import SeedCalls, make_room
from kernelgen.verify.poison import Fill, draw_fills
from kernelgen.verify.protocol import OtherValue, ProtocolError, Reply
from kernelgen.verify.results import AccuracyResult, CaseCheck, Violation

DEFAULT_SEEDS = (0, 1, 2)
COMPARED_CALLS = 3  # guarded, second-fill, plain (the ablated call is evidence, not a comparison)
REPORTED_ONLY = ("unwritten-output",)  # a comparison's finding: in a dtype that does not decide, reported


def _same_layout_copy(t: Any) -> Any:
    """A private copy with the same strides (eager's output layout follows its inputs')."""
    import torch

    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


class InvalidCase(Exception):
    """The reference refuses a case the judge generated: not a valid input for any kernel."""


class _Expected:
    """Eager's outputs on one case's inputs (under the user's precision policy) and the case's truth."""

    def __init__(self, judge: Judge, check: CheckCase, inputs: list[Any], seed: int, base: int | None):
        params = judge.spec.param_defaults
        try:
            with applied() as policy:
                self.eager = as_tuple(judge.baseline(*[_same_layout_copy(t) for t in inputs], **params))
            self.truth = case_truth(judge.baseline, inputs, params, self.eager, policy=policy,
                                    tol=tolerance_of(judge.spec, check))
        except Exception as e:  # noqa: BLE001 - the reference's own failure, whatever it is
            what = _where(check, seed, "reference")
            last = (str(e).strip().splitlines() or [""])[-1][:300]
            if check.variant:
                raise InvalidCase(f"{what}: the reference raises {type(e).__name__}: {last}") from None
            raise ReferenceFailedError(f"the reference raises {type(e).__name__} on {what}: {last}",
                                       hint=f"fix the spec's reference or this test case (`kernelgen test OP_DIR "
                                            f"--seed {base}` replays these inputs)") from None


class _Check:
    """One check in progress: the verdict it adds to, and the violations found so far."""

    def __init__(self, judge: Judge, result: AccuracyResult, log: Callable[[str], None]):
        self.judge, self.result, self.log = judge, result, log
        self.spec = judge.spec

    def violate(self, code: str, message: str, decides: bool = True) -> None:
        if not decides and code in REPORTED_ONLY:
            self.result.reported.append(f"{code}: {message}")
        elif not any(v.code == code for v in self.result.violations):
            self.result.violations.append(Violation(code=code, message=message))

    def evidence(self, reply: Reply, where: str) -> None:
        for v in (reply.report.violations if reply.report else []):
            self.violate(v.get("code", "worker-report"), f"{where}: {v.get('message', '')}")

    def outputs(self, worker: Any, reply: Reply, expected: tuple, where: str) -> list[Any] | None:
        """The returned values as judge-side tensors; None (and a violation) when they are not
        plain tensors matching the baseline's count."""
        if len(reply.outputs) != len(expected):
            self.violate("wrong-outputs", f"{where}: returned {len(reply.outputs)} value(s), the baseline {len(expected)}")
            return None
        got = []
        for value, exp in zip(reply.outputs, expected):
            if isinstance(value, OtherValue):
                self.violate("wrong-outputs", f"{where}: returned a {value.type_name}, expected a plain torch.Tensor")
                return None
            limit = 2 * exp.numel() * exp.element_size() + 4096
            try:
                got.append(self.judge.read(worker, value, max_bytes=limit))
            except ProtocolError as e:
                self.violate("wrong-outputs", f"{where}: an output the judge refuses to read: {e}")
                return None
        return got

    def record(self, check: CheckCase, seed: int, call: str, got: list[Any] | None, want: _Expected, fill: Fill | None) -> CaseCheck:
        comparisons: list[Comparison] = []
        tol = tolerance_of(self.spec, check)
        if got is None:
            comparisons.append(Comparison(passed=False, message="no usable output"))
        else:
            comparisons = compare_outputs(got, want.eager, tol, fill, truth=want.truth)
        names = [o.name for o in self.spec.outputs]
        failed = next(((names[i] if i < len(names) else str(i), c) for i, c in enumerate(comparisons) if not c.passed), None)
        first = failed[1] if failed else (comparisons[0] if comparisons else Comparison(passed=True))
        cc = CaseCheck(case=check.case, variant=check.variant, shapes=check.shapes, dtype=check.dtype, seed=seed,
                       call=call, passed=failed is None, decides=check.decides,
                       output=failed[0] if failed else (names[0] if len(names) == 1 else ""),
                       **first.model_dump(exclude={"passed"}))
        if failed and len(names) > 1:
            cc.message = f"output {failed[0]!r}: {cc.message}"
        self.result.checks.append(cc)
        self.log(("ok   " if cc.passed else "FAIL ") + f"{cc.label}" + ("" if cc.passed else f": {cc.message}"))
        if cc.unwritten:
            self.violate("unwritten-output", f"{cc.label}: {cc.unwritten} output element(s) never written "
                         f"({cc.unwritten_pattern}; first {cc.unwritten_first}, last {cc.unwritten_last})", check.decides)
        return cc

    def drop(self, check: CheckCase, why: str) -> None:
        """A generated case the reference refuses: not checked, and not counted."""
        planned = _planned(check)
        self.result.checks_expected -= planned
        if check.decides:
            self.result.checks_deciding -= planned
        self.result.skipped.append(f"{why}; not a valid input, so not checked")


def _planned(check: CheckCase) -> int:
    return len(check.seeds) * COMPARED_CALLS + (0 if check.variant else 1)


def check_accuracy(judge: Judge, kernel: KernelSource, *, seeds: tuple[int, ...] = DEFAULT_SEEDS,
                   base: int | None = None, log: Callable[[str], None] = lambda s: None) -> AccuracyResult:
    """Every planned check of `kernel`, and the verdict. `base`: the seed every input is drawn from
    (a hash of the kernel and the spec by default). WorkerFailure (timeout, crash) propagates: the
    caller records it as the run's status."""
    spec, device = judge.spec, judge.device
    base = seed_base(spec, kernel.sha256) if base is None else base
    result = AccuracyResult(op=spec.name, kernel=kernel.name, kernel_sha256=kernel.sha256, runtime=kernel.runtime,
                            device=device.kind, interpreter=device.interpreter, compiled=False, correct=False, seeds=list(seeds),
                            input_seed_base=base, deciding_dtypes=list(spec.primary_dtypes), precision=precision_policy())
    static = static_problems(spec, kernel)
    if static:
        result.violations = [Violation(code=c, message=m) for c, m in static]
        result.compiled = not any(c == "syntax-error" for c, _ in static)
        return result
    try:
        judge.replayer.extracted(kernel)  # what a replay defines of the file: nothing of it runs before this holds
    except ExtractError as e:
        result.violations = [Violation(code=e.code, message=e.message)]
        return result
    plan = plan_checks(spec, seeds=seeds, base=base, interpreter=device.interpreter, arena_bytes=judge.arena_bytes)
    probes = perf_shape_cases(spec)
    result.skipped = plan.skipped
    result.checks_expected = sum(_planned(c) for c in plan.cases) + len(probes)
    result.checks_deciding = sum(_planned(c) for c in plan.cases if c.decides) + \
        sum(1 for *_, dtype in probes if dtype in spec.deciding_dtypes)
    # The lock shared case by case: a waiting timing gets in between two (held for a whole check, 13-24 s, it kept
    # timings 10-13 s waiting). The first case compiles (ptxas: up to minutes): a warm-up, checks go on beside it
    lock = device.lock
    try:
        with device_lock(exclusive=False, path=lock):
            worker, slot = judge.load(kernel)
    except LoadError as e:
        result.error = f"import failed: {e}"
        return result
    result.compiled = True
    result.sandbox = list(judge.sandbox_notes)
    state = _Check(judge, result, log)
    for code, message in judge.load_violations.get(kernel.sha256, []):
        state.violate(code, message)
    fill_a, fill_b = draw_fills()
    plans = CandidatePlans(judge, kernel, worker, slot)
    for n, check in enumerate(plan.cases):
        with device_lock(exclusive=False, path=lock, warmup=n == 0):
            if _run_case(state, plans, check, base, f"case{n}", fill_a, fill_b):
                return _finish(result)
    result.skipped += judge.notes.get(kernel.sha256, [])  # e.g. autotune's first config only, on the interpreter
    for index, case, dtype in probes:
        with device_lock(exclusive=False, path=lock):
            found = probe(judge, worker, slot, index, case, dtype, dtype in spec.deciding_dtypes)
        if isinstance(found, str):
            result.skipped.append(found)
            result.checks_expected -= 1
            result.checks_deciding -= dtype in spec.deciding_dtypes
        else:
            result.checks.append(found)
            log(("ok   " if found.passed else "FAIL ") + found.label + ("" if found.passed else f": {found.message}"))
    return _finish(result)


def _run_case(state: _Check, plans: CandidatePlans, check: CheckCase, base: int, key: str, fill_a: Fill, fill_b: Fill) -> bool:
    """Every seed of one planned case (and the refill probe of a spec case); True when the run stops
    there: the candidate raised, or did what a replay cannot stand for, in a deciding dtype. Raised in
    another dtype, the case is reported; stopped by the interpreter's own limits, it is not checked."""
    failure = None
    try:
        for seed in check.seeds:
            failure = _run_seed(state, plans, check, seed, key, fill_a, fill_b)
            if failure:
                break
        if failure is None and not check.variant:
            failure = _stale_probe(state, plans, check, base, key, fill_a)
    except InvalidCase as e:
        state.drop(check, str(e))
    finally:
        replays = state.judge.replayer
        if replays.live():
            state.judge.drop(replays.worker(), key)
    if failure is None:
        return False
    if state.judge.device.interpreter and any(t in failure for t in LIMIT_TEXTS):
        state.drop(check, f"{_where(check, check.seeds[0], 'interpreter')}: Triton's CPU interpreter cannot run this "
                   f"kernel ({failure.strip().splitlines()[-1][:300]}): an interpreter limit, not the kernel's failure; "
                   "a GPU checks it")
        return False
    if check.decides:
        state.result.error = failure
        return True
    state.result.reported.append(f"raised (this dtype does not decide): {failure.strip().splitlines()[-1][:300]}")
    return False


def _finish(result: AccuracyResult) -> AccuracyResult:
    if result.error is None and not result.checks_deciding and any("an interpreter limit" in s for s in result.skipped):
        result.error = ("not checked here: Triton's CPU interpreter cannot run this kernel (an interpreter limit, not the "
                        "kernel's failure; see the skipped cases); a GPU checks it")
    deciding = [c for c in result.checks if c.decides]
    result.correct = (result.compiled and result.error is None and not result.violations and result.checks_deciding > 0
                      and len(deciding) == result.checks_deciding and all(c.passed for c in deciding))
    for dtype in sorted({c.dtype for c in result.checks if not c.decides}):
        failed = [c for c in result.checks if c.dtype == dtype and not c.passed]
        if failed:
            result.reported.append(f"{dtype}: {len(failed)} of {sum(c.dtype == dtype for c in result.checks)} checks "
                                   f"failed (reported beside {'/'.join(result.deciding_dtypes)}, which decides)")
    return result


def _where(check: CheckCase, seed: int, call: str) -> str:
    """The check, as every failure names it: its kind, case, input shapes, dtype, seed and call."""
    shapes = " ".join(f"{k}{v}" for k, v in check.shapes.items())
    return f"{check.variant or 'test case'} (case {check.case}) {shapes} {check.dtype} seed {seed} ({call})"


def _plan_id(state: _Check, plans: CandidatePlans, check: CheckCase, seed: int, key: str, inputs: list[Any],
             expected: tuple, *, again: bool = False) -> tuple[str | None, str | None]:
    """(the id of the plan these inputs are replayed with, None), or (None, why there is none: what the
    candidate raised, or what it did that a replay cannot stand for, which is also a violation)."""
    rec = plans.recorded(key, inputs, expected, again=again)
    where = _where(check, seed, "recording" if not again else "recording on new values")
    for code, message in rec.evidence:
        state.violate(code, f"{where}: {message}")
    if rec.error:
        return None, f"{where}: {rec.error}"
    if rec.refusal is not None:
        code, message = rec.refusal
        state.violate(code, f"{where}: {message}")
        return None, f"{where}: refused ({code}): {message}"
    assert rec.plan is not None
    return plans.hold(rec.plan), None


def _run_seed(state: _Check, plans: CandidatePlans, check: CheckCase, seed: int, key: str, fill_a: Fill, fill_b: Fill) -> str | None:
    """The four replays of one seed (the plan recorded first on a new layout); what the candidate raised
    or was refused for, if anything (the case stops there)."""
    judge, spec, device = state.judge, state.spec, state.judge.device
    try:
        inputs = draw(spec, check, seed, device.torch_device)
    except Exception as e:  # noqa: BLE001 - an init that cannot draw a generated shape
        if not check.variant:
            raise
        raise InvalidCase(f"{_where(check, seed, 'drawing')}: its inputs cannot be drawn: {e}") from None
    pristine = [t.clone() for t in inputs]
    want = _Expected(judge, check, inputs, seed, state.result.input_seed_base)
    plan_id, failure = _plan_id(state, plans, check, seed, key, inputs, want.eager)
    if plan_id is None:
        return failure
    interp = device.interpreter
    named = [("guarded", fill_a, "forward"), ("second-fill", fill_b, "reversed" if interp else "forward"),
             ("plain", fill_a, "shuffled" if interp else "forward")]
    calls = [judge.replay_request(plan_id, key, fill=fill, order=order, seed=seed, return_inputs=call == "guarded")
             for call, fill, order in named]
    calls.append(judge.replay_request(plan_id, key, fill=fill_a, seed=seed, ablate=True))
    worker = plans.replay_worker()
    sent = SeedCalls(judge, worker, key, inputs, want.eager, calls, _where(check, seed, "inputs"))
    got_by_call: dict[str, list[Any] | None] = {}
    for i, (call, fill, order) in enumerate(named):
        where = _where(check, seed, call)
        reply = sent.reply(i)
        assert reply is not None  # a call is missing only after one that failed, which returned below
        if not reply.ok:
            return f"{where}: {reply.error}"
        state.evidence(reply, where)
        got = state.outputs(worker, reply, want.eager, where)
        got_by_call[call] = got
        state.record(check, seed, call, got, want, None if call == "plain" else fill)
        if call != "plain" and got is not None and reply.report is not None and not all(reply.report.fresh):
            state.violate("output-not-fresh", f"{where}: an output is not a tensor allocated during the call "
                          "(an input, a cached or a precomputed tensor)")
        if reply.inputs_after:
            after = [judge.read(worker, r, max_bytes=worker.arena.size // 2) for r in reply.inputs_after]
            for name, before, now in zip(spec.input_names, pristine, after):
                if not _bitwise_equal(before, now):
                    state.violate("input-mutated", f"{where}: input {name!r} was modified by the call")
    a, b = got_by_call.get("guarded"), got_by_call.get("second-fill")
    if a is not None and b is not None:
        differ = sum(agree(x, y, tolerance_of(spec, check)) for x, y in zip(a, b))
        if differ:
            state.violate("unwritten-output", f"{_where(check, seed, 'two fills')}: {differ} "
                          "element(s) change with the poison fill: the kernel reads or returns memory it never wrote",
                          check.decides)
    _ablation(state, worker, check, seed, fill_a, want, sent.reply(len(named)))
    return None


def _ablation(state: _Check, worker: Any, check: CheckCase, seed: int, fill: Fill, want: _Expected, reply: Reply | None) -> None:
    """With every Triton launch a no-op, the right answer -- right by the same rule -- must not come out."""
    judge, expected = state.judge, want.eager
    if reply is None or not reply.ok or len(reply.outputs) != len(expected) or any(isinstance(v, OtherValue) for v in reply.outputs):
        return  # it raised or returned nothing usable without its kernels: as it should
    try:
        got = [judge.read(worker, v, max_bytes=2 * e.numel() * e.element_size() + 4096) for v, e in zip(reply.outputs, expected)]
    except ProtocolError:
        return
    if all(e.numel() for e in expected) and all(c.passed for c in compare_outputs(
            got, expected, tolerance_of(state.spec, check), fill, truth=want.truth)):
        state.violate("answer-without-triton", f"{_where(check, seed, 'ablated')}: with every Triton launch "
                      "turned into a no-op the output was still right, so it did not come from Triton")


def _stale_probe(state: _Check, plans: CandidatePlans, check: CheckCase, base: int, key: str, fill: Fill) -> str | None:
    """The same call on new values: recorded again (its plan must be the one recorded before: launches
    that change with the values are `host-read`), and the case's plan replayed on them. What the
    candidate raised, if it did."""
    judge, spec = state.judge, state.spec
    seed = base + STALE_OFFSET + 31 * check.case
    fresh = draw(spec, check, seed, judge.device.torch_device)
    want = _Expected(judge, check, fresh, seed, base)
    where = _where(check, seed, "refilled buffers")
    before = plans.recorded(key, fresh, want.eager).plan
    again, failure = _plan_id(state, plans, check, seed, key, fresh, want.eager, again=True)
    if again is None:
        return failure
    assert before is not None  # recorded for the case's seeds first
    plan_id = plans.hold(before)
    if again != plan_id:
        state.violate("host-read", f"{where}: the same call on new values recorded a different plan: the launches "
                      "depend on values, not on shapes: not replayable")
    worker = plans.replay_worker()
    make_room(worker, fresh, want.eager)
    judge.put(worker, key, fresh)
    reply = worker.request(judge.replay_request(plan_id, key, fill=fill, out_limit=worker.arena.size // 2))
    if not reply.ok:
        return f"{where}: {reply.error}"
    state.evidence(reply, where)
    got = state.outputs(worker, reply, want.eager, where)
    state.record(check, check.seeds[-1], "stale-probe", got, want, None)
    return None


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)) and
                    torch.equal(torch.isnan(a), torch.isnan(b)))
    return bool(torch.equal(a, b))
