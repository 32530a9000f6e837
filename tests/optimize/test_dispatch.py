"""Per-case keep with the real offline generator and the real judge (CPU interpreter).

A value that is faster on fp32 and slower on the 2-byte dtype must not be thrown away (one geomean
rule did that on an H200: broadcast's BLOCK 512 took fp32 to 100% of copy and dropped bf16 to 61%):
it becomes a dispatch table, and the dispatched kernel passes the full accuracy check in both dtypes,
strided and odd-shaped inputs included. float16 stands in for bfloat16 here: Triton's interpreter has
no bfloat16 arithmetic, and the routing is by dtype, so the path exercised is the same.
The timings are synthetic (CaseResult), since the interpreter's decide nothing; the planner, the
generator, the file and the accuracy verdict are real.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelgen.devices import resolve_device
from kernelgen.fsutil import now
from kernelgen.opdir import OperatorDir
from kernelgen.optimize.diagnose import diagnose
from kernelgen.optimize.planner import OfflinePlanner
from kernelgen.optimize.proposal import RoundContext
from kernelgen.optimize.search import winners
from kernelgen.record.state import CandidateRecord, CaseResult, OpState, RoundRecord
from kernelgen.spec import load_spec, validate_spec_data
from kernelgen.verify.judge.judge import KernelSource
from kernelgen.verify.judge.runner import run_accuracy
from kernelgen.verify.judge.trusted import render_baseline, write_trusted_files
from tests.support.paths import SPECS

SPEC = {
    "name": "broadcast", "description": "out = x + bias", "category": "broadcast",
    "inputs": [{"name": "x"}, {"name": "bias"}], "outputs": [{"name": "out"}],
    "reference": "def broadcast(x, bias):\n    return x + bias\n",
    "dtypes": ["float32", "float16"], "perf_dtypes": ["float32", "float16"],
    "test_cases": [{"x": [16, 32], "bias": [32]}, {"x": [3, 5, 7], "bias": [7]}, {"x": [33], "bias": [33]}],
    "perf_cases": [{"x": [64, 512], "bias": [512]}],
}


def _result(dtype: str, speedup: float) -> CaseResult:
    verdict = "win" if speedup > 1.02 else "loss" if speedup < 0.98 else "neutral"
    return CaseResult(case=0, dtype=dtype, shapes={"x": [64, 512], "bias": [512]}, best_ms=0.010, ms=0.010 / speedup,
                      speedup=speedup, noise=0.01, verdict=verdict)


def _context(spec, source: str) -> RoundContext:  # noqa: ANN001
    r0 = RoundRecord(round=0, started_at="t", finished_at="t", backend="offline", kernel_file="r0.py", kept=True)
    state = OpState(name=spec.name, created_at="t", backend="offline", device="cuda", rounds=[r0], best_round=0)
    return RoundContext(op=None, state=state, round=1, best=r0, best_source=source,  # type: ignore[arg-type]
                        diagnosis=diagnose(None, 0, None))


@pytest.mark.slow
def test_faster_on_fp32_slower_on_half_yields_a_dispatch_table_correct_in_both(tmp_path: Path):
    from kernelgen.offline import generate_kernel

    spec_path = tmp_path / "broadcast.yaml"
    spec_path.write_text(yaml.safe_dump(SPEC))
    spec = load_spec(spec_path)
    base = generate_kernel(spec)
    planner = OfflinePlanner(spec, sm_count=132)
    ctx = _context(spec, base.source)
    proposals = planner.propose(ctx)
    assert proposals, planner.skipped
    first = proposals[0]
    records = [CandidateRecord(label=f"{p.knob}={p.knob_to!r}", knobs=p.knobs) for p in proposals]
    records[0].cases = [_result("float32", 1.25), _result("float16", 0.80)]  # faster on fp32, slower on half
    for r in records[1:]:
        r.cases = [_result("float32", 0.90), _result("float16", 0.90)]
    composed = planner.compose(ctx, proposals, records, winners(records))
    assert composed is not None and "dispatch table" in composed.change
    assert [(d.dtype, d.knobs) for d in composed.dispatch] == [("float32", {first.knob: first.knob_to})]
    assert "x1.250" in composed.dispatch[0].reason
    assert composed.source != base.source and composed.source != first.source
    assert "x1.250" in composed.source  # the table is in the file, one commented line per entry

    op = OperatorDir(tmp_path / "generated" / "broadcast", spec)
    write_trusted_files(op.path, spec, spec_path.read_text(), render_baseline(spec))
    op.file("triton").write_text(base.source)
    record = run_accuracy(op, resolve_device("cpu"), source=KernelSource(composed.source, op.file("triton").name, "offline"))
    acc = record.accuracy
    assert record.status == "ok" and acc is not None and acc.correct, record.stderr_tail
    checked = {c.dtype for c in acc.checks if c.passed}
    assert checked >= {"float32", "float16"}  # both routes ran, and were right
    assert any(c.variant in ("strided", "transposed", "sliced") for c in acc.checks)  # strided inputs too


def test_values_the_rules_rule_out_are_recorded_untimed_with_the_reason():
    spec = validate_spec_data(yaml.safe_load((SPECS / "softmax.yaml").read_text()),
                              run_reference=False)
    from kernelgen.offline import generate_kernel

    planner = OfflinePlanner(spec, sm_count=132)
    proposals = planner.propose(_context(spec, generate_kernel(spec).source))
    timed = {p.knob_to for p in proposals}
    pruned = {c.label: c.pruned for c in planner.pruned}
    assert proposals[0].knob == "algorithm" and "online" in timed  # 2048x32768 rows: longer than a register block
    # split-row reductions pay a second launch: not worth timing where every SM already has rows
    assert "algorithm='split'" in pruned and "132 SMs" in pruned["algorithm='split'"]
    assert "split" not in timed and not timed & {c.knobs["algorithm"] for c in planner.pruned}
    # with fewer rows than SMs the same value is timed
    few = validate_spec_data({**spec.model_dump(exclude_none=True), "perf_cases": [{"x": [32, 32000]}]}, run_reference=False)
    planner = OfflinePlanner(few, sm_count=132)
    timed = {p.knob_to for p in planner.propose(_context(few, generate_kernel(few).source))}
    assert "split" in timed
