"""Round 0 of the nd family from the analysis: per perf case x dtype, what the file's heuristics
launch (nd/launch.py), and where a reduce stage's kept blocks are too few to fill the SMs, the
split written into round 0's dispatch table (`split=True`), so the rounds and the tuning memory can
take it back per shape. A split that forcing would also impose on another stage (one whose own kept
blocks fill the SMs) is left to the file's per-stage heuristic instead."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.dispatch import FirstChoice
from kernelgen.offline.nd.knobs import NdKnobs
from kernelgen.offline.nd.launch import CONFIG
from kernelgen.offline.nd.pruning import NdCase, describe_launches


def nd_choice(case: NdCase) -> tuple[dict[str, Any], str]:
    """(knobs, reason) for one case."""
    base = case.launches(NdKnobs())
    split = [s for s in base if s.launch is not None and s.launch.path == "split"]
    what = describe_launches(base)
    if not split:
        return {}, "the file's heuristics: " + what
    la = split[0].launch
    assert la is not None
    why = (f"stage {split[0].stage}: {la.tiles} kept block(s) on {case.sms} SMs; each shared by {la.chunks} programs "
           f"(~{CONFIG['split_per_sm']} per SM, partials combined in a second launch)")
    if case.launches(NdKnobs(split=True)) != base:
        return {}, f"{why}, which the file's heuristics choose per stage: {what}"
    return {"split": True}, f"{why}: {what}"


def first_choices(case_of: Any, cases: list[dict[str, list[int]]], dtypes: list[str]) -> list[FirstChoice]:
    """Every perf case x dtype with its setting; `case_of(shapes, dtype)` -> NdCase."""
    out = []
    for shapes in cases:
        for dtype in dtypes:
            knobs, reason = nd_choice(case_of(shapes, dtype))
            out.append(FirstChoice(dtype, dict(shapes), knobs, reason))
    return out
