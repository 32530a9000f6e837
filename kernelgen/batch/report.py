"""The batch report: pass rate, fast_1 (the share of operators faster than eager at every perf case),
geomean speedups over each baseline, a row per operator and a row per perf case; written to the
output folder as batch_report.md, .json and .png. The numbers come from each operator's final
measurement (`final_perf.json`, `kernelgen bench --json` after optimize) and its state.json.

An operator that did not fit its GPU's memory (status `memory`) is no verdict on its kernel: it is
left out of the pass rate, fast_1 and fast_p (whose counts say so) and listed with what it needs.
Every operator's seconds, and where they went (kernelgen.batch.phases), are in its row; the summary
gives the mean over the operators that ran, and a line of seconds per stage (derive, new, baselines
timed beside new, optimize, bench) so that a GPU run shows where the time went."""

from __future__ import annotations

import math
import platform
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelgen.batch.resume import FINAL_FILE, STAGES, JobResult, load_job
from kernelgen.batch.tables import BASELINES, FAST_BASELINE, CaseRow, OpRow, case_columns, markdown_table, op_columns
from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.fsutil import atomic_write, now
from kernelgen.opdir import operator_dirs_under
from kernelgen.record.fastp import Outcome, fast_p_lines, fast_p_row
from kernelgen.record.state import load_state
from kernelgen.verify.results import PerformanceResult, RunRecord

REPORT_STEM = "batch_report"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Summary(_Model):
    operators: int
    correct: int
    pass_rate: float
    fast_1_count: int
    fast_1: float
    geomean: dict[str, float | None]  # baseline label -> geomean speedup over every case of the correct operators
    fast_p: dict[str, dict[str, float]] = Field(default_factory=dict)  # baseline label -> KernelBench's fast_p per p ("0", "1", "1.5", "2")
    case_timings: int
    measured: bool  # False: the numbers are interpreter dry runs
    memory: int = 0  # operators that did not fit their GPU's memory: not counted in the rates above
    seconds_mean: float | None = None  # per operator that ran a step (this run's or the earlier run's record)
    phases_mean: dict[str, float] = Field(default_factory=dict)  # the same, per phase
    stages_mean: dict[str, float] = Field(default_factory=dict)  # the same, per stage (kernelgen.batch.resume.STAGES)
    baselines_mean: dict[str, float] = Field(default_factory=dict)  # the baselines' seconds per part (device lock, compile, ..)


class BatchReport(_Model):
    created_at: str
    out: str
    engine: str
    device: dict[str, str]
    summary: Summary
    operators: list[OpRow]
    cases: list[CaseRow]


def load_final(op_dir: Path) -> PerformanceResult | None:
    try:
        record = RunRecord.model_validate_json((Path(op_dir) / FINAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
    return record.performance


def case_rows(op: str, perf: PerformanceResult) -> list[CaseRow]:
    rows = []
    for c in perf.cases:
        timings = {b.label: getattr(c, b.timing, None) for b in BASELINES}
        stands = c.timing_stands  # a refused timing shows no number: the kernel's, and what follows from it
        rows.append(CaseRow(
            op=op, case="x".join(map(str, next(iter(c.shapes.values()), []))), dtype=c.dtype,
            kernel_ms=c.kernel.ms if c.kernel and stands else None,
            ms={k: (t.ms if t is not None else None) for k, t in timings.items()},
            speedup={b.label: getattr(c, b.speedup, None) if stands else None for b in BASELINES},
            gbps=c.gbps if stands else None, tflops=c.tflops if stands else None,
            frac_peak=c.frac_peak if stands else None, bound=c.bound, valid=c.valid, verdict=c.verdict(),
            host_us=c.host_us, eager_host_us=c.eager_host_us, ceiling=c.ceiling or "",
            peers={name: t.ms for name, t in c.peers.items()},
        ))
    return rows


def geomean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals and len(vals) == len(values) else None


def operator_row(result: JobResult, out_root: Path) -> tuple[OpRow, list[CaseRow], PerformanceResult | None]:
    op_dir = Path(out_root) / result.name
    row = OpRow(name=result.name, spec=result.spec, status=result.status, reason=result.reason, target=result.target,
                skipped=result.skipped, resumed=result.resumed, seconds=result.seconds, phases=result.phases,
                stages=result.stages, attempts=result.attempts,
                baseline_phases=result.baselines.phases if result.baselines is not None else {})
    if result.status == "invalid" or not op_dir.is_dir():
        return row, [], None
    try:
        state = load_state(op_dir)
        row.rounds = sum(1 for r in state.rounds if r.round >= 1 and r.finished_at)
        row.best_round = state.best_round
    except (OSError, ValueError):
        pass
    perf = load_final(op_dir) if result.correct else None
    if perf is None:
        return row, [], None
    cases = case_rows(result.name, perf)
    row.speedup = {b.label: geomean([c.speedup.get(b.label) for c in cases]) for b in BASELINES}
    with_peers = [c.x_best_peer for c in cases if c.peers]
    row.x_best_peer = geomean(with_peers) if with_peers else None
    row.fast_1 = bool(cases) and all((c.speedup.get(FAST_BASELINE) or 0) > 1 for c in cases)
    peaks = [c.frac_peak for c in cases if c.frac_peak is not None]
    row.frac_peak = min(peaks) if peaks else None
    row.measured = perf.measured
    if perf.precision is not None and any(c.dtype == "float32" for c in perf.cases):
        row.precision = perf.precision.label()
    return row, cases, perf


def build_report(out_root: Path, results: list[JobResult], engine: str) -> BatchReport:
    ops: list[OpRow] = []
    cases: list[CaseRow] = []
    device: dict[str, str] = {"python": platform.python_version()}
    measured: list[bool] = []
    for result in results:
        row, rows, perf = operator_row(result, out_root)
        ops.append(row)
        cases += rows
        if perf is not None:
            measured.append(perf.measured)
            device.setdefault("device", perf.device_name)
            device.setdefault("torch", perf.torch_version)
            device.setdefault("triton", perf.triton_version)
    judged = [r for r in ops if r.status != "memory"]  # memory is no verdict on a kernel
    correct = [r for r in judged if r.status == "finished"]
    fast = sum(1 for r in judged if r.fast_1)
    n = len(judged)
    good = {r.name for r in correct}
    summary = Summary(
        operators=n, correct=len(correct), pass_rate=len(correct) / n if n else 0.0, fast_1_count=fast,
        fast_1=fast / n if n else 0.0,
        geomean={b.label: _geomean_present([c.speedup.get(b.label) for c in cases if c.op in good]) for b in BASELINES},
        case_timings=sum(1 for c in cases if c.op in good), measured=all(measured),
        fast_p={b.label: fast_p_row([Outcome(r.name in good, r.speedup.get(b.label)) for r in judged]) for b in BASELINES},
        memory=len(ops) - n, **_time_spent(ops),
    )
    return BatchReport(created_at=now(), out=str(out_root), engine=engine, device=device, summary=summary,
                       operators=ops, cases=cases)


def _time_spent(ops: list[OpRow]) -> dict:
    """The mean seconds per operator that ran, in all and per phase (a phase it did not have counts 0)."""
    ran = [r for r in ops if r.seconds > 0]
    if not ran:
        return {}
    names = list(dict.fromkeys(k for r in ran for k in r.phases))
    parts = list(dict.fromkeys(k for r in ran for k in r.baseline_phases))
    return {"seconds_mean": round(sum(r.seconds for r in ran) / len(ran), 1),
            "phases_mean": {k: round(sum(r.phases.get(k, 0.0) for r in ran) / len(ran), 1) for k in names},
            "stages_mean": {k: round(sum(r.stages.get(k, 0.0) for r in ran) / len(ran), 1) for k in STAGES},
            "baselines_mean": {k: round(sum(r.baseline_phases.get(k, 0.0) for r in ran) / len(ran), 1) for k in parts}}


def _geomean_present(values: list[float | None]) -> float | None:
    vals = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def summary_text(report: BatchReport) -> str:
    s = report.summary
    gm = ", ".join(f"geomean {'—' if v is None else f'x{v:.3g}'} over {k}" for k, v in s.geomean.items())
    dry = "" if s.measured else f" [{DRY_RUN_LABEL}]"
    memory = (f"; {s.memory} more did not fit their GPU's memory (not counted: no verdict on their kernel)"
              if s.memory else "")
    return (f"{s.operators} operator(s): pass rate {s.correct}/{s.operators} ({100 * s.pass_rate:.0f}%), "
            f"fast_1 {s.fast_1_count}/{s.operators} ({100 * s.fast_1:.0f}%), {gm} "
            f"(over {s.case_timings} case x dtype timing(s) of the correct operators){memory}{dry}")


def time_text(report: BatchReport) -> str:
    """Seconds per operator, and the phases that took most of them."""
    s = report.summary
    if s.seconds_mean is None:
        return "seconds per operator: none ran"
    top = sorted(s.phases_mean.items(), key=lambda kv: -kv[1])[:6]
    return (f"seconds per operator that ran: {s.seconds_mean:.1f} on average; where they went: "
            + ", ".join(f"{k} {v:.1f}" for k, v in top) + "\n\n" + stage_text(report))


def stage_text(report: BatchReport) -> str:
    """The mean seconds per stage of the operators that ran: the driver's derivation of the spec, the
    steps, and the baselines timed ahead (beside `new`, so not added to the operator's seconds), with
    where theirs went where their process said (on an H100, 2026-12-07: 57-72 of 63-80 s waiting for the
    device's lock, behind other problems' checks and FlagGems' first calls; 5-9 s compiling)."""
    parts = sorted(report.summary.baselines_mean.items(), key=lambda kv: -kv[1])
    split = ": " + ", ".join(f"{k.removeprefix('baselines: ')} {v:.1f}" for k, v in parts) if parts else ""
    said = {"baselines": f"baselines {{:.1f}} (beside new{split})"}
    stages = report.summary.stages_mean
    return "seconds per stage, mean per operator that ran: " + ", ".join(
        said.get(k, f"{k} {{:.1f}}").format(stages.get(k, 0.0)) for k in STAGES)


def fast_p_text(report: BatchReport) -> str:
    """KernelBench's fast_p table: every operator given counts, one that did not build or is wrong as not fast."""
    return "\n".join(fast_p_lines(report.summary.fast_p, report.summary.operators))


def render_markdown(report: BatchReport) -> str:
    d = report.device
    lines = [f"# KernelGen batch: `{report.out}`", "",
             f"{report.created_at}; {report.engine}; device: {d.get('device', '—')}; PyTorch {d.get('torch', '—')}, "
             f"Triton {d.get('triton', '—')}, Python {d['python']}.", ""]
    if not report.summary.measured:
        lines += [f"> Numbers marked (dry run) ran on the CPU through the Triton interpreter: {DRY_RUN_LABEL}.", ""]
    lines += [f"**{summary_text(report)}**", "", time_text(report), "",
              f"fast_1: the share of all operators whose kernel is correct and faster than {FAST_BASELINE} at every perf case. "
              "Pass rate: a correct kernel with a final measurement.", "",
              "KernelBench's fast_p: the share of all operators correct with a geomean speedup above p "
              "(fast_0: the correct share).", "", "```", fast_p_text(report), "```", "",
              "## Operators", "", markdown_table(op_columns(), report.operators), "",
              "## Perf cases (final measurement of the best kernel)", "",
              markdown_table(case_columns(), report.cases) if report.cases else "(none)", ""]
    return "\n".join(lines)


def write_plot(report: BatchReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = report.operators
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(ops) * len(BASELINES)), 4.5))
    width = 0.8 / len(BASELINES)
    heights = {b.label: [r.speedup.get(b.label) or math.nan for r in ops] for b in BASELINES}
    for i, b in enumerate(BASELINES):
        xs = [k + (i - (len(BASELINES) - 1) / 2) * width for k in range(len(ops))]
        ax.bar(xs, heights[b.label], width=width, label=f"vs {b.label}")
    if any(h > 0 for hs in heights.values() for h in hs if not math.isnan(h)):
        ax.set_yscale("log")  # speedups are ratios: x0.5 and x2 sit the same distance from 1
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(range(len(ops))), [f"{r.name}\n({r.status})" for r in ops], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("geomean speedup (x)")
    title = f"KernelGen batch: {report.summary.correct}/{report.summary.operators} correct"
    ax.set_title(title + ("" if report.summary.measured else f"\n{DRY_RUN_LABEL}"), fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: BatchReport, out_root: Path, *, plot: bool = True) -> dict[str, Path]:
    out_root = Path(out_root)
    paths = {kind: out_root / f"{REPORT_STEM}.{kind}" for kind in ("md", "json", "png")}
    atomic_write(paths["md"], render_markdown(report))
    atomic_write(paths["json"], report.model_dump_json(indent=2))
    if plot:
        write_plot(report, paths["png"])
    return paths


def collected_results(out_root: Path) -> list[JobResult]:
    """The results finished runs left under `out_root` (one per operator folder with batch_job.json):
    a report without running anything, e.g. over a batch that was split into several calls."""
    found = [load_job(d) for d in operator_dirs_under(Path(out_root))] if Path(out_root).is_dir() else []
    return [r.model_copy(update={"skipped": True}) for r in found if r is not None]
