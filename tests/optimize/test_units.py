"""The optimization loop's decisions, without running kernels: the per-case keep rule against the noise,
early stops, change classification, the offline planner's hypotheses and composition, the log's
sections, the plot and the report. (The loop itself, on real judge runs, is in tests/optimize/test_loop.py.)"""

from __future__ import annotations

import io

import pytest

from kernelgen.optimize.changes import classify_change
from kernelgen.optimize.diagnose import diagnose
from kernelgen.optimize.decide import case_results, decide_cases, stop_reason
from kernelgen.record.oplog import render_log
from kernelgen.optimize.hypothesis import CaseView, hypotheses
from kernelgen.optimize.planner import OfflinePlanner
from kernelgen.record.plot import render_plot
from kernelgen.optimize.proposal import RoundContext
from kernelgen.record.report import build_report, render_markdown
from kernelgen.verify.results import AccuracyResult, DevicePeaks, KernelTiming, PerfCase, PerformanceResult, RunRecord
from kernelgen.spec import validate_spec_data
from kernelgen.record.state import CandidateRecord, CaseResult, OpState, RoundRecord, save_state
from tests.support.paths import DATA

SPEC = {
    "name": "broadcast", "description": "out = x + bias", "category": "broadcast",
    "inputs": [{"name": "x"}, {"name": "bias"}], "outputs": [{"name": "out"}],
    "reference": "def broadcast(x, bias):\n    return x + bias\n",
    "dtypes": ["float32"], "test_cases": [{"x": [16, 32], "bias": [32]}],
}
SECTIONS = ("### Version information", "### Bottleneck analysis", "### Change", "### Test results", "### Lessons")


def _t(ms: float, spread: float = 0.005) -> KernelTiming:
    return KernelTiming(ms=ms, ms_min=ms, ms_max=ms, spread=spread)


def _perf(kernel_ms: list[float], compare_ms: list[float] | None = None, *, spread: float = 0.005,
          frac: float | None = None, measured: bool = True, valid: bool = True) -> PerformanceResult:
    cases = []
    for i, k in enumerate(kernel_ms):
        c = PerfCase(case=i, shapes={"x": [16, 32]}, dtype="float32", bytes=4096, kernel=_t(k, spread), eager=_t(1.0),
                     speedup_eager=1.0 / k, gbps=4096 / (k * 1e-3) / 1e9, valid=valid)
        if compare_ms:
            c.compare = _t(compare_ms[i], spread)
            c.speedup_vs_compare = compare_ms[i] / k
        if frac is not None:
            c.frac_peak, c.bound = frac, "memory"
        cases.append(c)
    peaks = DevicePeaks(device_name="H100", copy_gbps=3000.0, matmul_tflops=700.0, measured_at="2026-01-01",
                        torch_version="2.11") if frac is not None else None
    return PerformanceResult(op="broadcast", kernel="k.py", device="cuda" if measured else "cpu", device_name="H100",
                             interpreter=not measured, measured=measured, torch_version="2.13", triton_version="3.9",
                             peaks=peaks, cases=cases)


# --- keep / revert, per case ----------------------------------------------------------------------
def _decide(perf: PerformanceResult):  # noqa: ANN202
    return decide_cases(case_results(perf), measured=perf.measured)


def test_keep_only_beyond_the_noise_of_each_case():
    assert _decide(_perf([0.90, 0.90], [1.0, 1.0])).keep  # x1.11 with 0.5% spread: beyond the 1% floor
    d = _decide(_perf([0.995], [1.0]))
    assert not d.keep and "no case faster beyond its noise" in d.reason
    d = _decide(_perf([0.90], [1.0], spread=0.2))  # x1.11 but 20% run-to-run spread: not a win
    assert not d.keep and d.threshold == pytest.approx(1.2)
    d = _decide(_perf([1.2], [1.0]))
    assert not d.keep and "slower" in d.reason


def test_one_case_slower_beyond_the_noise_reverts_a_faster_geomean():
    # x1.25 and x1.25 on two cases, x0.95 on the third: geomean x1.17, but a case lost 5%
    cases = case_results(_perf([0.8, 0.8, 1.0526], [1.0, 1.0, 1.0]))
    assert [c.verdict for c in cases] == ["win", "win", "loss"]
    d = decide_cases(cases, measured=True)
    assert not d.keep and d.speedup > 1.1 and "slower beyond the noise on 16x32 float32 x0.950" in d.reason


def test_invalid_or_missing_timings_are_never_kept():
    assert not _decide(_perf([0.5], [1.0], valid=False)).keep  # "wrong" at that case
    assert not _decide(_perf([0.5])).keep  # not timed against the best: unjudged
    assert [c.verdict for c in case_results(_perf([0.5]))] == ["unjudged"]


def test_interpreter_timings_decide_nothing():
    perf = _perf([0.5], [1.0], measured=False)  # x2 on the interpreter: not a measurement
    assert [c.verdict for c in case_results(perf)] == ["unjudged"]
    d = decide_cases(case_results(perf), measured=False)
    assert not d.keep and "unjudged" in d.reason and "not a measurement" in d.reason


# --- early stops -----------------------------------------------------------------------------------
def test_stop_when_target_met_or_at_the_ceiling():
    assert "target met" in stop_reason(diagnose(_perf([0.5]), 2, target=1.5))  # x2.0 >= x1.5
    assert stop_reason(diagnose(_perf([0.5]), 2, target=3.0)) is None
    assert "ceiling" in stop_reason(diagnose(_perf([0.5], frac=0.96), 2, target=None))
    assert stop_reason(diagnose(_perf([0.5], frac=0.90), 2, target=None)) is None


def test_cpu_diagnosis_says_there_are_no_peaks():
    d = diagnose(_perf([2.0], measured=False), 0, target=None)
    text = "\n".join(d.lines)
    assert "No device ceilings on the CPU interpreter" in text and "not a measurement" in text
    assert d.min_frac_peak is None and stop_reason(d) is None


# --- change type from the diff ---------------------------------------------------------------------
def test_change_classification():
    src = (DATA / "broadcast_honest.py").read_text()
    tiles = src.replace("BLOCK_M=16", "BLOCK_M=32").replace("cdiv(n_rows, 16)", "cdiv(n_rows, 32)")
    assert classify_change(src, src, "broadcast") == "none"
    assert classify_change(src, tiles, "broadcast") == "parameters"
    assert classify_change(src, src.replace("BLOCK_N=64)", "BLOCK_N=64, num_warps=8)"), "broadcast") == "parameters"
    assert classify_change(src, src.replace("mask=mask)\n    b", "mask=mask, eviction_policy='evict_first')\n    b"),
                           "broadcast") == "parameters"
    assert classify_change(src, src.replace("def broadcast(x, bias):", "def broadcast(x, bias, alpha=1.0):"),
                           "broadcast") == "interface"
    assert classify_change(src, src.replace("    return out\n", "    return out.view(-1)\n"), "broadcast") == "interface"
    assert classify_change(src, src.replace("+ b[None, :]", "- b[None, :]"), "broadcast") == "logic"
    assert classify_change(src, "def broken(:", "broadcast") == "logic"


# --- the offline planner -------------------------------------------------------------------------
SPACE = {"BLOCK_SIZE": [None, 512, 1024], "num_warps": [None, 2, 4], "grid": ["2d", "1d"],
         "eviction": ["none", "evict_first"], "autotune": [False, True]}
ROWS_SPACE = {"algorithm": [None, "looped", "online", "split"], "num_warps": [None, 4, 8], "ROW_TILE": [None, 1, 4]}


def _view(label: str, rows: int, cols: int, dtype: str, frac: float | None, bound: str = "memory") -> CaseView:
    return CaseView(label, dtype, rows, cols, 2 if dtype != "float32" else 4, frac, bound, 10.0, 5.0)


def test_hypotheses_follow_the_numbers_not_a_fixed_order():
    spec = validate_spec_data(SPEC, run_reference=False)
    long_rows = [_view("4096x50257 bfloat16", 4096, 50257, "bfloat16", 0.34)]
    [first, *_] = hypotheses(spec, "rows", ROWS_SPACE, long_rows, 132)
    assert first.knob == "algorithm" and "50257" in first.problem and "34%" in first.problem
    assert "online" in first.idea and "x2.79" in first.expected  # 95% / 34%
    few_rows = [_view("32x32000 bfloat16", 32, 32000, "bfloat16", 0.40)]
    [first, *_] = hypotheses(spec, "rows", ROWS_SPACE, few_rows, 132)
    assert "32 rows for 132 SMs" in first.problem and "100 SMs idle" in first.problem  # long rows first, then few rows
    at_ceiling = [_view("8192x8192 float32", 8192, 8192, "float32", 0.97)]
    assert hypotheses(spec, "pointwise", SPACE, at_ceiling, 132) == []  # nothing to win beyond the noise
    half = [_view("16384x4096 bfloat16", 16384, 4096, "bfloat16", 0.61), _view("16384x4096 float32", 16384, 4096, "float32", 0.98)]
    [first, *_] = hypotheses(spec, "pointwise", SPACE, half, 132)
    assert first.knob == "BLOCK_SIZE" and first.cases == ["16384x4096 bfloat16"]  # only the case behind


def test_a_reduction_with_few_kept_outputs_gets_the_split_wherever_its_family_offers_one():
    spec = validate_spec_data(SPEC, run_reference=False)
    loss = [_view("1x1073741824 float32", 1, 1 << 30, "float32", 0.01)]  # a loss down to a scalar: one kept output
    nd_space = {"split": [None, False, True], "SPLIT_PER_SM": [None, 2, 8, 16], "ROW_TILE": [None, 1024]}
    split = [h for h in hypotheses(spec, "nd", nd_space, loss, 132) if h.knob == "split"]
    assert split and "1 kept outputs for 132 SMs" in split[0].problem and "nd kernel" in split[0].problem
    assert not [h for h in hypotheses(spec, "pointwise", SPACE, loss, 132) if h.knob in ("split", "algorithm")]


def test_no_round_spends_itself_on_the_precision_round_0_already_takes():
    """Round 0 takes one TF32 product where the policy allows it (kernelgen.offline.conv.knobs); the only other
    value, three products, is never faster: no hypothesis proposes the tf32 knob."""
    from kernelgen.offline.conv.knobs import ConvKnobs

    spec = validate_spec_data(SPEC, run_reference=False)
    conv_space = {"BLOCK_M": [None, 64, 128, 256], "tf32": ConvKnobs.space()["tf32"], "num_warps": [None, 4, 8]}
    assert conv_space["tf32"] == [None, False]
    fp32 = [_view("16x16x1024x1024 float32", 16 * 1024 * 1024, 128, "float32", 0.06, "compute")]
    found = hypotheses(spec, "conv", conv_space, fp32, 132)
    assert found and not [h for h in found if h.knob == "tf32"]

class _Kern:
    def __init__(self, knobs, dispatch=None):  # noqa: ANN001
        self.knobs = dict(knobs)
        self.dispatch = list(dispatch or [])
        self.source = "# " + repr(sorted(self.knobs.items())) + repr(self.dispatch) + "\n"
        self.family = "pointwise"


def _fake_generate(spec, knobs=None, dispatch=None):  # noqa: ANN001, ANN202
    full = {k: v[0] for k, v in SPACE.items()} | dict(knobs or {})
    if full["BLOCK_SIZE"] == 1024:
        raise ValueError("over the register budget")  # a refused setting is skipped, not fatal
    if full["num_warps"] == 2:
        full["num_warps"] = None  # a knob that does not reach the code: same file as the best
    return _Kern(full, dispatch)


def _ctx(spec, state: OpState) -> RoundContext:  # noqa: ANN001
    best = state.best()
    return RoundContext(op=None, state=state, round=len(state.rounds), best=best, best_source=_fake_generate(spec).source,  # type: ignore[arg-type]
                        diagnosis=diagnose(None, 0, None))


def test_offline_planner_proposes_every_untried_value_of_one_knob():
    spec = validate_spec_data(SPEC, run_reference=False)
    planner = OfflinePlanner(spec, generate=_fake_generate, space_fn=lambda s: SPACE)
    r0 = RoundRecord(round=0, started_at="t", finished_at="t", backend="offline", kernel_file="r0.py", kept=True)
    state = OpState(name="broadcast", created_at="t", backend="offline", device="cpu", rounds=[r0], best_round=0)
    proposals = planner.propose(_ctx(spec, state))
    # unmeasured (CPU), fp32 only: the generic hypotheses, num_warps first; num_warps=2 generates the
    # best's own file again, so no time is spent on it
    assert [(p.knob, p.knob_to) for p in proposals] == [("num_warps", 4)]
    assert [k for k in SPACE if proposals[0].knobs[k] != SPACE[k][0]] == ["num_warps"]  # one knob, from the best's
    assert proposals[0].hypothesis.problem and proposals[0].hypothesis.expected
    r1 = RoundRecord(round=1, started_at="t", finished_at="t", backend="offline", kernel_file="r1.py",
                     hypothesis=proposals[0].hypothesis, knob="num_warps",
                     candidates=[CandidateRecord(label="num_warps=4", knobs=proposals[0].knobs)])
    state.rounds.append(r1)
    proposals = planner.propose(_ctx(spec, state))
    assert [(p.knob, p.knob_to) for p in proposals] == [("BLOCK_SIZE", 512)]  # num_warps exhausted
    assert "BLOCK_SIZE=1024" in planner.next_directions(_ctx(spec, state))  # the refused value is named
    # a kept round's old value is not proposed again: it was measured against the new one and lost
    r1.kept, r1.knob_from, r1.knob_to = True, None, 4
    state.best_round = 1
    r1.knobs = {**proposals[0].knobs, "BLOCK_SIZE": None, "num_warps": 4}
    ctx = RoundContext(op=None, state=state, round=2, best=r1, best_source=_fake_generate(spec, r1.knobs).source,  # type: ignore[arg-type]
                       diagnosis=diagnose(None, 0, None))
    again = [(p.knob, p.knob_to) for p in planner.propose(ctx)]
    assert again and ("num_warps", None) not in again


def _won(ci: int, dtype: str, speedup: float) -> CaseResult:
    verdict = "win" if speedup > 1.01 else "loss" if speedup < 0.99 else "neutral"
    return CaseResult(case=ci, dtype=dtype, shapes={"x": [16 * (ci + 1), 32]}, best_ms=1.0, ms=1 / speedup,
                      speedup=speedup, noise=0.01, verdict=verdict)


def test_planner_composes_a_dispatch_table_where_values_win_on_different_cases():
    from kernelgen.optimize.search import winners

    spec = validate_spec_data({**SPEC, "dtypes": ["float32", "bfloat16"]}, run_reference=False)
    planner = OfflinePlanner(spec, generate=_fake_generate, space_fn=lambda s: {**SPACE, "BLOCK_SIZE": [None, 512, 2048]})
    r0 = RoundRecord(round=0, started_at="t", finished_at="t", backend="offline", kernel_file="r0.py", kept=True)
    state = OpState(name="broadcast", created_at="t", backend="offline", device="cuda", rounds=[r0], best_round=0)
    ctx = _ctx(spec, state)
    p512, p2048 = planner.propose(ctx)
    recs = [CandidateRecord(label="BLOCK_SIZE=512", cases=[_won(0, "float32", 1.20), _won(0, "bfloat16", 0.80)]),
            CandidateRecord(label="BLOCK_SIZE=2048", cases=[_won(0, "float32", 0.90), _won(0, "bfloat16", 1.30)])]
    composed = planner.compose(ctx, [p512, p2048], recs, winners(recs))
    table = {d.dtype: d.knobs for d in composed.dispatch}
    assert table == {"float32": {"BLOCK_SIZE": 512}, "bfloat16": {"BLOCK_SIZE": 2048}}
    assert all("x1.2" in d.reason or "x1.3" in d.reason for d in composed.dispatch)
    assert "dispatch table" in composed.change
    # one value wins where it differs and loses nowhere: a plain knob change, no table
    recs = [CandidateRecord(label="BLOCK_SIZE=512", cases=[_won(0, "float32", 1.20), _won(0, "bfloat16", 1.0)]),
            CandidateRecord(label="BLOCK_SIZE=2048", cases=[_won(0, "float32", 0.90), _won(0, "bfloat16", 0.9)])]
    plain = planner.compose(ctx, [p512, p2048], recs, winners(recs))
    assert plain.knob_to == 512 and not plain.dispatch
    assert planner.compose(ctx, [p512, p2048], recs[1:], {}) is None  # nothing won: nothing composed


def test_offline_planner_reads_knobs_recorded_before_they_were_typed():
    spec = validate_spec_data(SPEC, run_reference=False)
    planner = OfflinePlanner(spec, generate=_fake_generate, space_fn=lambda s: SPACE)
    old = RoundRecord.model_validate({  # a round as state.json held it before its analysis had fields
        "round": 1, "started_at": "t", "backend": "offline", "kernel_file": "r1.py",
        "extra": {"knobs": {"BLOCK_SIZE": "auto", "num_warps": 4}, "knob": "num_warps", "from": "auto", "to": 4,
                  "decision": {"keep": False, "speedup_vs_best": 0.98, "threshold": 1.01, "reason": "slower"},
                  "lessons": ["Did not help"], "next": "eviction"}})
    knobs = planner.knobs_of(old)
    assert knobs["BLOCK_SIZE"] is None and knobs["num_warps"] == 4 and knobs["grid"] == "2d"
    assert old.decision.speedup == 0.98 and old.knob_to == 4 and old.next_directions == "eviction"


# --- log, plot, report -----------------------------------------------------------------------------
def _acc(ok: bool) -> RunRecord:
    res = AccuracyResult(op="broadcast", kernel="k.py", device="cpu", interpreter=True, compiled=True, correct=ok,
                         seeds=[0, 1, 2])
    return RunRecord(kind="accuracy", status="ok" if ok else "failed", exit_code=0 if ok else 1, duration_s=1.0, accuracy=res)


def _state() -> OpState:
    perf0 = RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0, performance=_perf([1.0], measured=False))
    perf1 = RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0,
                      performance=_perf([0.5], [1.0], measured=False))
    perf2 = RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0,
                      performance=_perf([0.6], [0.5], measured=False))
    diag = diagnose(perf0.performance, 0, None)
    rounds = [
        RoundRecord(round=0, started_at="t0", finished_at="t0", backend="offline", change="initial kernel",
                    kernel_file="rounds/round_0/broadcast_triton.py", accuracy=_acc(True), performance=perf0, kept=True),
        RoundRecord(round=1, started_at="t1", finished_at="t1", backend="offline", change="block sizes: BLOCK 16 -> 32",
                    change_type="parameters", kernel_file="rounds/round_1/broadcast_triton.py", diff="--- a\n+++ b\n",
                    accuracy=_acc(True), performance=perf1, kept=True, outcome="kept",
                    diagnosis=diag, decision=_decide(perf1.performance), lessons=["Worked: ..."],
                    next_directions="num_warps"),
        RoundRecord(round=2, started_at="t2", finished_at="t2", backend="offline", change="grid 2d -> 1d",
                    change_type="logic", kernel_file="rounds/round_2/broadcast_triton.py", diff="--- a\n+++ b\n",
                    accuracy=_acc(True), performance=perf2, outcome="reverted",
                    diagnosis=diag, decision=_decide(perf2.performance), lessons=["Did not help"]),
        RoundRecord(round=3, started_at="t3", finished_at="t3", backend="offline", change="wrong", change_type="logic",
                    kernel_file="rounds/round_3/broadcast_triton.py", accuracy=_acc(False), outcome="rejected",
                    diagnosis=diag, lessons=["Failed"]),
    ]
    return OpState(name="broadcast", created_at="t", backend="offline", device="cpu", rounds=rounds, best_round=1,
                   stopped_because="3 optimization round(s) finished (--rounds 3)")


def test_log_has_every_section_for_every_round():
    spec = validate_spec_data(SPEC, run_reference=False)
    text = render_log(_state(), spec)
    for k in range(4):
        section = text.split(f"## Round {k}", 1)[1].split("## Round", 1)[0]
        for heading in SECTIONS:
            assert heading in section, (k, heading)
    assert "## Summary" in text and "## Final summary" in text
    assert "```diff" in text and "interpreter dry run — not a measurement" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [r.split("|")[-2].strip() for r in rows] == ["kept", "kept", "reverted", "reverted (rejected)"]


def test_plot_is_a_png():
    import matplotlib.image

    png = render_plot(_state())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.image.imread(io.BytesIO(png), format="png").shape[2] in (3, 4)


def test_report_lists_every_operator(tmp_path):
    op = tmp_path / "broadcast"
    op.mkdir()
    (op / "spec.yaml").write_text("name: broadcast\n")
    save_state(op, _state())
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "spec.yaml").write_text("name: other\n")  # no state yet: listed, not fatal
    rows = build_report(tmp_path)
    assert [r.name for r in rows] == ["broadcast", "other"]
    assert rows[0].correct and rows[0].best_round == 1 and rows[0].rounds == 3 and rows[0].x_eager == pytest.approx(2.0)
    md = render_markdown(rows, tmp_path)
    assert "| broadcast | yes | 1 | x2 (dry run) |" in md and "no state.json" in md


def test_operator_selection(tmp_path, monkeypatch):
    from kernelgen.optimize.loop import select_operators

    root = tmp_path / "generated"
    for name, speed in (("done", 0.5), ("todo", 2.0)):  # "done" is x2 vs eager, "todo" x0.5
        d = root / name
        d.mkdir(parents=True)
        (d / "spec.yaml").write_text(yaml_spec(name))
        perf = RunRecord(kind="performance", status="ok", exit_code=0, duration_s=1.0, performance=_perf([speed]))
        r0 = RoundRecord(round=0, started_at="t", finished_at="t", backend="offline", kernel_file="k.py",
                         accuracy=_acc(True), performance=perf, kept=True)
        save_state(d, OpState(name=name, created_at="t", backend="offline", device="cuda", rounds=[r0], best_round=0))
    assert [o.name for o in select_operators([], cwd=tmp_path, root=root, target=1.5)] == ["todo"]
    assert [o.name for o in select_operators([], cwd=root / "done", root=root, target=1.5)] == ["done"]  # cwd wins
    assert [o.name for o in select_operators([root / "done"], target=1.5)] == ["done"]  # named: always


def yaml_spec(name: str) -> str:
    import yaml

    return yaml.safe_dump({**SPEC, "name": name, "reference": SPEC["reference"].replace("broadcast", name)})


# --- a round's idea and its change agree -----------------------------------------------------------
TILES = {"BLOCK_SIZE": [4096, 512, 8192], "num_warps": [None, 4]}


def _tiles_generate(spec, knobs=None, dispatch=None):  # noqa: ANN001, ANN202
    return _Kern({k: v[0] for k, v in TILES.items()} | dict(knobs or {}), dispatch)


def test_a_larger_tile_idea_tries_only_larger_tiles_and_its_text_is_the_change():
    spec = validate_spec_data({**SPEC, "dtypes": ["float16"]}, run_reference=False)
    planner = OfflinePlanner(spec, generate=_tiles_generate, space_fn=lambda s: TILES)
    r0 = RoundRecord(round=0, started_at="t", finished_at="t", backend="offline", kernel_file="r0.py", kept=True,
                     knobs={"BLOCK_SIZE": 4096, "num_warps": None})
    state = OpState(name="broadcast", created_at="t", backend="offline", device="cpu", rounds=[r0], best_round=0)
    ctx = RoundContext(op=None, state=state, round=1, best=r0, best_source=_tiles_generate(spec).source,  # type: ignore[arg-type]
                       diagnosis=diagnose(None, 0, None))
    (only,) = planner.propose(ctx)  # 2-byte elements: "larger BLOCK_SIZE"; 512 is smaller, so not under this idea
    assert (only.knob, only.knob_from, only.knob_to) == ("BLOCK_SIZE", 4096, 8192)
    assert only.hypothesis.idea.startswith("BLOCK_SIZE 4096 -> 8192: larger BLOCK_SIZE for 2-byte dtypes")
    assert "Idea: BLOCK_SIZE 4096 -> 8192: larger" in only.reason


def test_a_round_whose_idea_and_change_disagree_cannot_be_logged():
    from kernelgen.errors import KernelGenError
    from kernelgen.record.state import Hypothesis

    spec = validate_spec_data(SPEC, run_reference=False)
    state = _state()
    r1 = state.rounds[1]
    r1.knob, r1.knob_from, r1.knob_to = "BLOCK_SIZE", 4096, 512
    r1.hypothesis = Hypothesis(knob="BLOCK_SIZE", idea="larger BLOCK_SIZE for 2-byte dtypes, so each thread moves 16 bytes per load")
    with pytest.raises(KernelGenError, match=r"round 1 cannot be logged: its idea .* asks for a larger BLOCK_SIZE, its "
                                             r"change made it smaller \(4096 -> 512\)"):
        render_log(state, spec)
    r1.knob_to = 8192
    assert "larger BLOCK_SIZE for 2-byte dtypes" in render_log(state, spec)
    r1.hypothesis = Hypothesis(knob="num_warps", idea="more (or fewer) warps per program")
    with pytest.raises(KernelGenError, match="its idea is about num_warps, its change moves BLOCK_SIZE"):
        render_log(state, spec)


def test_unjudged_rounds_are_neither_kept_nor_reverted_and_the_log_ends_with_how_to_time_them(tmp_path):
    from kernelgen.optimize.resume import start_round

    spec = validate_spec_data(SPEC, run_reference=False)
    state = _state()
    for r in state.rounds[2:]:
        r.judged, r.kept = False, False
    state.rounds[3].accuracy = _acc(True)  # round 3 correct too: the newest correct unjudged round
    state.best_round = 0
    assert start_round(state, judged=False).round == 3 and start_round(state, judged=True).round == 0
    text = render_log(state, spec, tmp_path / "generated" / "broadcast")
    tail = text.split("## Timing the unjudged rounds", 1)[1]
    op = tmp_path / "generated" / "broadcast"
    assert f"`kernelgen bench {op}`: the shipped kernel (round 0's)" in tail
    assert f"`kernelgen bench {op} --kernel {op}/rounds/round_2/broadcast_triton.py`: round 2 (grid 2d -> 1d)" in tail
    assert f"--kernel {op}/rounds/round_3/broadcast_triton.py`: round 3" in tail and "round 1 (" not in tail
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [r.split("|")[-2].strip() for r in rows][2:] == ["unjudged (correct; no device)"] * 2
