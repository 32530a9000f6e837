"""KernelBench's fast_p: the share of ALL problems given whose kernel is correct and faster than the
baseline by more than p (a problem that does not build, or is not correct, counts as not fast).
fast_0 is the correct share. Each problem's speedup is the geomean over its timed case x dtype
(a KernelBench problem has one)."""

from __future__ import annotations

from dataclasses import dataclass

P_VALUES = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Outcome:
    correct: bool
    speedup: float | None  # over one baseline; None: not measured


def fast_p(outcomes: list[Outcome], p: float) -> float:
    if not outcomes:
        return 0.0
    fast = sum(1 for o in outcomes if o.correct and (p == 0.0 or (o.speedup is not None and o.speedup > p)))
    return fast / len(outcomes)


def fast_p_row(outcomes: list[Outcome]) -> dict[str, float]:
    """fast_p for every p of P_VALUES, keyed by its label ("0", "1", "1.5", "2")."""
    return {f"{p:g}": fast_p(outcomes, p) for p in P_VALUES}


def fast_p_lines(rows: dict[str, dict[str, float]], n: int) -> list[str]:
    """A small table: one line per baseline (`vs eager   fast_0 0.62  fast_1 0.41 ...`), n problems."""
    head = f"fast_p over {n} problem(s)"
    lines = [head + " " * max(1, 26 - len(head)) + "  ".join(f"fast_{p:g}".rjust(8) for p in P_VALUES)]
    for label, row in rows.items():
        name = f"vs {label}"
        lines.append(name + " " * max(1, 26 - len(name)) + "  ".join(f"{row[f'{p:g}']:8.2f}" for p in P_VALUES))
    return lines
