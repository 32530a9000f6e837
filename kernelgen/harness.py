"""The trusted harness: decides whether a candidate kernel is correct and how fast it is.

It runs inside the child process that `kernelgen.verify.runner` starts (the rendered `<name>_accuracy.py`
and `<name>_performance.py` are thin entry points to it). Everything here assumes the candidate is
hostile: inputs are fresh per seed, outputs are poisoned, both call orders are tried, the wrapper's
dispatched operators are watched, and timings above the device's measured ceiling are invalid.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from kernelgen.verify.devicelock import device_lock
from kernelgen.devices import INTERPRETER_WARNING, DeviceInfo, resolve_device
from kernelgen.verify.results import (
    AccuracyResult,
    CaseCheck,
    KernelTiming,
    PerfCase,
    PerformanceResult,
    Violation,
)
from kernelgen.spec import DTYPES, Case, OperatorSpec, ToleranceSpec, load_spec, parse_init
from kernelgen.verify.staticcheck import check_source

DEFAULT_SEEDS = (0, 1, 2)
SPEC_FILE = "spec.yaml"


# --- loading ------------------------------------------------------------------------------------
def op_files(op_dir: Path, name: str) -> dict[str, Path]:
    return {kind: op_dir / f"{name}_{kind}.py" for kind in ("triton", "baseline", "accuracy", "performance")}


def load_module(path: Path, tag: str) -> Any:
    """Import a file as a fresh module (a unique name, so a candidate and the current best can be
    loaded side by side in one process)."""
    mod_name = f"kernelgen_{tag}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def _short_tb(exc: BaseException, limit: int = 6) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines[-limit:]) if len(lines) > limit else "".join(lines)
    return text.strip()[-3000:]


# --- inputs -------------------------------------------------------------------------------------
def torch_dtype(name: str):  # noqa: ANN201
    import torch

    return getattr(torch, DTYPES[name])


def make_inputs(spec: OperatorSpec, case: Case, dtype: str, seed: int, device: str, *, on_device: bool = False) -> list[Any]:
    """Fresh inputs for one case, drawn per each input's `init`. Small cases are drawn on the CPU so
    the same seed gives the same numbers on every device; large (perf) ones on the device."""
    import torch

    gen_device = device if on_device else "cpu"
    g = torch.Generator(device=gen_device)
    g.manual_seed(seed)
    out = []
    for inp in spec.inputs:
        shape = case[inp.name]
        dt = torch_dtype(spec.input_dtype(inp, dtype))
        kind, args = parse_init(inp.init)
        kw = {"generator": g, "device": gen_device}
        if kind == "randn":
            t = torch.randn(shape, **kw)
        elif kind == "rand":
            t = torch.rand(shape, **kw)
        elif kind == "uniform":
            t = torch.rand(shape, **kw) * (args[1] - args[0]) + args[0]
        elif kind == "normal":
            t = torch.randn(shape, **kw) * args[1] + args[0]
        elif kind == "randint":
            t = torch.randint(int(args[0]), int(args[1]), shape, **kw)
        elif kind == "bernoulli":
            t = torch.rand(shape, **kw) < args[0]
        else:  # ones
            t = torch.ones(shape, device=gen_device)
        out.append(t.to(dtype=dt, device=device))
    return out


# --- comparison ---------------------------------------------------------------------------------
def _fmt_val(v: float) -> str:
    return repr(v) if math.isfinite(v) else str(v)


def compare(got: Any, expected: Any, tol: ToleranceSpec) -> dict[str, Any]:
    """Compare one output tensor; returns CaseCheck fields (passed, errors, worst index, message).

    Floats pass where |got - expected| <= atol + rtol * |expected|, where both are NaN, or where
    both are the same infinity. NaN or Inf where the baseline is finite never passes; neither does
    a finite value where the baseline is infinite. Integers and booleans must match exactly.
    Elements still holding the guard's poison bits are counted as never written (`unwritten`).
    """
    import torch

    from kernelgen.verify.guard import poisoned_mask

    if type(got) is not torch.Tensor:  # exact: a Tensor subclass could lie through __torch_function__
        return {"passed": False, "message": f"returned {type(got).__name__}, expected a plain torch.Tensor"}
    if tuple(got.shape) != tuple(expected.shape):
        return {"passed": False, "message": f"shape {list(got.shape)} but the baseline gives {list(expected.shape)}"}
    if got.dtype != expected.dtype:
        return {"passed": False, "message": f"dtype {got.dtype} but the baseline gives {expected.dtype}"}
    if got.device != expected.device:
        return {"passed": False, "message": f"device {got.device} but the baseline gives {expected.device}"}
    total = expected.numel()
    if total == 0:
        return {"passed": True, "total": 0}
    got = got.detach()
    expected = expected.detach()
    exact = not expected.dtype.is_floating_point
    unwritten_mask = poisoned_mask(got)
    if exact:
        bad = got != expected  # in the integer dtype itself: float64 would round above 2**53
        g = got.to(torch.float64)
        e = expected.to(torch.float64)
        diff = (g - e).abs()
        bound = torch.zeros_like(diff)
    else:
        g = got.to(torch.float64)
        e = expected.to(torch.float64)
        diff = (g - e).abs()
        bound = tol.atol + tol.rtol * e.abs()
        e_inf = torch.isinf(e)
        within = (diff <= bound) & ~e_inf  # an infinite baseline would make the bound infinite
        ok = within | (torch.isnan(g) & torch.isnan(e)) | (e_inf & (g == e))
        bad = ~ok
    n_bad = int(bad.sum())
    finite = torch.isfinite(diff)
    max_abs = float(diff[finite].max()) if bool(finite.any()) else float("nan")
    rel = diff / e.abs().clamp_min(1e-12)
    max_rel = float(rel[finite].max()) if bool(finite.any()) else float("nan")
    fields: dict[str, Any] = {
        "passed": n_bad == 0,
        "max_abs_err": max_abs if math.isfinite(max_abs) else None,
        "max_rel_err": max_rel if math.isfinite(max_rel) else None,
        "mismatches": n_bad,
        "total": total,
    }
    if n_bad:
        nonfinite_bad = bad & ~torch.isfinite(g) & torch.isfinite(e)
        n_nonfinite = int(nonfinite_bad.sum())
        n_unwritten = int((bad & unwritten_mask).sum()) if unwritten_mask is not None else 0
        fields["unwritten"] = n_unwritten
        fields["nonfinite"] = n_nonfinite
        # Worst = largest excess over the allowed bound; NaN/Inf mismatches rank first.
        excess = torch.where(torch.isfinite(diff), diff - bound, torch.full_like(diff, float("inf")))
        excess = torch.where(bad, excess, torch.full_like(excess, -float("inf")))
        flat = int(torch.argmax(excess.reshape(-1)))
        idx = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(expected.shape))] if expected.dim() else []
        gv, ev = float(g.reshape(-1)[flat]), float(e.reshape(-1)[flat])
        fields.update(worst_index=idx, got=gv if math.isfinite(gv) else None, expected=ev if math.isfinite(ev) else None)
        tol_txt = "exact match required" if exact else f"atol {tol.atol:g}, rtol {tol.rtol:g}"
        parts = []
        if n_nonfinite:
            parts.append(f"{n_nonfinite} NaN/Inf where the baseline is finite")
        if n_unwritten:
            parts.append(f"{n_unwritten} never written (still hold the poison the harness filled the output with)")
        n_finite_bad = int((bad & finite).sum())
        if n_finite_bad:
            parts.append(f"{n_finite_bad} finite but off: max abs err {max_abs:.3g}, max rel err {max_rel:.3g}")
        fields["message"] = (
            f"{n_bad} of {total} elements differ ({'; '.join(parts)}); "
            f"worst at {idx}: got {_fmt_val(gv)}, expected {_fmt_val(ev)} ({tol_txt})"
        )
    return fields


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if type(x) in (tuple, list) else (x,)


def _case_label(case: Case) -> str:
    return " ".join(f"{k}{list(v)}" for k, v in case.items())


# --- integrity of what the harness relies on --------------------------------------------------
class IntegritySnapshot:
    """Identity of every attribute of the namespaces the verdict depends on (torch, torch.Tensor,
    torch.nn.functional, math, builtins, Triton's launch classes and KernelGen's own harness
    modules), taken before the candidate is imported. A candidate that monkeypatches any of them
    (say `torch.equal = lambda *a: True`, or `torch.Tensor.__ne__`) is caught on the first check
    after its import or after any call, even if its patch would undo itself later."""

    def __init__(self) -> None:
        import builtins

        import torch
        import torch.nn.functional as F  # noqa: N812

        from kernelgen.verify import guard, results, staticcheck
        from kernelgen.verify.guard import _launch_runners

        try:  # imported lazily by the first guarded launch, and it rewraps torch.manual_seed & co.
            import torch._dynamo  # noqa: F401
        except Exception:  # noqa: BLE001 - pragma: no cover
            pass

        spaces: list[tuple[str, Any, bool]] = [
            ("torch", torch, False), ("torch.nn.functional", F, False), ("math", math, False),
            ("builtins", builtins, False), ("torch.Tensor", torch.Tensor, True),
            ("torch.Tensor base", torch.Tensor.__mro__[1], True),
            ("kernelgen.harness", sys.modules[__name__], False), ("kernelgen.verify.guard", guard, False),
            ("kernelgen.verify.results", results, False), ("kernelgen.verify.staticcheck", staticcheck, False),
        ]
        spaces += [(f"triton {cls.__name__}", cls, True) for cls in _launch_runners()]
        spaces += [(f"kernelgen.verify.results.{n}", getattr(results, n), True) for n in ("AccuracyResult", "CaseCheck", "Violation")]
        self._spaces = [(label, obj, closed, dict(vars(obj))) for label, obj, closed in spaces]

    # Attributes Python and PyTorch add or rewrite on their own: copyreg caches `__slotnames__` on
    # a class the first time it is pickled (torch.compile's cache keys pickle Triton's JITFunction:
    # seen on an H200 with torch 2.11, a false "tampering" verdict before this list existed).
    BENIGN = frozenset({"_", "__slotnames__", "_abc_impl", "__abstractmethods__", "__parameters__"})

    def rebase(self) -> None:
        """Accept the current state as the new reference, after trusted code (torch.compile of the
        reference) ran; candidate calls are always checked before this."""
        self._spaces = [(label, obj, closed, dict(vars(obj))) for label, obj, closed, _ in self._spaces]

    def changed(self) -> list[str]:
        found = []
        for label, obj, closed, before in self._spaces:
            now = vars(obj)
            for k, v in before.items():
                if k in self.BENIGN:
                    continue
                if k not in now:
                    found.append(f"{label}.{k} deleted")
                elif now[k] is not v:
                    found.append(f"{label}.{k} replaced")
            if closed:
                found += [f"{label}.{k} added" for k in now if k not in before and k not in self.BENIGN]
        return found


def _tamper_violation(changed: list[str], when: str) -> Violation:
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return Violation(code="harness-tampering", message=f"{when}: {shown} (the candidate monkeypatched what the harness checks with)")


def _seed_base() -> int:
    """Inputs are drawn from seeds offset by a per-run random base (recorded in the result), so a
    candidate cannot reproduce them at import time and return precomputed answers."""
    import secrets

    fixed = os.environ.get("KERNELGEN_SEED_BASE")
    return int(fixed) if fixed and fixed.isdigit() else secrets.randbelow(2**30)


# --- accuracy -----------------------------------------------------------------------------------
def check_accuracy(
    op_dir: Path,
    kernel_path: Path | None = None,
    *,
    device: DeviceInfo | None = None,
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    log: Callable[[str], None] = lambda s: None,
) -> AccuracyResult:
    """Run every test case x dtype x seed, alternating call order per seed, under the guard; then
    call once more on the last seed's input buffers refilled in place with new values, so a result
    cached from an earlier call (keyed by address, shape, or call count) fails on fresh inputs."""
    import torch

    from kernelgen.verify.guard import call_guarded, install_launch_hooks

    torch_equal = torch.equal  # captured before the candidate is imported
    device = device or resolve_device("auto")
    spec = load_spec(op_dir / SPEC_FILE, run_reference=False)
    files = op_files(op_dir, spec.name)
    kernel_path = Path(kernel_path or files["triton"])
    base = _seed_base()
    result = AccuracyResult(
        op=spec.name, kernel=str(kernel_path), device=device.kind, interpreter=device.interpreter,
        compiled=False, correct=False, seeds=list(seeds), input_seed_base=base,
    )
    static = check_source(kernel_path.read_text(encoding="utf-8"), spec.name, baseline_module=files["baseline"].stem)
    if static:
        result.violations = static
        result.compiled = not any(v.code == "syntax-error" for v in static)
        return result

    def violate(code: str, message: str) -> None:
        if not any(x.code == code for x in result.violations):
            result.violations.append(Violation(code=code, message=message))

    install_launch_hooks()
    integrity = IntegritySnapshot()
    try:
        baseline = getattr(load_module(files["baseline"], "baseline"), spec.name)
        candidate = getattr(load_module(kernel_path, "candidate"), spec.name)
    except BaseException as e:  # noqa: BLE001 - the candidate's import failing is a result, not a crash
        result.error = f"import failed: {_short_tb(e)}"
        return result
    result.compiled = True
    changed = integrity.changed()
    if changed:
        result.violations.append(_tamper_violation(changed, "on import"))
        return result
    params = spec.param_defaults
    warmed: set[tuple[int, str]] = set()
    outputs_seen: list[Any] = []  # kept alive: no later output can reuse an earlier one's address
    last_inputs: dict[tuple[int, str], list[Any]] = {}

    def check_call(ci: int, case: Case, dtype: str, seed: int, order: str, label: str, inputs: list[Any],
                   *, stale_probe: bool = False) -> bool:
        """One guarded call compared against the baseline; False when the run must stop."""
        snapshot = [t.clone() for t in inputs]
        ref_inputs = [t.clone() for t in inputs]
        try:
            if order == "baseline-first":
                expected = baseline(*ref_inputs, **params)
            got, report = call_guarded(candidate, inputs, params, salt=seed)
            tampered = integrity.changed()  # before anything the candidate could have patched runs
            if order == "candidate-first":
                expected = baseline(*ref_inputs, **params)
        except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from a candidate too
            result.error = f"{label}: the kernel raised {_short_tb(e)}"
            return False
        if tampered:
            result.violations.append(_tamper_violation(tampered, f"after the call [{label}]"))
            return False
        for v in report.violations:
            violate(v.code, f"{v.message} [{label}]")
        for name, before, after in zip(spec.input_names, snapshot, inputs):
            if not torch_equal(before, after):
                violate("input-mutated", f"input {name!r} was modified by the call [{label}]")
        got_t, exp_t = _as_tuple(got), _as_tuple(expected)
        if len(got_t) != len(exp_t):
            result.checks.append(CaseCheck(case=ci, shapes=case, dtype=dtype, seed=seed, order=order, passed=False,
                                           message=f"{label}: returned {len(got_t)} output(s), the baseline {len(exp_t)}"))
            return True
        for oi, (gt, et) in enumerate(zip(got_t, exp_t)):
            out_name = spec.outputs[oi].name if oi < len(spec.outputs) else f"output {oi}"
            if type(gt) is torch.Tensor and gt.numel():
                if not report.is_fresh(gt):
                    violate("output-not-fresh", f"output {out_name!r} is not a tensor allocated during the call "
                            f"(an input, a cached or a precomputed tensor) [{label}]")
                outputs_seen.append(gt)
            fields = compare(gt, et, spec.tolerance_for(dtype))
            if fields.get("unwritten"):
                violate("unwritten-output", f"output {out_name!r}: {fields['unwritten']} of {fields['total']} elements were "
                        f"never written (they still hold the poison) [{label}]")
            if stale_probe and not fields["passed"] and all(
                    c.passed for c in result.checks if c.case == ci and c.dtype == dtype and c.output == out_name):
                violate("stale-output", f"output {out_name!r} is wrong when the same input buffers are refilled with new "
                        f"values: the result depends on an earlier call [{label}]")
            if not fields["passed"]:
                fields["message"] = f"{label}, output {out_name!r}: {fields.get('message', '')}"
            result.checks.append(CaseCheck(case=ci, shapes=case, dtype=dtype, seed=seed, order=order, output=out_name, **fields))
            log(("PASS " if fields["passed"] else "FAIL ") + (fields.get("message") or f"{label}, output {out_name!r}"))
        if device.kind == "cuda":
            torch.cuda.synchronize()
        return True

    def run_checks() -> None:
        for si, seed in enumerate(seeds):
            order = "candidate-first" if si % 2 == 0 else "baseline-first"
            for ci, case in enumerate(spec.test_cases):
                for dtype in spec.dtypes:
                    label = f"case {ci} {_case_label(case)} {dtype} seed {seed} ({order})"
                    if (ci, dtype) not in warmed:
                        # Unchecked first call on other data: JIT compilation and autotuning (which
                        # times configs with PyTorch ops of its own) happen here, outside the guard.
                        warm_in = make_inputs(spec, case, dtype, base + 10_000 + ci, device.torch_device)
                        try:
                            candidate(*warm_in, **params)
                        except BaseException as e:  # noqa: BLE001
                            result.error = f"{label}: the kernel raised {_short_tb(e)}"
                            return
                        warmed.add((ci, dtype))
                        changed = integrity.changed()
                        if changed:
                            result.violations.append(_tamper_violation(changed, f"after the warm-up call [{label}]"))
                            return
                    inputs = make_inputs(spec, case, dtype, base + seed * 7919 + ci, device.torch_device)
                    if not check_call(ci, case, dtype, seed, order, label, inputs):
                        return
                    last_inputs[(ci, dtype)] = inputs
        # Stale-result probe: the same input tensors (same addresses, shapes, dtypes), new values.
        probe_seed = (seeds[-1] + 1) if seeds else 0
        for (ci, dtype), inputs in last_inputs.items():
            case = spec.test_cases[ci]
            fresh = make_inputs(spec, case, dtype, base + 20_000 + 31 * ci, device.torch_device)
            for buf, new in zip(inputs, fresh):
                buf.copy_(new)
            label = f"case {ci} {_case_label(case)} {dtype} refilled-buffers probe"
            if not check_call(ci, case, dtype, probe_seed, "candidate-first", label, inputs, stale_probe=True):
                return

    # Checks may overlap other processes' checks on a shared device, never a timing.
    with device_lock(exclusive=False):
        run_checks()
    result.correct = bool(result.checks) and all(c.passed for c in result.checks) and not result.violations and result.error is None
    return result


# --- performance --------------------------------------------------------------------------------
def min_bytes(inputs: list[Any], outputs: tuple) -> int:
    """Each input read once, each output written once: the traffic no kernel can avoid."""
    return sum(t.numel() * t.element_size() for t in list(inputs) + list(outputs))


def _timer(device: DeviceInfo) -> Callable[[Callable[[], Any]], KernelTiming]:
    """The timing strategy for this device: do_bench (events, L2 flushed, median) on a GPU; a
    wall clock under the interpreter, where the numbers are a dry run and say so."""
    if device.interpreter:
        def wall(fn: Callable[[], Any]) -> KernelTiming:
            fn()
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            times.sort()
            med = times[1]
            return KernelTiming(ms=med, ms_min=times[0], ms_max=times[-1], spread=(times[-1] - times[0]) / med if med else 0.0)
        return wall

    import triton.testing

    def bench(fn: Callable[[], Any]) -> KernelTiming:
        q = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.0, 0.2, 0.5, 0.8, 1.0])
        lo, p20, med, p80, hi = (float(x) for x in q)
        return KernelTiming(ms=med, ms_min=lo, ms_max=hi, spread=(p80 - p20) / med if med else 0.0)
    return bench


def host_overhead_us(fn: Callable[[], Any], device: DeviceInfo, calls: int = 50) -> float:
    """Microseconds of host time per call, without waiting for the device: 50 calls stay far
    below the launch queue's depth (~1000), so the loop measures Python and launch cost only."""
    from kernelgen.devices import synchronize

    fn()
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    synchronize(device)
    return (t1 - t0) / calls * 1e6


def measure_performance(
    op_dir: Path,
    kernel_path: Path | None = None,
    *,
    compare_path: Path | None = None,
    device: DeviceInfo | None = None,
    with_compile: bool | None = None,
    with_eager: bool = True,
    dtypes: list[str] | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> PerformanceResult:
    """Time the kernel (and the current best, when given) against eager and torch.compile."""
    import torch
    import triton

    from kernelgen.devices import device_name
    from kernelgen.verify.guard import call_guarded, counting_launches, install_launch_hooks

    device = device or resolve_device("auto")
    spec = load_spec(op_dir / SPEC_FILE, run_reference=False)
    files = op_files(op_dir, spec.name)
    kernel_path = Path(kernel_path or files["triton"])
    res = PerformanceResult(
        op=spec.name, kernel=str(kernel_path), device=device.kind, device_name=device_name(device),
        interpreter=device.interpreter, measured=not device.interpreter, torch_version=torch.__version__,
        triton_version=triton.__version__,
    )
    static = check_source(kernel_path.read_text(encoding="utf-8"), spec.name, baseline_module=files["baseline"].stem)
    if static:
        res.violations = static
        return res
    install_launch_hooks()
    integrity = IntegritySnapshot()
    try:
        reference = getattr(load_module(files["baseline"], "baseline"), spec.name)
        kernel = getattr(load_module(kernel_path, "candidate"), spec.name)
        best = getattr(load_module(Path(compare_path), "best"), spec.name) if compare_path else None
    except BaseException as e:  # noqa: BLE001
        res.error = f"import failed: {_short_tb(e)}"
        return res
    changed = integrity.changed()
    if changed:
        res.violations.append(_tamper_violation(changed, "on import"))
        return res
    bench = _timer(device)
    if device.interpreter:
        # perf_cases are sized for a GPU (hundreds of MB); the interpreter would take hours.
        cases = spec.test_cases[:1]
        dtypes = (dtypes or spec.effective_perf_dtypes)[:1]
        res.note = INTERPRETER_WARNING + " Dry run on test_cases[0] instead of perf_cases; torch.compile not timed."
        with_compile = False if with_compile is None else with_compile
    else:
        cases = spec.effective_perf_cases
        dtypes = dtypes or spec.effective_perf_dtypes
        with_compile = True if with_compile is None else with_compile
        if device.kind == "cuda":
            from kernelgen.verify.peaks import load_or_measure

            with device_lock(exclusive=True):
                res.peaks = load_or_measure(lambda fn: bench(fn).ms)
    params = spec.param_defaults
    compiled_ref = torch.compile(reference) if with_compile else None
    if compiled_ref is not None:
        # Compile the reference for every case before any timing: compilation is seconds of CPU
        # work that need not hold the device lock, and Dynamo's caches settle before the checks.
        for ci, case in enumerate(cases):
            for dtype in dtypes:
                with device_lock(exclusive=False):  # it runs on the device: never during a timing
                    inputs = make_inputs(spec, case, dtype, 1234 + ci, device.torch_device, on_device=not device.interpreter)
                    try:
                        compiled_ref(*inputs, **params)
                    except Exception as e:  # noqa: BLE001 - a compile failure is reported, not fatal
                        res.note += f" torch.compile failed on case {ci} {dtype}: {type(e).__name__}: {str(e)[:200]}."
                    del inputs
        integrity.rebase()  # the candidate's import was checked above; Dynamo's own changes are not its
    for ci, case in enumerate(cases):
        for dtype in dtypes:
            with device_lock(exclusive=True):  # nothing else on the device while timing
                inputs = make_inputs(spec, case, dtype, 1234 + ci, device.torch_device, on_device=not device.interpreter)
                pc = PerfCase(case=ci, shapes=case, dtype=dtype, bytes=0, flops=spec.flop_count(case))
                try:
                    expected = _as_tuple(reference(*inputs, **params))
                    got, report = call_guarded(kernel, inputs, params)
                except BaseException as e:  # noqa: BLE001
                    res.error = f"case {ci} {dtype}: {_short_tb(e)}"
                    return res
                changed = integrity.changed()
                if changed:
                    res.violations.append(_tamper_violation(changed, f"after the call [case {ci} {dtype}]"))
                    return res
                for v in report.violations:
                    res.violations.append(v)
                pc.bytes = min_bytes(inputs, expected)
                # The kernel must be right at this shape too: a kernel correct only on small tests
                # would otherwise be timed as a win.
                got_t = _as_tuple(got)
                if len(got_t) != len(expected):
                    pc.valid = False
                    pc.invalid_reason = f"returned {len(got_t)} output(s), the baseline {len(expected)}"
                for gt, et in zip(got_t, expected):
                    if type(gt) is torch.Tensor and gt.numel() and not report.is_fresh(gt):
                        res.violations.append(Violation(code="output-not-fresh", message=f"case {ci} {dtype}: an output is not a tensor allocated during the call"))
                    fields = compare(gt, et, spec.tolerance_for(dtype))
                    if not fields["passed"]:
                        pc.spot_check = fields.get("message", "mismatch")
                        pc.valid = False
                        pc.invalid_reason = f"wrong at the perf shape: {pc.spot_check}"
                del got, got_t, report
                # The timed calls run without the dispatch guard (it would distort the time), so they
                # are held to account afterwards: every call must launch Triton, and the last call's
                # output must still be right (a kernel that skips work once it has seen the inputs
                # fails here, or, if it returns a cached answer, runs beyond the device ceiling).
                calls, last = [0], [None]

                def timed() -> None:
                    calls[0] += 1
                    last[0] = kernel(*inputs, **params)

                try:
                    with counting_launches() as launches:
                        pc.kernel = bench(timed)
                except BaseException as e:  # noqa: BLE001
                    res.error = f"case {ci} {dtype} (timed): {_short_tb(e)}"
                    return res
                if launches[0] < calls[0]:
                    res.violations.append(Violation(code="timed-call-no-launch", message=(
                        f"case {ci} {dtype}: {calls[0]} timed calls launched only {launches[0]} Triton kernels; "
                        "a call that launches nothing returned a cached or host-computed result")))
                for gt, et in zip(_as_tuple(last[0]), expected):
                    fields = compare(gt, et, spec.tolerance_for(dtype))
                    if not fields["passed"]:
                        res.violations.append(Violation(code="timed-output-wrong", message=(
                            f"case {ci} {dtype}: the output of the last timed call is wrong: {fields.get('message', '')}")))
                del expected
                last[0] = None
                if not device.interpreter:
                    pc.host_us = host_overhead_us(lambda: kernel(*inputs, **params), device)
                changed = integrity.changed()
                if changed:
                    res.violations.append(_tamper_violation(changed, f"after the timed calls [case {ci} {dtype}]"))
                    return res
                if with_eager:
                    pc.eager = bench(lambda: reference(*inputs, **params))
                    if not device.interpreter:
                        pc.eager_host_us = host_overhead_us(lambda: reference(*inputs, **params), device)
                if best is not None:
                    pc.compare = bench(lambda: best(*inputs, **params))
                    pc.speedup_vs_compare = pc.compare.ms / pc.kernel.ms
                if compiled_ref is not None:
                    try:
                        compiled_ref(*inputs, **params)  # compile outside the timed region
                        pc.compiled = bench(lambda: compiled_ref(*inputs, **params))
                    except Exception as e:  # noqa: BLE001 - a compile failure is reported, not fatal
                        res.note += f" torch.compile failed on case {ci} {dtype}: {type(e).__name__}."
                    # Dynamo and Inductor install caches and wrappers of their own; the candidate's calls
                    # for this case were all checked above, so their state becomes the new reference.
                    integrity.rebase()
                secs = pc.kernel.ms * 1e-3
                pc.gbps = pc.bytes / secs / 1e9
                pc.tflops = pc.flops / secs / 1e12 if pc.flops else None
                pc.speedup_eager = pc.eager.ms / pc.kernel.ms if pc.eager else None
                pc.speedup_compile = pc.compiled.ms / pc.kernel.ms if pc.compiled else None
                _judge_against_peaks(pc, res)
                res.cases.append(pc)
                log(_perf_line(pc, res))
                del inputs
                if device.kind == "cuda":
                    torch.cuda.empty_cache()
    return res


def _judge_against_peaks(pc: PerfCase, res: PerformanceResult) -> None:
    """Classify memory/compute bound and reject physically impossible timings."""
    peaks = res.peaks
    if peaks is None:
        return
    ridge = (peaks.matmul_tflops * 1e12) / (peaks.copy_gbps * 1e9) if peaks.matmul_tflops else None
    intensity = (pc.flops / pc.bytes) if pc.flops and pc.bytes else 0.0
    if ridge and intensity > ridge:
        pc.bound = "compute"
        pc.frac_peak = (pc.tflops or 0) / peaks.matmul_tflops
    else:
        pc.bound = "memory"
        pc.frac_peak = (pc.gbps or 0) / peaks.copy_gbps
    # 5% above the measured ceiling is beyond noise: the kernel skipped work or hid it from the timer.
    if pc.gbps and pc.gbps > 1.05 * peaks.copy_gbps:
        pc.valid = False
        pc.invalid_reason = f"{pc.gbps:.0f} GB/s exceeds the measured copy bandwidth {peaks.copy_gbps:.0f} GB/s: not a speedup, a measurement that cannot be true"
    if pc.tflops and peaks.matmul_tflops and pc.tflops > 1.05 * peaks.matmul_tflops:
        pc.valid = False
        pc.invalid_reason = f"{pc.tflops:.0f} TFLOP/s exceeds the measured matmul peak {peaks.matmul_tflops:.0f}"


def _perf_line(pc: PerfCase, res: PerformanceResult) -> str:
    parts = [pc.label, *pc.facts()]
    if pc.compare:
        parts.append(f"current best {pc.compare.ms:.4g} ms (x{pc.speedup_vs_compare:.3f})")
    if not res.measured:
        parts.append("[interpreter: not a measurement]")
    return ", ".join(parts)


# --- script entry points (used by the rendered <name>_accuracy.py / <name>_performance.py) -----
def _parser(what: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=f"KernelGen {what} check (trusted harness)")
    p.add_argument("--kernel", type=Path, help="kernel file to check instead of <name>_triton.py")
    p.add_argument("--device", default=os.environ.get("KERNELGEN_DEVICE", "auto"), choices=["auto", "cuda", "npu", "cpu"])
    p.add_argument("--json", type=Path, help="write the typed result here")
    return p


def _prepare_device(choice: str) -> DeviceInfo:
    device = resolve_device(choice)
    if device.interpreter:
        # Must be set before the kernel module is imported: @triton.jit reads it at decoration.
        os.environ["TRITON_INTERPRET"] = "1"
    return device


def _write_json(path: Path | None, model: Any) -> None:
    if path is not None:
        from kernelgen.fsutil import atomic_write

        atomic_write(path, model.model_dump_json(indent=2))


def accuracy_main(op_dir: Path, argv: list[str] | None = None) -> int:
    p = _parser("accuracy")
    p.add_argument("--seeds", type=int, default=len(DEFAULT_SEEDS), help="number of fresh random seeds")
    p.add_argument("-v", "--verbose", action="store_true", help="print every check, not only failures")
    args = p.parse_args(argv)
    device = _prepare_device(args.device)
    seeds = tuple(range(args.seeds))

    def log(line: str) -> None:
        if args.verbose or line.startswith("FAIL"):
            print(line, flush=True)

    try:
        result = check_accuracy(Path(op_dir), args.kernel, device=device, seeds=seeds, log=log)
    except BaseException as e:  # noqa: BLE001 - whatever a candidate provoked, the parent gets a verdict
        result = AccuracyResult(op=Path(op_dir).name, kernel=str(args.kernel or op_dir), device=device.kind,
                                interpreter=device.interpreter, compiled=False, correct=False, seeds=list(seeds),
                                error=f"the harness stopped: {_short_tb(e)}")
    _write_json(args.json, result)
    for v in result.violations:
        print(f"VIOLATION {v.code}: {v.message}")
    if result.error:
        print(f"ERROR {result.error}")
    verdict = "PASS" if result.correct else "FAIL"
    print(f"{verdict} {result.op} on {result.device}: {result.summary()} "
          f"({len(spec_cases(result))} case x dtype combinations, {len(seeds)} seeds, both call orders)")
    return 0 if result.correct else 1


def spec_cases(result: AccuracyResult) -> set[tuple[int, str]]:
    return {(c.case, c.dtype) for c in result.checks}


def performance_main(op_dir: Path, argv: list[str] | None = None) -> int:
    p = _parser("performance")
    p.add_argument("--compare", type=Path, help="also time this kernel (the current best) in the same process")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    p.add_argument("--no-eager", action="store_true", help="skip the eager baseline (the optimizer reuses an earlier timing)")
    p.add_argument("--dtype", action="append", help="time only these dtypes")
    args = p.parse_args(argv)
    device = _prepare_device(args.device)
    if device.interpreter:
        print("WARNING: " + INTERPRETER_WARNING, flush=True)
    try:
        res = measure_performance(
            Path(op_dir), args.kernel, compare_path=args.compare, device=device,
            with_compile=False if args.no_compile else None, with_eager=not args.no_eager, dtypes=args.dtype, log=lambda s: print(s, flush=True),
        )
    except BaseException as e:  # noqa: BLE001
        import torch
        import triton

        res = PerformanceResult(op=Path(op_dir).name, kernel=str(args.kernel or op_dir), device=device.kind,
                                device_name=device.kind, interpreter=device.interpreter, measured=False,
                                torch_version=torch.__version__, triton_version=triton.__version__,
                                error=f"the harness stopped: {_short_tb(e)}")
    _write_json(args.json, res)
    for v in res.violations:
        print(f"VIOLATION {v.code}: {v.message}")
    if res.error:
        print(f"ERROR {res.error}")
    g = res.geomean("speedup_eager")
    if g:
        print(f"geomean speedup vs eager: x{g:.3f}" + ("" if res.measured else " [interpreter: not a measurement]"))
    return 0 if res.ok else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m kernelgen.harness accuracy|performance OP_DIR [options]`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] not in {"accuracy", "performance"}:
        print("usage: python -m kernelgen.harness accuracy|performance OP_DIR [options]", file=sys.stderr)
        return 2
    fn = accuracy_main if argv[0] == "accuracy" else performance_main
    return fn(Path(argv[1]), argv[2:])


if __name__ == "__main__":
    sys.exit(main())

