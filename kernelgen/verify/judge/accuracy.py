"""The accuracy verdict, decided in the judge's process.

For every planned case (the spec's test cases x dtypes x seeds, plus the generated variants of
kernelgen.verify.judge.inputs), the judge draws fresh inputs, runs the baseline on its own copy, sends the
inputs to the candidate's worker and checks what comes back:
1. a **guarded** call, fresh allocations poisoned with this run's fill A: outputs must match, every
   element must be written, the inputs must be unchanged, the outputs must be fresh;
2. the same call with **fill B** (and, on the interpreter, programs in reversed order): it must
   match, and agree with call 1 — an honest kernel never depends on memory it did not write;
3. a **plain** call, no guard at all (programs shuffled on the interpreter): it must match too, so a
   kernel that behaves only when it is watched fails;
4. an **ablated** call, every Triton launch a no-op: the output must come out wrong or unwritten,
   or the answer did not come from Triton (`answer-without-triton`).
Then the same buffers are refilled with new values and called again (`stale-output`). The verdict
counts the checks it planned before the first call: fewer done is a failure, and "0/0" never passes.
"""

from __future__ import annotations

import secrets
from typing import Any, Callable

from kernelgen.verify.judge.compare import Comparison, agree, as_tuple, compare
from kernelgen.verify.judge.inputs import STALE_OFFSET, CheckCase, draw, plan_checks, tolerance_of
from kernelgen.verify.judge.judge import ALIGN, Judge, KernelSource, LoadError, static_problems
from kernelgen.verify.poison import Fill, draw_fills
from kernelgen.verify.protocol import OtherValue, ProtocolError, Reply, storage_span
from kernelgen.verify.judge.session import WorkerFailure
from kernelgen.verify.results import AccuracyResult, CaseCheck, Violation

DEFAULT_SEEDS = (0, 1, 2)
COMPARED_CALLS = 3  # guarded, second-fill, plain (the ablated call is evidence, not a comparison)


def _same_layout_copy(t: Any) -> Any:
    """A private copy with the same strides (eager's output layout follows its inputs')."""
    import torch

    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


class _Check:
    """One check in progress: the verdict it adds to, and the violations found so far."""

    def __init__(self, judge: Judge, result: AccuracyResult, log: Callable[[str], None]):
        self.judge, self.result, self.log = judge, result, log
        self.spec = judge.spec

    def violate(self, code: str, message: str) -> None:
        if not any(v.code == code for v in self.result.violations):
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

    def record(self, check: CheckCase, seed: int, call: str, got: list[Any] | None, expected: tuple, fill: Fill | None) -> CaseCheck:
        comparisons: list[Comparison] = []
        if got is None:
            comparisons.append(Comparison(passed=False, message="no usable output"))
        else:
            comparisons = [compare(g, e, tolerance_of(self.spec, check), fill) for g, e in zip(got, expected)]
        names = [o.name for o in self.spec.outputs]
        failed = next(((names[i] if i < len(names) else str(i), c) for i, c in enumerate(comparisons) if not c.passed), None)
        first = failed[1] if failed else (comparisons[0] if comparisons else Comparison(passed=True))
        cc = CaseCheck(case=check.case, variant=check.variant, shapes=check.shapes, dtype=check.dtype, seed=seed,
                       call=call, passed=failed is None,
                       output=failed[0] if failed else (names[0] if len(names) == 1 else ""),
                       **first.model_dump(exclude={"passed"}))
        if failed and len(names) > 1:
            cc.message = f"output {failed[0]!r}: {cc.message}"
        self.result.checks.append(cc)
        self.log(("ok   " if cc.passed else "FAIL ") + f"{cc.label}" + ("" if cc.passed else f": {cc.message}"))
        if cc.unwritten:
            self.violate("unwritten-output", f"{cc.label}: {cc.unwritten} output element(s) never written "
                         f"({cc.unwritten_pattern}; first {cc.unwritten_first}, last {cc.unwritten_last})")
        return cc


def check_accuracy(judge: Judge, kernel: KernelSource, *, seeds: tuple[int, ...] = DEFAULT_SEEDS,
                   base: int | None = None, log: Callable[[str], None] = lambda s: None) -> AccuracyResult:
    """Every planned check of `kernel`, and the verdict. WorkerFailure (timeout, crash) propagates:
    the caller records it as the run's status."""
    spec, device = judge.spec, judge.device
    base = secrets.randbelow(2**30) if base is None else base
    result = AccuracyResult(op=spec.name, kernel=kernel.name, kernel_sha256=kernel.sha256, device=device.kind,
                            interpreter=device.interpreter, compiled=False, correct=False, seeds=list(seeds),
                            input_seed_base=base)
    static = static_problems(spec, kernel)
    if static:
        result.violations = [Violation(code=c, message=m) for c, m in static]
        result.compiled = not any(c == "syntax-error" for c, _ in static)
        return result
    plan = plan_checks(spec, seeds=seeds, base=base, interpreter=device.interpreter)
    result.skipped = plan.skipped
    n_spec_cases = sum(1 for c in plan.cases if not c.variant)
    result.checks_expected = sum(len(c.seeds) for c in plan.cases) * COMPARED_CALLS + n_spec_cases
    try:
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
    for n, check in enumerate(plan.cases):
        key = f"case{n}"
        for seed in check.seeds:
            if not _run_seed(state, worker, slot, check, seed, key, fill_a, fill_b):
                judge.drop(worker, key)
                return _finish(result)
        if not check.variant and not _stale_probe(state, worker, slot, check, base, key, fill_a):
            judge.drop(worker, key)
            return _finish(result)
        judge.drop(worker, key)
    return _finish(result)


def _finish(result: AccuracyResult) -> AccuracyResult:
    result.correct = (result.compiled and result.error is None and not result.violations and result.checks_expected > 0
                      and len(result.checks) == result.checks_expected and all(c.passed for c in result.checks))
    return result


class _SeedCalls:
    """The four calls of one seed (guarded, second fill, plain, ablated) and the inputs before them: in
    one batch (one round trip) when the arena holds every call's outputs side by side, else one by one
    as their replies are asked for. Each call's answer is the same either way: the same requests, the
    worker handling each as if it came alone."""

    def __init__(self, judge: Judge, worker: Any, slot: str, key: str, inputs: list[Any], expected: tuple,
                 calls: list[dict[str, Any]]):
        self.judge, self.worker, self.slot, self.key, self.calls = judge, worker, slot, key, calls
        out_bytes = sum(_aligned(2 * e.numel() * e.element_size() + 4096) for e in expected)  # what the judge reads back
        in_bytes = sum(_aligned(storage_span(t) * t.element_size()) for t in inputs)
        self.replies: list[Reply] | None = None
        if len(calls) * out_bytes + in_bytes > judge.arena_bytes:
            judge.put(worker, key, inputs)
            return
        requests, offset = [judge.stage(worker, key, inputs)], 0
        for call in calls:
            limit = out_bytes + (in_bytes if call.get("return_inputs") else 0)
            requests.append(judge.call_request(slot, key, out_offset=offset, out_limit=out_bytes, **call))
            offset += limit
        replies = judge.batch(worker, requests)
        if not replies[0].ok:
            raise WorkerFailure("error", f"the worker could not take the inputs: {replies[0].error}")
        self.replies = replies[1:]

    def reply(self, i: int) -> Reply | None:
        """Call i's reply; None when an earlier call of the batch failed and it was not made."""
        if self.replies is not None:
            return self.replies[i] if i < len(self.replies) else None
        return self.judge.call(self.worker, self.slot, self.key, out_limit=self.judge.arena_bytes // 2, **self.calls[i])


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _run_seed(state: _Check, worker: Any, slot: str, check: CheckCase, seed: int, key: str, fill_a: Fill, fill_b: Fill) -> bool:
    """The four calls of one seed; False when the candidate raised (the run stops there)."""
    judge, spec, device = state.judge, state.spec, state.judge.device
    inputs = draw(spec, check, seed, device.torch_device)
    pristine = [t.clone() for t in inputs]
    expected = as_tuple(judge.baseline(*[_same_layout_copy(t) for t in inputs], **spec.param_defaults))
    half = judge.arena_bytes // 2
    interp = device.interpreter
    named = [("guarded", fill_a, "forward"), ("second-fill", fill_b, "reversed" if interp else "forward"),
             ("plain", fill_a, "shuffled" if interp else "forward")]
    calls = [{"mode": "plain" if call == "plain" else "guarded", "fill": fill, "order": order, "seed": seed,
              "return_inputs": call == "guarded"} for call, fill, order in named]
    calls.append({"mode": "ablated", "fill": fill_a, "seed": seed})
    sent = _SeedCalls(judge, worker, slot, key, inputs, expected, calls)
    got_by_call: dict[str, list[Any] | None] = {}
    for i, (call, fill, order) in enumerate(named):
        where = f"case {check.case}{' ' + check.variant if check.variant else ''} {check.dtype} seed {seed} ({call})"
        reply = sent.reply(i)
        assert reply is not None  # a call is missing only after one that failed, which returned below
        if not reply.ok:
            state.result.error = f"{where}: {reply.error}"
            return False
        state.evidence(reply, where)
        got = state.outputs(worker, reply, expected, where)
        got_by_call[call] = got
        state.record(check, seed, call, got, expected, None if call == "plain" else fill)
        if call != "plain" and got is not None and reply.report is not None and not all(reply.report.fresh):
            state.violate("output-not-fresh", f"{where}: an output is not a tensor allocated during the call "
                          "(an input, a cached or a precomputed tensor)")
        if reply.inputs_after:
            after = [judge.read(worker, r, max_bytes=half) for r in reply.inputs_after]
            for name, before, now in zip(spec.input_names, pristine, after):
                if not _bitwise_equal(before, now):
                    state.violate("input-mutated", f"{where}: input {name!r} was modified by the call")
    a, b = got_by_call.get("guarded"), got_by_call.get("second-fill")
    if a is not None and b is not None:
        differ = sum(agree(x, y, tolerance_of(spec, check)) for x, y in zip(a, b))
        if differ:
            state.violate("unwritten-output", f"case {check.case} {check.variant} {check.dtype} seed {seed}: {differ} "
                          "element(s) change with the poison fill: the kernel reads or returns memory it never wrote")
    _ablation(state, worker, check, seed, fill_a, expected, sent.reply(len(named)))
    return True


def _ablation(state: _Check, worker: Any, check: CheckCase, seed: int, fill: Fill, expected: tuple, reply: Reply | None) -> None:
    """With every Triton launch a no-op, the right answer must not come out."""
    judge = state.judge
    if reply is None or not reply.ok or len(reply.outputs) != len(expected) or any(isinstance(v, OtherValue) for v in reply.outputs):
        return  # it raised or returned nothing usable without its kernels: as it should
    try:
        got = [judge.read(worker, v, max_bytes=2 * e.numel() * e.element_size() + 4096) for v, e in zip(reply.outputs, expected)]
    except ProtocolError:
        return
    if all(e.numel() for e in expected) and all(compare(g, e, tolerance_of(state.spec, check), fill).passed
                                                for g, e in zip(got, expected)):
        state.violate("answer-without-triton", f"case {check.case} {check.dtype} seed {seed}: with every Triton launch "
                      "turned into a no-op the output was still right, so it did not come from Triton")


def _stale_probe(state: _Check, worker: Any, slot: str, check: CheckCase, base: int, key: str, fill: Fill) -> bool:
    """The same input buffers refilled in place with new values: a result cached by address,
    shape or call count goes stale."""
    judge, spec = state.judge, state.spec
    fresh = draw(spec, check, base + STALE_OFFSET + 31 * check.case, judge.device.torch_device)
    expected = as_tuple(judge.baseline(*[_same_layout_copy(t) for t in fresh], **spec.param_defaults))
    judge.put(worker, key, fresh, refill=True)
    reply = judge.call(worker, slot, key, mode="plain", fill=fill, out_limit=judge.arena_bytes // 2)
    where = f"case {check.case} {check.dtype} (refilled buffers)"
    if not reply.ok:
        state.result.error = f"{where}: {reply.error}"
        return False
    state.evidence(reply, where)
    got = state.outputs(worker, reply, expected, where)
    earlier_passed = all(c.passed for c in state.result.checks if c.case == check.case and c.dtype == check.dtype and not c.variant)
    if not state.record(check, check.seeds[-1], "stale-probe", got, expected, None).passed and earlier_passed:
        state.violate("stale-output", f"{where}: wrong on the same buffers refilled with new values: the kernel "
                      "returns a result cached from an earlier call")
    return True


def _bitwise_equal(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0)) and
                    torch.equal(torch.isnan(a), torch.isnan(b)))
    return bool(torch.equal(a, b))
