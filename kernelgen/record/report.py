"""`kernelgen report`: one row per operator under a folder — correct, best speedup vs eager and
vs torch.compile, fraction of peak, rounds used, LLM tokens — printed and written as report.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.errors import UsageError
from kernelgen.fsutil import atomic_write
from kernelgen.opdir import is_operator_dir, operator_dirs_under, operator_status
from kernelgen.record.fastp import Outcome, fast_p_lines, fast_p_row
from kernelgen.record.state import load_state
from kernelgen.precision import ENV

REPORT_FILE = "report.md"
COLUMNS = ("operator", "correct", "best round", "x eager", "x compile", "% of peak", "rounds", "tokens", "stopped because")


@dataclass
class ReportRow:
    name: str
    correct: bool
    best_round: int | None
    x_eager: float | None
    x_compile: float | None
    frac_peak: float | None
    rounds: int
    tokens: int
    measured: bool
    stopped_because: str
    problem: str = ""  # a folder whose state cannot be read
    tf32: bool | None = None  # whether float32 matmuls could use TF32 (None: no float32 case measured)
    precision: str = ""  # the float32 precision policy it was measured under (PrecisionPolicy.label; "": none or older)

    def cells(self) -> list[str]:
        def x(v: float | None) -> str:
            return "—" if v is None else f"x{v:.3g}"

        if self.problem:
            return [self.name, "not tested" if self.problem.startswith("not tested") else "?", "—", "—", "—", "—", "—", "—",
                    self.problem]
        dry = "" if self.measured or self.x_eager is None else " (dry run)"
        return [self.name, "yes" if self.correct else "no", "—" if self.best_round is None else str(self.best_round),
                x(self.x_eager) + dry, x(self.x_compile),
                "—" if self.frac_peak is None else f"{100 * self.frac_peak:.0f}%", str(self.rounds), str(self.tokens),
                self.stopped_because or "—"]


def operator_dirs(root: Path) -> list[Path]:
    root = Path(root)
    if is_operator_dir(root):
        return [root]
    if not root.is_dir():
        raise UsageError(f"{root}: no such directory", hint="give the folder holding the operator folders, e.g. generated")
    return operator_dirs_under(root)


def report_row(op_dir: Path) -> ReportRow:
    status = operator_status(op_dir)  # an untested folder is marked as such, never as "correct: no"
    if not status.complete:
        return ReportRow(op_dir.name, False, None, None, None, None, 0, 0, True, "", problem=status.reason)
    try:
        state = load_state(op_dir)
    except (OSError, ValueError):
        return ReportRow(op_dir.name, False, None, None, None, None, 0, 0, True, "", problem="unreadable state.json")
    best = state.best()
    perf = best.performance.performance if best and best.performance else None
    peaks = [c.frac_peak for c in perf.cases if c.frac_peak is not None] if perf else []
    return ReportRow(
        name=state.name, correct=best is not None, best_round=state.best_round,
        x_eager=perf.geomean("speedup_eager") if perf else None,
        x_compile=perf.geomean("speedup_compile") if perf else None,
        frac_peak=min(peaks) if peaks else None,
        rounds=sum(1 for r in state.rounds if r.round >= 1 and r.finished_at),
        tokens=state.tokens.prompt_tokens + state.tokens.completion_tokens,
        measured=perf.measured if perf else True, stopped_because=state.stopped_because,
        tf32=perf.tf32 if perf and any(c.dtype == "float32" for c in perf.cases) else None,
        precision=perf.precision.label() if perf and perf.precision and any(c.dtype == "float32" for c in perf.cases) else "",
    )


def build_report(root: Path) -> list[ReportRow]:
    return [report_row(d) for d in operator_dirs(root)]


def fast_p_text(rows: list[ReportRow]) -> str:
    """KernelBench's fast_p over every folder listed: one not tested, or not correct, counts as not fast."""
    table = {"eager": fast_p_row([Outcome(r.correct and not r.problem, r.x_eager) for r in rows]),
             "torch.compile": fast_p_row([Outcome(r.correct and not r.problem, r.x_compile) for r in rows])}
    return "\n".join(fast_p_lines(table, len(rows)))


def render_markdown(rows: list[ReportRow], root: Path) -> str:
    lines = [f"# KernelGen report: `{root}`", ""]
    if any(not r.measured for r in rows):
        lines += [f"> Rows marked (dry run) ran on the CPU interpreter: {DRY_RUN_LABEL}.", ""]
    policies = {r.precision: [x.name for x in rows if x.precision == r.precision] for r in rows if r.precision}
    for label, names in policies.items():
        which = "every float32 operator" if len(policies) == 1 else ", ".join(names)
        lines += [f"> float32 precision: {label}, for {which} (eager, torch.compile and the kernels alike).", ""]
    on = [r.name for r in rows if r.tf32]
    if not policies and any(r.tf32 is not None for r in rows):
        lines += [f"> float32 matmuls: TF32 {'on for ' + ', '.join(on) if on else 'off'} "
                  f"(eager, torch.compile and the kernels alike; {ENV}=1 allows it).", ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in r.cells()) + " |")
    if not rows:
        lines.append("")
        lines.append("(no operator folders found)")
    else:
        lines += ["", "KernelBench's fast_p: the share of all operators correct with a geomean speedup above p "
                      "(fast_0: the correct share).", "", "```", fast_p_text(rows), "```"]
    return "\n".join(lines) + "\n"


def write_report(root: Path, rows: list[ReportRow], out: Path | None = None) -> Path:
    path = Path(out) if out else Path(root) / REPORT_FILE
    atomic_write(path, render_markdown(rows, root))
    return path


# --- on screen ------------------------------------------------------------------------------------
def report_table(rows: list[ReportRow]):  # noqa: ANN201 - rich.table.Table
    from rich.table import Table

    table = Table(title="KernelGen report")
    for c in COLUMNS:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*r.cells())
    return table


def rounds_table(state, spec):  # noqa: ANN001, ANN201 - OpState, OperatorSpec -> rich.table.Table
    """The log's summary table, for the terminal."""
    from rich.table import Table

    from kernelgen.record.oplog import summary_row

    dry = state.device == "cpu"
    table = Table(title=f"{state.name}: optimization rounds" + (f" ({DRY_RUN_LABEL})" if dry else ""))
    for c in ("round", "change", "type", "correct", "ms", "x eager", "x compile", "% of peak", "kept"):
        table.add_column(c, overflow="fold")
    for r in state.rounds:
        row = summary_row(r)
        table.add_row(row["round"], row["change"], row["change_type"], row["correct"], row["ms"], row["x_eager"],
                      row["x_compile"], row["peak"], row["kept"])
    return table
