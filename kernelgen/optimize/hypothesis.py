"""What one round of the offline planner tries, chosen from the measurements, not from a fixed order.

Each perf case x dtype of the current best is described by its numbers — the fraction of its ceiling,
rows against the SM count, row length against what a register block holds, element size, host time
against device time — and rules turn the worst symptoms into hypotheses: one knob (or algorithmic
variant) to move, the problem in numbers, the idea, and the effect expected in numbers. The planner
takes the first hypothesis whose knob has values not tried yet. Without measurements (the CPU
interpreter) the same rules read only the shapes, and the round is labelled unjudged.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

from kernelgen.memory import Advice
from kernelgen.record.state import Hypothesis
from kernelgen.spec import OperatorSpec
from kernelgen.verify.results import PerformanceResult

AT_CEILING = 0.95  # within 5% there is nothing to win that the noise would not hide
ROW_BLOCK = 8192  # elements one program keeps in registers (the offline generator's single-pass limit)
FEW_ROWS = 2  # programs per SM below which a row-per-program grid leaves SMs idle


@dataclass(frozen=True)
class CaseView:
    """One perf case x dtype of the best kernel, as the rules read it."""

    label: str
    dtype: str
    rows: int
    cols: int
    itemsize: int
    frac: float | None  # of its ceiling; None when not measured
    bound: str
    kernel_us: float | None
    host_us: float | None


def views(spec: OperatorSpec, perf: PerformanceResult | None) -> list[CaseView]:
    """The perf cases as measured, or (no measurement) as the spec's shapes say."""
    size = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}
    out = []
    if perf is not None and perf.measured and perf.cases:
        for c in perf.cases:
            first = next(iter(c.shapes.values()), [1])
            cols = first[-1] if first else 1
            out.append(CaseView(f"{'x'.join(map(str, first))} {c.dtype}", c.dtype, max(1, prod(first) // max(cols, 1)), cols,
                                size.get(c.dtype, 4), c.frac_peak, c.bound, c.kernel.ms * 1e3 if c.kernel else None, c.host_us))
        return out
    for case in spec.effective_perf_cases:
        first = case[spec.inputs[0].name] or [1]
        for dtype in spec.effective_perf_dtypes:
            out.append(CaseView(f"{'x'.join(map(str, first))} {dtype}", dtype, max(1, prod(first) // first[-1]), first[-1],
                                size.get(dtype, 4), None, "unknown", None, None))
    return out


def remembered(advice: list[tuple[CaseView, Advice]], space: dict[str, list[Any]],
               base: dict[str, Any]) -> list[tuple[Hypothesis, list[Any]]]:
    """Hypotheses from the tuning memory, the largest remembered win first: (the hypothesis, the
    remembered values to time). Each is re-timed here before anything is kept."""
    by_knob: dict[str, list[tuple[CaseView, Advice]]] = {}
    for view, a in sorted(advice, key=lambda va: -va[1].speedup):
        if a.knob in space and a.value in space[a.knob] and a.value != base.get(a.knob):
            by_knob.setdefault(a.knob, []).append((view, a))
    out = []
    for knob, found in by_knob.items():
        view, best = found[0]
        values = list(dict.fromkeys(a.value for _, a in found))
        out.append((Hypothesis(
            knob=knob, cases=sorted({v.label for v, _ in found}),
            problem=f"{view.label}: the tuning memory holds a win on an alike case of this family on this device: {best.describe()}",
            idea=f"{knob}={best.value!r} here too" + (f" (also remembered: {', '.join(map(repr, values[1:]))})" if len(values) > 1 else ""),
            expected=f"about x{best.speedup:.2f} where the cases are alike; re-timed against the best before it is kept"), values))
    return out


def _worst(cases: list[CaseView]) -> CaseView | None:
    measured = [c for c in cases if c.frac is not None]
    return min(measured, key=lambda c: c.frac or 0.0) if measured else None


def _gain(cases: list[CaseView]) -> str:
    measured = [c for c in cases if c.frac]
    if not measured:
        return "not measured here: the CPU interpreter cannot time it"
    worst = min(measured, key=lambda c: c.frac or 1.0)
    return f"up to x{AT_CEILING / worst.frac:.2f} on {worst.label} (from {100 * worst.frac:.0f}% to ~{100 * AT_CEILING:.0f}% of its ceiling)"


def _ceiling_note(c: CaseView) -> str:
    return f"; {100 * c.frac:.0f}% of the ceiling" if c.frac else ""


def _few_rows(few: list[CaseView], family: str, space: dict[str, list[Any]], sm_count: int) -> list[Hypothesis]:
    """Few rows (kept outputs) for the SMs: split each over several programs, with the knob the family has."""
    c, labels = few[0], [x.label for x in few]
    if "algorithm" in space:
        return [Hypothesis(
            knob="algorithm", cases=labels,
            problem=f"{c.label}: {c.rows} rows for {sm_count} SMs: one program per row leaves "
                    f"{max(0, sm_count - c.rows)} SMs idle" + _ceiling_note(c),
            idea="split each row over several programs (partial results to a small scratch buffer, then a combining pass)",
            expected=f"every SM busy instead of {min(c.rows, sm_count)}/{sm_count}; {_gain(few)}"
                     + ("; the search tries the online and looped variants too (rows longer than a register block)"
                        if c.cols > ROW_BLOCK else ""))]
    if "split" in space:
        return [Hypothesis(
            knob="split", cases=labels,
            problem=f"{c.label}: {c.rows} kept outputs for {sm_count} SMs in the {family} kernel's reduction: "
                    "one program per kept block leaves SMs idle" + _ceiling_note(c),
            idea="share each kept block's reduced elements among several programs (partials, then a combining launch)",
            expected=f"every SM busy; {_gain(few)}")]
    return []


def hypotheses(spec: OperatorSpec, family: str, space: dict[str, list[Any]], cases: list[CaseView],
               sm_count: int | None, source: str = "") -> list[Hypothesis]:
    """Every hypothesis the numbers support, the most promising first (duplicates by knob dropped).
    `source`: the best kernel's file (whether it computes an erf)."""
    behind = [c for c in cases if c.frac is None or c.frac < AT_CEILING]
    found: list[Hypothesis] = []
    # What a family can change is its knob space, not its name: a row-splitting `algorithm` (rows) or a
    # reduction `split` (nd, conv) is what answers few rows; `family` names it in the text only.
    few = [c for c in behind if sm_count and c.rows < FEW_ROWS * sm_count]
    if few and sm_count:
        found += _few_rows(few, family, space, sm_count)
    long_rows = [c for c in behind if c.cols > ROW_BLOCK]
    if long_rows and "algorithm" in space:
        c = long_rows[0]
        found.append(Hypothesis(
            knob="algorithm", cases=[x.label for x in long_rows],
            problem=f"{c.label}: rows of {c.cols} elements are longer than a register block ({ROW_BLOCK}), so the row is "
                    "read once per reduction level and again to write" + (f"; {100 * c.frac:.0f}% of the ceiling" if c.frac else ""),
            idea="an online pass: one read keeping a running max and a rescaled running sum (or mean and variance), then the "
                 "write pass, whose re-read mostly hits L2",
            expected=f"bytes read per row from 3+ passes to about 2 (the second from L2); {_gain(long_rows)}"))
    erf = "erf" in space and ("erf(" in source or "erf(" in _lowered(spec))
    half = [c for c in behind if c.itemsize == 2]
    if erf and half:
        found.append(Hypothesis(
            knob="erf", cases=[x.label for x in half],
            problem=f"{half[0].label}: the exact GELU's erf costs more arithmetic per byte than a 2-byte element leaves time for",
            idea="erf from a short polynomial and one exp (Abramowitz-Stegun 7.1.26, error under 1.5e-7), in fp32",
            expected=f"arithmetic per element down by about half; {_gain(half)}"))
    tile = next((k for k in ("BLOCK_SIZE", "ROW_TILE") if k in space), None)
    wide = [c for c in behind if c.itemsize == 2]
    if tile and wide:
        found.append(Hypothesis(
            knob=tile, cases=[x.label for x in wide],
            problem=f"{wide[0].label}: 2-byte elements; the tile sized for fp32 gives each thread 8-byte loads"
                    + (f"; {100 * wide[0].frac:.0f}% of the ceiling" if wide[0].frac else ""),
            idea=f"larger {tile} for 2-byte dtypes, so each thread moves 16 bytes per load",
            expected=f"half the load instructions per byte; {_gain(wide)}"))
    compute = [c for c in behind if c.bound == "compute"]
    for knob in ("BLOCK_N", "num_stages", "BLOCK_K", "GROUP_SIZE_M"):
        if compute and knob in space:
            found.append(Hypothesis(
                knob=knob, cases=[x.label for x in compute],
                problem=f"{compute[0].label}: {100 * (compute[0].frac or 0):.0f}% of the measured matmul rate",
                idea=f"another {knob}: tiles that keep both warpgroups' tensor cores fed and loads pipelined",
                expected=_gain(compute)))
    for knob, idea in (("num_warps", "more (or fewer) warps per program: memory parallelism against register pressure"),
                       ("persistent", "a persistent grid of a few programs per SM looping over tiles: no tail wave, no relaunch per tile"),
                       ("BLOCK_SIZE", "another tile size"), ("ROW_TILE", "more rows per program for short rows"),
                       ("eviction", "evict_first on data read once, leaving L2 to the reused operand"),
                       ("MAX_SINGLE_PASS", "a longer single pass (the row stays in registers)"),
                       ("LOOP_BLOCK", "another step for the looped path"), ("grid", "the other grid rank"),
                       ("autotune", "autotune over a pruned set of configurations per shape")):
        if knob in space and behind:
            worst = _worst(behind) or behind[0]
            found.append(Hypothesis(
                knob=knob, cases=[x.label for x in behind],
                problem=f"{worst.label}" + (f": {100 * worst.frac:.0f}% of the {worst.bound}-bound ceiling" if worst.frac else
                                            ": not at the ceiling (unmeasured here)"),
                idea=idea, expected=_gain(behind)))
    seen, unique = set(), []
    for h in found:
        if h.knob not in seen:
            seen.add(h.knob)
            unique.append(h)
    return unique


def _lowered(spec: OperatorSpec) -> str:
    return (spec.reference or "").replace("F.gelu", "erf(").replace("gelu(", "erf(")
