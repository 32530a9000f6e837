"""One case a program's knob values are judged at (the nd and conv families' pruning and round 0): what
a setting launches in every stage there (kernelgen.offline.stages.launch), in words, and the shared
budgets a changed stage is held to (kernelgen.offline.budgets)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kernelgen.offline.budgets import DEFAULT_SMS, Pruned, matmul_budget, register_budget
from kernelgen.offline.stages.analysis import StageAnalysis
from kernelgen.offline.stages.launch import stage_launches
from kernelgen.offline.stages.program import StageKnobs, StageLaunch
from kernelgen.spec import DTYPES, OperatorSpec

# fp32 values a tile holds per element: the tile and a temporary, + an accumulator where it loops
LIVE_VALUES = {"pointwise": 2, "single": 2, "looped": 3, "scan": 3, "split": 3}


@dataclass(frozen=True)
class StageCase:
    """One case a knob's values are judged at."""

    spec: OperatorSpec
    analysis: StageAnalysis
    shapes: dict[str, list[int]]
    fp32: bool
    itemsize: int
    sms: int

    @property
    def shape_text(self) -> str:
        return ", ".join(f"{n} {list(self.shapes[n])}" for n in self.spec.input_names)

    def launches(self, knobs: StageKnobs) -> list[StageLaunch]:
        return stage_launches(self.analysis, knobs, self.shapes, self.spec.input_names, self.fp32, self.sms)


def stage_case(spec: OperatorSpec, analysis: StageAnalysis, shapes: dict[str, list[int]], dtype: str,
               sm_count: int | None) -> StageCase:
    import torch  # ~1 s: only when values are judged

    return StageCase(spec, analysis, dict(shapes), dtype == "float32", getattr(torch, DTYPES[dtype]).itemsize,
                     sm_count or DEFAULT_SMS)


def describe_launches(launches: list[StageLaunch]) -> str:
    """What a setting launches, stage by stage, in words (round 0's reason)."""
    parts = []
    for s in launches:
        if s.launch is not None:
            la = s.launch
            shared = f" ({la.tiles} kept blocks x {la.chunks} sharing each)" if la.path == "split" else ""
            parts.append(f"stage {s.stage} ({s.kind}): {la.path}, {la.block_r}x{la.block_c} tile over {la.num_warps} warps, "
                         f"{la.programs} programs{shared}")
        else:
            assert s.tiles is not None and s.mnk is not None
            bm, bn, bk, _, warps, stages = s.tiles
            parts.append(f"stage {s.stage} (matmul {s.mnk[0]}x{s.mnk[1]}x{s.mnk[2]}): {bm}x{bn}x{bk} tiles, {warps} warps, "
                         f"{stages} stages")
    return "; ".join(parts)


def changed_stages(changed: list[tuple[StageLaunch, StageLaunch]], knob: str, value: Any, case: StageCase,
                   special: Callable[[StageLaunch, StageLaunch], Pruned | None] = lambda new, old: None) -> Pruned:
    """A knob value judged on the stages whose launches it changes (new, old): the first stage's
    refusal, or every stage's reason. `special(new, old)`: a family's own verdict for a stage kind
    it knows (conv's tiles), None for the shared matmul and register budgets."""
    reasons = []
    for new, old in changed:
        verdict = special(new, old)
        if verdict is None and new.kind == "matmul":
            assert new.tiles is not None and old.tiles is not None and new.mnk is not None
            verdict = matmul_budget(knob, value, new.tiles, old.tiles, True, *new.mnk, case.itemsize, case.sms)
        elif verdict is None:
            assert new.launch is not None
            verdict = register_budget(knob, value, new.launch, case.sms, LIVE_VALUES[new.launch.path])
        if not verdict.kept:
            return Pruned(value, False, f"stage {new.stage} ({new.kind}): {verdict.reason}")
        reasons.append(f"stage {new.stage} ({new.kind}): {verdict.reason}")
    return Pruned(value, True, "; ".join(reasons))
