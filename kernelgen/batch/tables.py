"""The batch report's rows and columns, as data.

Every baseline the kernel is compared with is one `Baseline` entry; the per-operator table, the
per-case table, the summary's geomeans and the plot all follow `BASELINES`. A peer library (e.g.
Liger-Kernel, FlagGems) becomes a column everywhere by adding one entry once the measurement
records its timing and the kernel's speedup over it on each perf case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.verify.judge.peers import FLAG_GEMS, LIGER


@dataclass(frozen=True)
class Baseline:
    label: str  # as the column headers name it
    timing: str  # the PerfCase field holding its KernelTiming
    speedup: str  # the PerfCase field holding the kernel's speedup over it


BASELINES: tuple[Baseline, ...] = (
    Baseline("eager", "eager", "speedup_eager"),
    Baseline("torch.compile", "compiled", "speedup_compile"),
)
FAST_BASELINE = "eager"  # fast_1: faster than this baseline at every perf case


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaseRow(_Row):
    """One perf case x dtype of one operator's final measurement."""

    op: str
    case: str  # the first input's shape, 8x1024x1024
    dtype: str
    kernel_ms: float | None = None
    ms: dict[str, float | None] = Field(default_factory=dict)  # baseline label -> its time
    speedup: dict[str, float | None] = Field(default_factory=dict)  # baseline label -> kernel's speedup
    gbps: float | None = None
    tflops: float | None = None
    frac_peak: float | None = None
    bound: str = "unknown"
    valid: bool = True
    verdict: str = "ok"  # or what refused the case's timing (PerfCase.verdict): its numbers are then not shown
    host_us: float | None = None
    eager_host_us: float | None = None
    ceiling: str = ""  # which ceiling frac_peak is of: copy | read | matmul
    peers: dict[str, float] = Field(default_factory=dict)  # peer library -> its ms on the same inputs

    @property
    def best_peer(self) -> tuple[str, float] | None:
        return min(self.peers.items(), key=lambda kv: kv[1]) if self.peers else None

    @property
    def x_best_peer(self) -> float | None:
        """The kernel's speedup over the fastest peer library here (>= 1: at least as fast)."""
        best = self.best_peer
        return best[1] / self.kernel_ms if best and self.kernel_ms else None


PEERS = (LIGER, FLAG_GEMS)  # the peer columns, in this order


class OpRow(_Row):
    """One operator of the batch."""

    name: str
    spec: str
    status: str  # finished | failed | invalid | memory | error | pending
    reason: str = ""
    target: str = ""
    rounds: int = 0  # optimization rounds finished
    best_round: int | None = None
    speedup: dict[str, float | None] = Field(default_factory=dict)  # geomean over its cases, per baseline
    x_best_peer: float | None = None  # geomean over the cases a peer library has
    fast_1: bool = False
    frac_peak: float | None = None  # the lowest over its cases
    measured: bool = True
    precision: str = ""  # the float32 precision policy its final measurement ran under (PrecisionPolicy.label)
    skipped: bool = False
    resumed: str = ""
    seconds: float = 0.0
    phases: dict[str, float] = Field(default_factory=dict)  # where its seconds went (kernelgen.batch.phases)
    stages: dict[str, float] = Field(default_factory=dict)  # derive, new, baselines (beside new), optimize, bench
    baseline_phases: dict[str, float] = Field(default_factory=dict)  # where the baselines' seconds went (beside new)
    attempts: int = 1  # 2: ran out of memory beside other operators, then ran alone


R = TypeVar("R")


@dataclass(frozen=True)
class Column(Generic[R]):
    header: str
    cell: Callable[[R], str]
    right: bool = False  # numbers align right


def num(x: float | None, spec: str, prefix: str = "", suffix: str = "") -> str:
    return "—" if x is None else f"{prefix}{format(x, spec)}{suffix}"


def _pct(x: float | None) -> str:
    return num(None if x is None else 100 * x, ".0f", suffix="%")


def _phases(r: OpRow) -> str:
    """Its three longest phases: where the operator's seconds went."""
    top = sorted(r.phases.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} {v:.0f}" for k, v in top) or "—"


def _op_note(r: OpRow) -> str:
    parts = [r.reason] if r.reason else []
    if r.skipped:
        parts.append("finished earlier, not redone")
    elif r.resumed:
        parts.append(f"resumed: {r.resumed}")
    return "; ".join(parts) or "—"


def op_columns() -> list[Column[OpRow]]:
    dry = lambda r: "" if r.measured else " (dry run)"  # noqa: E731
    cols: list[Column[OpRow]] = [Column("operator", lambda r: r.name), Column("status", lambda r: r.status)]
    cols += [Column(f"x {b.label}", lambda r, b=b: num(r.speedup.get(b.label), ".3g", "x") + (dry(r) if r.speedup.get(b.label) else ""), True)
             for b in BASELINES]
    cols += [
        Column("x best peer", lambda r: num(r.x_best_peer, ".3g", "x"), True),
        Column("fast_1", lambda r: "yes" if r.fast_1 else "no"),
        Column("% of peak", lambda r: _pct(r.frac_peak), True),
        Column("rounds", lambda r: str(r.rounds), True),
        Column("best round", lambda r: "—" if r.best_round is None else str(r.best_round), True),
        Column("precision", lambda r: r.precision or "—"),
        Column("ran on", lambda r: r.target or "—"),
        Column("s", lambda r: f"{r.seconds:.0f}", True),
        Column("longest phases (s)", _phases),
        Column("note", _op_note),
    ]
    return cols


def case_columns() -> list[Column[CaseRow]]:
    cols: list[Column[CaseRow]] = [
        Column("operator", lambda r: r.op), Column("case", lambda r: r.case), Column("dtype", lambda r: r.dtype),
        Column("KernelGen ms", lambda r: num(r.kernel_ms, ".4f"), True),
    ]
    cols += [Column(f"{b.label} ms", lambda r, b=b: num(r.ms.get(b.label), ".4f"), True) for b in BASELINES]
    cols += [Column(f"x {b.label}", lambda r, b=b: num(r.speedup.get(b.label), ".2f"), True) for b in BASELINES]
    cols += [Column(f"{p} ms", lambda r, p=p: num(r.peers.get(p), ".4f"), True) for p in PEERS]
    cols += [Column("x best peer", lambda r: num(r.x_best_peer, ".2f"), True)]
    cols += [
        Column("GB/s", lambda r: num(r.gbps, ".0f"), True),
        Column("TFLOP/s", lambda r: num(r.tflops, ".0f"), True),
        Column("% of peak", lambda r: _pct(r.frac_peak) + (f" {r.ceiling or ('matmul' if r.bound == 'compute' else 'copy')}"
                                                           if r.frac_peak is not None else ""), True),
        Column("host µs/call (kernel / eager)", lambda r: f"{num(r.host_us, '.1f')} / {num(r.eager_host_us, '.1f')}", True),
        Column("verdict", lambda r: r.verdict),
    ]
    return cols


def markdown_table(columns: list[Column[R]], rows: list[R]) -> str:
    lines = ["| " + " | ".join(c.header for c in columns) + " |",
             "|" + "".join("---:|" if c.right else "---|" for c in columns)]
    for r in rows:
        lines.append("| " + " | ".join(c.cell(r).replace("|", "/").replace("\n", " ") for c in columns) + " |")
    return "\n".join(lines)


def rich_table(columns: list[Column[R]], rows: list[R], title: str):  # noqa: ANN201 - rich.table.Table
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c.header, justify="right" if c.right else "left", overflow="fold")
    for r in rows:
        table.add_row(*(c.cell(r) for c in columns))
    return table
