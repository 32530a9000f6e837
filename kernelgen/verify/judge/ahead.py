"""An operator's baselines timed ahead of its kernel, in a judge-side process of their own.

PyTorch eager, torch.compile of the reference and the peer libraries do not depend on the kernel, and
they were most of a KernelBench problem's measurement: on an H100 (2026-11-27) `bench` of level 2's
Conv2D_ReLU_BiasAdd took 76 s, 51 s of them waiting on torch.compile (Inductor compiles per case and
dtype, autotuning included) and on the peers' process. A batch starts this process when it starts an
operator (kernelgen.batch.ahead), so those compiles run while the kernel is generated and checked;
the judge that measures the kernel then finds them in the baseline cache, waiting for an entry this
process still claims rather than timing it again (kernelgen.verify.judge.baselinetimes).

Nothing of the trust model moves. This process is the judge's: it never imports a candidate; it
draws the perf inputs as the judge does (the same seed); it times them with the judge's own code
(`References`, `Peers`: the peers in a child of their own, as always) under the same precision policy
and split-K setting; and its entries are keyed as the judge's are (the rendered baseline's bytes, the
spec's inputs and params, the device, the versions, the precision settings), so a judge reads only
what it would have measured itself. Timings take the device lock exclusively: compiles overlap the
kernel's work, timings never overlap another timing.

    python -m kernelgen.verify.judge.ahead SPEC_FILE [--device auto]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path
from typing import Callable

from kernelgen.devices import DeviceInfo
from kernelgen.spec import OperatorSpec
from kernelgen.verify.judge.baselines import BaselineCache, Kind
from kernelgen.verify.judge.baselinetimes import Cell, Peers, References, baseline_cache
from kernelgen.verify.judge.devicelock import device_lock
from kernelgen.verify.judge.devicememory import peers_after_kernel, release_cache
from kernelgen.verify.judge.inputs import PERF_SEED
from kernelgen.verify.judge.judge import Judge
from kernelgen.verify.judge.performance import timed_cases
from kernelgen.precision import precision_policy
from kernelgen.verify.results import PerfCase, PerformanceResult

Log = Callable[[str], None]


def baseline_judge(spec: OperatorSpec, device: DeviceInfo) -> Judge:
    """A judge over the baseline `kernelgen new` renders for `spec` (no worker started: no kernel comes)."""
    from kernelgen.verify.judge.runner import baseline_function
    from kernelgen.verify.judge.trusted import render_baseline

    source = render_baseline(spec)
    fn = baseline_function(source, f"{spec.name}_baseline.py", spec.name)
    return Judge(spec, device, fn, baseline_sha256=hashlib.sha256(source.encode("utf-8")).hexdigest())


def kinds_timed(device: DeviceInfo) -> list[Kind]:
    """What a measurement on `device` times beside the kernel: under the interpreter eager only (a dry run)."""
    return ["eager"] if device.interpreter else ["eager", "compile", "peers"]


def time_ahead(spec: OperatorSpec, device: DeviceInfo, log: Log = lambda s: None) -> int:
    """Time every baseline entry of `spec` that is neither cached nor claimed by another process into
    the baseline cache, claiming each first; the number of entries it set out to time."""
    if spec.reference is None:
        log("nothing to time ahead: the spec has no reference (its baseline is written by the LLM)")
        return 0
    with baseline_judge(spec, device) as judge:
        cache = baseline_cache(judge, fresh=False)
        assert cache is not None
        cases, dtypes = timed_cases(judge)
        cells = [(ci, case, dtype) for ci, case in enumerate(cases) for dtype in dtypes]
        todo = [(kind, ci, case, dtype) for kind in kinds_timed(device) for ci, case, dtype in cells
                if cache.get(kind, case, dtype) is None and not cache.claimed(kind, case, dtype)]
        for kind, _, case, dtype in todo:
            cache.claim(kind, case, dtype)
        try:
            if todo:
                _time(judge, cache, todo, log)
        finally:
            for kind, _, case, dtype in todo:
                cache.release(kind, case, dtype)
    return len(todo)


def _time(judge: Judge, cache: BaselineCache, todo: list[tuple[Kind, int, dict[str, list[int]], str]], log: Log) -> None:
    """Eager and torch.compile case by case in this process, the peers in their child; each claim let go
    as soon as its entry is written, so a judge waiting on one goes on before the rest are timed."""
    import torch
    import triton

    spec, device = judge.spec, judge.device
    res = PerformanceResult(op=spec.name, kernel="", device=device.kind, device_name=device.kind,
                            interpreter=device.interpreter, measured=not device.interpreter,
                            torch_version=torch.__version__, triton_version=triton.__version__)
    kinds = {kind for kind, *_ in todo}
    refs = References(judge, fresh=False, with_eager="eager" in kinds, with_compile="compile" in kinds,
                      policy=precision_policy())
    peer_cells: list[Cell] = [(ci, case, dtype) for kind, ci, case, dtype in todo if kind == "peers"]
    late = peers_after_kernel(spec, peer_cells)  # large inputs: one copy of them at a time, as the judge does
    peers = Peers(judge, cache, peer_cells, log) if peer_cells and not late else None
    try:
        cells = list(dict.fromkeys((ci, dtype) for kind, ci, _, dtype in todo if kind != "peers"))
        for ci, dtype in cells:
            case = next(c for k, i, c, d in todo if (i, d) == (ci, dtype))
            _one_case(judge, refs, res, ci, case, dtype, log)
            for kind in ("eager", "compile"):
                cache.release(kind, case, dtype)  # type: ignore[arg-type]
        if peer_cells and late:
            peers = Peers(judge, cache, peer_cells, log)
        if peers is not None:
            res.cases = [PerfCase(case=ci, shapes=case, dtype=dtype, bytes=0) for ci, case, dtype in peer_cells]
            peers.fill(res)  # writes their entries
            log(f"peers timed on {len(peer_cells)} case(s)")
    finally:
        if peers is not None:
            peers.cancel()
    for note in filter(None, [res.note]):
        log(note)


def _one_case(judge: Judge, refs: References, res: PerformanceResult, ci: int, case: dict[str, list[int]], dtype: str,
              log: Log) -> None:
    from kernelgen.spec import draw_inputs

    device = judge.device
    t0 = time.monotonic()
    with device_lock(exclusive=False, path=device.lock):  # device work: never beside another process's timing
        inputs = draw_inputs(judge.spec, case, dtype, PERF_SEED + ci, device.torch_device, on_device=not device.interpreter)
    drawn = time.monotonic() - t0
    pc = PerfCase(case=ci, shapes=case, dtype=dtype, bytes=0)
    refs.seconds.clear()
    refs.time(res, pc, inputs)
    del inputs
    release_cache(judge)
    what = [f"eager {pc.eager.ms:.4g} ms" if pc.eager else "", f"torch.compile {pc.compiled.ms:.4g} ms" if pc.compiled else ""]
    spent = ", ".join(f"{k} {v:.1f}" for k, v in {"inputs": drawn, **refs.seconds}.items())
    log(f"case {ci} {dtype}: {', '.join(filter(None, what)) or 'nothing timed'} ({time.monotonic() - t0:.1f} s: {spent})")


def main(argv: list[str] | None = None) -> int:
    from kernelgen.devices import resolve_device
    from kernelgen.errors import KernelGenError
    from kernelgen.lifetime import tie_to_parent
    from kernelgen.spec.given import read_spec

    tie_to_parent()
    ap = argparse.ArgumentParser(prog="python -m kernelgen.verify.judge.ahead")
    ap.add_argument("spec", type=Path, help="the spec file `kernelgen new` reads (YAML, or a KernelBench problem)")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        spec = read_spec(args.spec, run_reference=False).spec
        device = resolve_device(args.device)
        log = lambda s: print(f"baselines ahead: {spec.name}: {s}", flush=True)  # noqa: E731
        n = time_ahead(spec, device, log)
    except KernelGenError as e:
        print(f"baselines ahead: {args.spec}: {e.message}", flush=True)
        return 2
    print(f"baselines ahead: {spec.name}: {n} entries timed in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
