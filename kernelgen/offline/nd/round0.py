"""Round 0 of the nd family from the analysis: per perf case x dtype, what the file's heuristics
launch (kernelgen.offline.stages.launch), and where a reduce stage's kept blocks are too few to fill the
SMs, the split written into round 0's dispatch table (`split=True`), so the rounds and the tuning
memory can take it back per shape. A split that forcing would also impose on another stage (one whose
own kept blocks fill the SMs) is left to the file's per-stage heuristic instead."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.dispatch import FirstChoice
from kernelgen.offline.nd.knobs import NdKnobs
from kernelgen.offline.stages.cases import StageCase, describe_launches
from kernelgen.offline.stages.launch import CONTIGUOUS_KEPT, split_per_sm


# A one-pass reduction that loops wide along contiguous kept positions reads 128 rows of them per step
# (16384 elements) rather than 32: on an H200 (2026-11-25) the sum over dim 1 of [128, 4096, 4095]
# took 2.07 ms (4.15 TB/s, eager 2.10) against 2.33 ms at 32 rows. Not for an arg-reduction, whose
# int64 index per lane doubles its registers: argmax there took 2.81 ms against 2.55 ms.
WIDE_TILE = 16384


def _wide(case: StageCase, base: list) -> bool:
    """Whether ROW_TILE=WIDE_TILE changes only one-pass reductions over contiguous kept positions."""
    g, stages = case.analysis.traced.graph, case.analysis.program.stages
    changed = [(new, old) for new, old in zip(case.launches(NdKnobs(ROW_TILE=WIDE_TILE)), base) if new != old]
    for new, old in changed:
        kernel, st = case.analysis.kernels[old.stage], stages[old.stage]
        kinds = {g[u].attrs.get("kind") for u in st.values if g[u].op == "reduce"}
        if old.launch is None or old.launch.path != "looped" or old.launch.block_r != CONTIGUOUS_KEPT or \
                not kernel.one_pass or kinds & {"argmax", "argmin"}:
            return False
    return bool(changed)


def nd_choice(case: StageCase) -> tuple[dict[str, Any], str]:
    """(knobs, reason) for one case."""
    base = case.launches(NdKnobs())
    split = [s for s in base if s.launch is not None and s.launch.path == "split"]
    what = describe_launches(base)
    if not split and _wide(case, base):
        return {"ROW_TILE": WIDE_TILE}, ("one pass over contiguous kept positions: 128 of them by 128 reduced rows "
                                        "per step (64 KB of fp32 in flight): " +
                                        describe_launches(case.launches(NdKnobs(ROW_TILE=WIDE_TILE))))
    if not split:
        return {}, "the file's heuristics: " + what
    la = split[0].launch
    assert la is not None
    per_sm = split_per_sm(case.analysis.kernels[split[0].stage].split)
    why = (f"stage {split[0].stage}: {la.tiles} kept block(s) on {case.sms} SMs; each shared by {la.chunks} programs "
           f"(~{per_sm} per SM, partials combined in a second launch)")
    if case.launches(NdKnobs(split=True)) != base:
        return {}, f"{why}, which the file's heuristics choose per stage: {what}"
    return {"split": True}, f"{why}: {what}"


def first_choices(case_of: Callable[[dict[str, list[int]], str], StageCase], cases: list[dict[str, list[int]]],
                  dtypes: list[str]) -> list[FirstChoice]:
    """Every perf case x dtype with its setting; `case_of(shapes, dtype)` -> StageCase."""
    out = []
    for shapes in cases:
        for dtype in dtypes:
            knobs, reason = nd_choice(case_of(shapes, dtype))
            out.append(FirstChoice(dtype, dict(shapes), knobs, reason))
    return out
