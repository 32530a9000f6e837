"""`optimization_log.md`: rendered from the operator's state (never edited in place), with a summary
table on top, one section per round following the record template (version information, bottleneck
analysis, change, test results, lessons) and a final summary."""

from __future__ import annotations

import re
from pathlib import Path

from kernelgen import __version__
from kernelgen.errors import KernelGenError
from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.fsutil import atomic_write
from kernelgen.render import render
from kernelgen.verify.results import PerfCase, RunRecord
from kernelgen.spec import OperatorSpec
from kernelgen.record.analysis import analyse_operator, latest_peaks, latest_tf32, needs_ceilings, with_ceilings
from kernelgen.record.display import tf32_label
from kernelgen.record.state import CaseResult, OpState, RefreshRecord, RoundRecord, save_state
from kernelgen.record.text import clip

LOG_FILE = "optimization_log.md"


def _fmt(x: float | None, spec: str = ".2f", suffix: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{suffix}"


def accuracy_text(run: RunRecord | None) -> str:
    if run is None:
        return "- Accuracy: not run."
    if run.status in ("timeout", "crash"):
        return f"- Accuracy: **{run.status}** — {run.describe()}"
    acc = run.accuracy
    if acc is None:
        return f"- Accuracy: **error** — {run.describe()}"
    verdict = "**PASS**" if acc.correct else "**FAIL**"
    lines = [f"- Accuracy: {verdict} — {acc.summary()} ({len(acc.seeds)} seeds per case and generated strided, sliced, "
             f"reshaped, scaled and special-value cases; each recorded once and replayed with two poison fills, plain and with its "
             f"launches skipped; on {acc.device})."]
    for note in acc.skipped:
        lines.append(f"  - not checked here: {note}")
    for note in acc.sandbox:
        lines.append(f"  - sandbox: {note}")
    for v in acc.violations:
        lines.append(f"  - violation `{v.code}`: {v.message}")
    if acc.truth_errors():
        under = f" (eager under {acc.precision.label()})" if acc.precision else ""
        lines.append(f"  - largest error against the float64 truth: {acc.truth_errors()}{under}")
    for note in acc.reported:
        lines.append(f"  - reported: {note}")
    for line in acc.failure_lines(3):
        lines.append(f"  - {line}")
    if acc.error:
        lines.append(f"  - error: `{acc.error.splitlines()[-1]}`")
    return "\n".join(lines)


def perf_text(run: RunRecord | None) -> str:
    if run is None:
        return "- Performance: not run."
    perf = run.performance
    if perf is None:
        return f"- Performance: **{run.status}** — {run.describe()}"
    head = f"- Performance on {perf.device_name} (torch {perf.torch_version}, triton {perf.triton_version})"
    head += tf32_label(perf)
    if not perf.measured:
        head += " — **interpreter dry run: NOT a measurement**"
    headers = ("case", "dtype", *PerfCase.CELL_HEADERS, "verdict")
    lines = [head + ":", "", "| " + " | ".join(headers) + " |", "|---|---|" + "---:|" * len(PerfCase.CELL_HEADERS) + ":---:|"]
    for c in perf.cases:
        shapes = " ".join(f"{k}{v}" for k, v in c.shapes.items())
        lines.append("| " + " | ".join([shapes, c.dtype, *c.cells(), c.verdict().replace("|", "/")]) + " |")
    if perf.note:
        lines += ["", f"  {perf.note}"]
    for v in perf.violations:
        lines.append(f"  - violation `{v.code}`: {v.message}")
    if perf.error:
        lines.append(f"  - error: `{perf.error.splitlines()[-1]}`")
    return "\n".join(lines)


def summary_row(r: RoundRecord) -> dict[str, str]:
    acc = r.accuracy.accuracy if r.accuracy else None
    perf = r.performance.performance if r.performance else None
    g_eager = perf.geomean("speedup_eager") if perf else None
    g_comp = perf.geomean("speedup_compile") if perf else None
    ms = [c.kernel.ms for c in perf.cases if c.kernel] if perf else []
    peak = [c.frac_peak for c in perf.cases if c.frac_peak is not None] if perf else []
    return {
        "round": str(r.round),
        "change": clip((r.change or "—").replace("|", "/"), 80),
        "change_type": r.change_type,
        "correct": "yes" if acc and acc.correct else "no",
        "ms": " / ".join(f"{m:.4f}" for m in ms[:4]) + (" …" if len(ms) > 4 else "") if ms else "—",
        "x_eager": _fmt(g_eager, ".3g"),  # 3 significant digits: interpreter dry runs give x0.00x
        "x_compile": _fmt(g_comp, ".3g"),
        "peak": _fmt(min(peak) * 100 if peak else None, ".0f", "%"),
        "kept": _kept_text(r),
    }


def _kept_text(r: RoundRecord) -> str:
    if r.finished_at is None:
        return "in progress"
    if r.kept:
        return "kept"
    if r.round > 0 and (r.accuracy is None or not r.accuracy.passed):
        return "reverted (rejected)"
    if r.round > 0 and not r.judged:
        return "unjudged (correct; no device)"
    return "reverted"


def _perf_of(r: RoundRecord | None):  # noqa: ANN202 - PerformanceResult | None
    return r.performance.performance if r is not None and r.performance else None


def _x(v: object) -> str:
    return f"x{v:.3g}" if isinstance(v, (int, float)) else "—"


def _shape(shapes: dict[str, list[int]]) -> str:
    return " ".join(f"{k}{v}" for k, v in shapes.items())


def _cell(c: CaseResult) -> str:
    if c.speedup is None:
        return c.verdict if not c.note else f"{c.verdict}: {clip(c.note, 60)}"
    return f"x{c.speedup:.3f} {c.verdict}"


def search_table(r: RoundRecord) -> dict[str, object]:
    """The round's search as a table: one row per candidate, one column per perf case x dtype."""
    keys: list[tuple[int, str]] = []
    labels: dict[tuple[int, str], str] = {}
    for cand in r.candidates:
        for c in cand.cases:
            if (c.case, c.dtype) not in labels:
                keys.append((c.case, c.dtype))
                labels[(c.case, c.dtype)] = c.label
    # Candidates timed on different GPUs were each compared with the best on their own GPU: say which.
    spread = len({c.device for cand in r.candidates for c in cand.cases if c.device}) > 1
    rows, untimed = [], []
    for cand in r.candidates:
        if cand.pruned and not cand.cases and keys:  # dropped before timing: listed under the table, with why
            untimed.append(f"{cand.label}: {cand.pruned}")
            continue
        by = {(c.case, c.dtype): c for c in cand.cases}
        cells = [_cell(by[k]) if k in by else (f"pruned: {cand.pruned}" if cand.pruned else "—") for k in keys]
        if not keys:
            cells = [f"pruned: {cand.pruned}" if cand.pruned else "not timed"]
        if spread:
            cells.insert(0, ", ".join(sorted({c.device for c in cand.cases if c.device})) or "—")
        rows.append([cand.label.replace("|", "/"), *[x.replace("|", "/") for x in cells]])
    headers = ["candidate", *[labels[k] for k in keys]] if keys else ["candidate", "result"]
    return {"headers": headers[:1] + ["device"] + headers[1:] if spread else headers, "rows": rows, "untimed": untimed}


def case_rows(r: RoundRecord) -> list[list[str]]:
    return [[c.label, _fmt(c.best_ms, ".4f"), _fmt(c.ms, ".4f"), _x(c.speedup) if c.speedup else "—",
             f"±{100 * c.noise:.1f}%" if c.noise else "—", c.verdict + (f" ({clip(c.note, 80)})" if c.note else "")]
            for c in r.cases]


def dispatch_rows(r: RoundRecord) -> list[list[str]]:
    return [[d.dtype, _shape(d.shapes), ", ".join(f"{k}={v!r}" for k, v in d.knobs.items()) or "(the default)",
             d.reason.replace("|", "/")] for d in r.dispatch]


def round_context(r: RoundRecord, state: OpState, spec: OperatorSpec) -> dict[str, object]:
    """What the round template shows beyond the record itself: numbers before and after, the
    analysis the round started from, and its lessons."""
    perf = _perf_of(r)
    diag, decision = r.diagnosis, r.decision
    target = diag.target if diag is not None and diag.target is not None else spec.target_speedup
    after = perf.geomean("speedup_eager") if perf else None
    dry_run = bool(perf and not perf.measured) or state.device == "cpu"
    if r.round == 0:
        analysis = ["Initial kernel: nothing measured before it; its own numbers (test results below) are the "
                    "starting point of round 1's analysis."]
        lessons = [r.outcome or "—"]
    else:
        analysis = list(diag.lines) if diag is not None and diag.lines else ["(no analysis recorded)"]
        lessons = list(r.lessons)
        if r.next_directions:
            lessons.append(f"Next directions: {r.next_directions}")
        if not lessons:
            lessons = ["(round not finished)"]
    if target is None:
        target_status = "none set"
    elif after is None:
        target_status = f"x{target:g} vs eager — not measured this round"
    else:
        target_status = f"x{target:g} vs eager — {'met' if after >= target else 'not met'} (x{after:.3f})"
    if r.cases and decision is not None:
        wins = sum(c.verdict == "win" for c in r.cases)
        losses = sum(c.verdict in ("loss", "wrong") for c in r.cases)
        vs_best = (f"{wins} case(s) faster, {losses} slower, {len(r.cases) - wins - losses} within the noise"
                   + (f"; geomean {_x(decision.speedup)}" if decision.speedup else "") + " (per case below)")
    elif decision is not None and decision.speedup is not None:
        vs_best = f"{_x(decision.speedup)} (keep threshold {_x(decision.threshold)})"
    elif r.round == 0:
        vs_best = "— (first round)"
    else:
        vs_best = "— (not timed: " + (decision.reason if decision is not None else "not finished") + ")"
    if dry_run and r.round > 0:
        vs_best += f" [{DRY_RUN_LABEL}]"
    verdict = {"kept": "kept", "in progress": "in progress"}.get(_kept_text(r), _kept_text(r))
    return {
        "base_round": r.base_round,
        "speedup_before": _x(diag.speedup_eager if diag is not None else None) if r.round else "— (first round)",
        "target": f"x{target:g} vs eager" if target is not None else "none set (optimize toward the device ceiling)",
        "analysis": analysis,
        "speedup_after": _x(after) + (f" [{DRY_RUN_LABEL}]" if dry_run and after is not None else ""),
        "compile_after": _x(perf.geomean("speedup_compile") if perf else None),
        "vs_best": vs_best,
        "target_status": target_status,
        "lessons": lessons,
        "dry_run": dry_run,
        "verdict": f"{r.change or 'no change'} — {verdict}",
        "search": search_table(r),
        "cases": case_rows(r),
        "dispatch": dispatch_rows(r),
    }


def final_summary(state: OpState) -> list[str]:
    """The closing lines: why the run stopped, the best kernel and how the rounds went."""
    if not state.stopped_because:
        return []
    opt = [r for r in state.rounds if r.round >= 1 and r.finished_at]
    kept = sum(r.kept for r in opt)
    rejected = sum(1 for r in opt if r.accuracy is None or not r.accuracy.passed)
    unjudged = sum(1 for r in opt if not r.judged and r.accuracy is not None and r.accuracy.passed)
    lines = [f"Stopped: {state.stopped_because}."]
    best = state.best()
    perf = _perf_of(best)
    if best is not None:
        nums = ""
        if perf is not None:
            nums = f": geomean {_x(perf.geomean('speedup_eager'))} vs eager, {_x(perf.geomean('speedup_compile'))} vs torch.compile"
            peaks = [c.frac_peak for c in perf.cases if c.frac_peak is not None]
            nums += f", {100 * min(peaks):.0f}% of peak (worst case)" if peaks else ", fraction of peak unknown (no measured ceilings)"
            if not perf.measured:
                nums += f" [{DRY_RUN_LABEL}]"
        lines.append(f"Best kernel: round {best.round} (`{best.kernel_file}`, promoted to `{state.name}_triton.py`){nums}.")
    lines.append(f"{len(opt)} optimization round(s): {kept} kept, {len(opt) - kept - rejected - unjudged} reverted as not faster, "
                 f"{rejected} rejected by the judge" + (f", {unjudged} correct but unjudged (no device to time on)" if unjudged else "") + ".")
    if state.tokens.calls:
        t = state.tokens
        lines.append(f"LLM usage: {t.calls} calls, {t.prompt_tokens} prompt + {t.completion_tokens} completion tokens.")
    return lines


_UP = re.compile(r"\b(larger|bigger|longer|wider|more|higher)\b", re.IGNORECASE)
_DOWN = re.compile(r"\b(smaller|shorter|narrower|fewer|less|lower)\b", re.IGNORECASE)


def stated_direction(idea: str) -> int:
    """+1 where an idea asks for a larger value (`larger BLOCK_SIZE`), -1 a smaller one, 0 for neither
    or both (`more (or fewer) warps`, `another tile size`)."""
    up, down = bool(_UP.search(idea)), bool(_DOWN.search(idea))
    return 0 if up == down else (1 if up else -1)


def idea_disagreement(r: RoundRecord) -> str:
    """Why a round's stated idea and the change it applied disagree ("" when they agree): a hypothesis
    about another knob, or one asking for a larger value where the change made it smaller (an offline
    round once said "larger BLOCK_SIZE for 2-byte dtypes" and applied 512 after 4096)."""
    h = r.hypothesis
    if h is None or not r.knob:
        return ""
    if h.knob and h.knob != r.knob:
        return f"its idea is about {h.knob}, its change moves {r.knob}"
    moved = (r.knob_to > r.knob_from) - (r.knob_to < r.knob_from) if all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in (r.knob_from, r.knob_to)) else 0
    said = stated_direction(h.idea)
    if moved and said and moved != said:
        return (f"its idea ({clip(h.idea, 100)}) asks for a {'larger' if said > 0 else 'smaller'} {r.knob}, its change "
                f"made it {'larger' if moved > 0 else 'smaller'} ({r.knob_from!r} -> {r.knob_to!r})")
    return ""


def unjudged_rounds(state: OpState) -> list[RoundRecord]:
    """Finished rounds after the best whose kernel is correct but was never timed (no device to time
    on): nothing was decided about them, so they are neither kept nor reverted."""
    best = state.best()
    after = best.round if best is not None else 0
    return [r for r in state.rounds if r.round > after and r.finished_at is not None and not r.judged and not r.kept
            and r.accuracy is not None and r.accuracy.passed]


def timing_commands(state: OpState, op_dir: Path | str) -> list[str]:
    """How to time the unjudged rounds on a GPU, one `kernelgen bench` per kernel: the shipped one
    first, so each round's numbers stand beside it (same device, same perf cases)."""
    rounds = unjudged_rounds(state)
    if not rounds:
        return []
    best = state.best()
    where = Path(op_dir)
    lines = [f"`kernelgen bench {where}`: the shipped kernel" + (f" (round {best.round}'s)" if best is not None else "")]
    lines += [f"`kernelgen bench {where} --kernel {where / r.kernel_file}`: round {r.round} ({clip(r.change or 'no change', 80)})"
              for r in rounds]
    return lines


def refresh_section(f: RefreshRecord) -> str:
    return render("log/refresh.md.j2", f=f, accuracy_text=accuracy_text(f.accuracy),
                  perf_text=perf_text(f.performance) if f.performance else "",
                  before_text=perf_text(f.superseded_performance) if f.superseded_performance else "")


def render_log(state: OpState, spec: OperatorSpec, op_dir: Path | str | None = None) -> str:
    interpreter = any(
        r.performance and r.performance.performance and not r.performance.performance.measured for r in state.rounds
    ) or state.device == "cpu"
    sections = []
    for r in state.rounds:
        wrong = idea_disagreement(r)
        if wrong:
            raise KernelGenError(f"{state.name}: round {r.round} cannot be logged: {wrong}",
                                 hint="the proposer's text must describe the change it applied")
        sections.append(render("log/round.md.j2", r=r, spec=spec, accuracy_text=accuracy_text(r.accuracy),
                               perf_text=perf_text(r.performance), c=round_context(r, state, spec), dry_run_label=DRY_RUN_LABEL))
        # a spec refresh shows after the last round recorded when it ran (chronological order)
        sections += [refresh_section(f) for f in state.refreshes if f.after_round == r.round]
    recorded = {r.round for r in state.rounds}
    sections += [refresh_section(f) for f in state.refreshes if f.after_round not in recorded]
    return render(
        "log/optimization_log.md.j2", state=state, spec=spec, version=__version__, interpreter=interpreter,
        analysis=state.analysis, rows=[summary_row(r) for r in state.rounds], sections=sections, tokens=state.tokens,
        final=final_summary(state), dry_run_label=DRY_RUN_LABEL,
        timing=timing_commands(state, op_dir if op_dir is not None else Path("generated") / state.name),
    )


def update_analysis(op_dir: Path, state: OpState, spec: OperatorSpec) -> bool:
    """Judge the analysis against the device's measured ceilings once the operator has been timed on
    one (and write one for a folder from before the analysis existed). True when it changed."""
    runs = [r.performance for r in state.rounds] + [f.performance for f in state.refreshes]
    peaks, tf32 = latest_peaks(runs), latest_tf32(runs)  # the precision mode the operator was timed in, if it was
    if state.analysis is None:
        baseline = Path(op_dir) / f"{spec.name}_baseline.py"
        source = baseline.read_text(encoding="utf-8") if state.baseline_by_llm and baseline.is_file() else None
        state.analysis = analyse_operator(spec, peaks, reference=source, tf32=tf32)
        return True
    if needs_ceilings(state.analysis, peaks, tf32):
        state.analysis = with_ceilings(state.analysis, spec, peaks, tf32)  # a mode comes with a measured run's peaks
        return True
    return False


def write_log(op_dir: Path, state: OpState, spec: OperatorSpec) -> Path:
    """Render the log from the state. The analysis is brought up to date first (the state is saved
    when it changed, so the log never shows what state.json does not hold)."""
    if update_analysis(op_dir, state, spec):
        save_state(op_dir, state)
    path = Path(op_dir) / LOG_FILE
    atomic_write(path, render_log(state, spec, op_dir))
    return path
