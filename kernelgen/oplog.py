"""`optimization_log.md`: rendered from the operator's state (never edited in place), with a summary
table on top and one section per round."""

from __future__ import annotations

from pathlib import Path

from kernelgen import __version__
from kernelgen.fsutil import atomic_write
from kernelgen.render import render
from kernelgen.results import RunRecord
from kernelgen.spec import OperatorSpec
from kernelgen.state import OpState, RoundRecord

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
    lines = [f"- Accuracy: {verdict} — {acc.summary()} (seeds {acc.seeds}, both call orders, on {acc.device})."]
    for v in acc.violations:
        lines.append(f"  - violation `{v.code}`: {v.message}")
    for c in acc.failed_checks[:3]:
        lines.append(f"  - {c.message}")
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
    if not perf.measured:
        head += " — **interpreter dry run: NOT a measurement**"
    lines = [head + ":", "", "| case | dtype | kernel ms | eager ms | compile ms | x eager | x compile | GB/s | TFLOP/s | % of peak | valid |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for c in perf.cases:
        shapes = " ".join(f"{k}{v}" for k, v in c.shapes.items())
        lines.append(
            f"| {shapes} | {c.dtype} | {_fmt(c.kernel and c.kernel.ms, '.4f')} | {_fmt(c.eager and c.eager.ms, '.4f')} | "
            f"{_fmt(c.compiled and c.compiled.ms, '.4f')} | {_fmt(c.speedup_eager)} | {_fmt(c.speedup_compile)} | "
            f"{_fmt(c.gbps, '.1f')} | {_fmt(c.tflops, '.1f')} | {_fmt(c.frac_peak and 100 * c.frac_peak, '.0f', '%')} | "
            f"{'yes' if c.valid else 'NO: ' + c.invalid_reason} |"
        )
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
        "change": (r.change or "—").replace("|", "/")[:80],
        "change_type": r.change_type,
        "correct": "yes" if acc and acc.correct else "no",
        "ms": " / ".join(f"{m:.4f}" for m in ms[:4]) + (" …" if len(ms) > 4 else "") if ms else "—",
        "x_eager": _fmt(g_eager),
        "x_compile": _fmt(g_comp),
        "peak": _fmt(min(peak) * 100 if peak else None, ".0f", "%"),
        "kept": "kept" if r.kept else "reverted",
    }


def render_log(state: OpState, spec: OperatorSpec) -> str:
    interpreter = any(
        r.performance and r.performance.performance and not r.performance.performance.measured for r in state.rounds
    ) or state.device == "cpu"
    sections = [
        render("log/round.md.j2", r=r, spec=spec, accuracy_text=accuracy_text(r.accuracy), perf_text=perf_text(r.performance))
        for r in state.rounds
    ]
    return render(
        "log/optimization_log.md.j2", state=state, spec=spec, version=__version__, interpreter=interpreter,
        rows=[summary_row(r) for r in state.rounds], sections=sections, tokens=state.tokens,
    )


def write_log(op_dir: Path, state: OpState, spec: OperatorSpec) -> Path:
    path = Path(op_dir) / LOG_FILE
    atomic_write(path, render_log(state, spec))
    return path
