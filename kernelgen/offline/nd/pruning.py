"""Which values of an nd knob are worth timing at one case, and why: what each value launches in
every stage (nd/launch.py, a model of the generated _tile_config and _matmul_config) against the
shared budgets (kernelgen.offline.budgets) -- a knob no stage reads, a value that launches the
base's kernels, tiles and grids, a tile that spills registers, a matmul tile that breaks the
tensor-core, shared-memory or accumulator budgets, a tile that leaves SMs idle where another fills
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kernelgen.offline.budgets import DEFAULT_SMS, Pruned, fill_the_sms, judge_each, matmul_budget, register_budget
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.nd.launch import StageLaunch, stage_launches
from kernelgen.spec import DTYPES, OperatorSpec

MATMUL_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "pack")
TILE_KNOBS = ("MAX_SINGLE_PASS", "ROW_TILE")
GRID_KNOBS = ("MAX_SINGLE_PASS", "ROW_TILE")  # the tile stages' grids follow BLOCK_K, which these set
# fp32 values a tile holds per element: the tile and a temporary, + an accumulator where it loops
LIVE_VALUES = {"pointwise": 2, "single": 2, "looped": 3, "scan": 3, "split": 3}


@dataclass(frozen=True)
class NdCase:
    """One case a knob's values are judged at."""

    spec: OperatorSpec
    analysis: Any  # kernelgen.offline.nd.program.NdAnalysis
    shapes: dict[str, list[int]]
    fp32: bool
    itemsize: int
    sms: int

    @property
    def shape_text(self) -> str:
        return ", ".join(f"{n} {list(self.shapes[n])}" for n in self.spec.input_names)

    def launches(self, knobs: Any) -> list[StageLaunch]:
        return stage_launches(self.analysis, knobs, self.shapes, self.spec.input_names, self.fp32, self.sms)


def nd_case(spec: OperatorSpec, analysis: Any, shapes: dict[str, list[int]], dtype: str, sm_count: int | None) -> NdCase:
    import torch  # ~1 s: only when values are judged

    return NdCase(spec, analysis, dict(shapes), dtype == "float32", getattr(torch, DTYPES[dtype]).itemsize,
                  sm_count or DEFAULT_SMS)


def prune_nd(case: NdCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list,
             base: KnobsModel) -> list[Pruned]:
    base_launches = case.launches(base)
    kinds = {s.kind for s in base_launches}

    def judge(knob: str, value: Any, knobs: KnobsModel) -> Pruned:
        if knob in MATMUL_KNOBS and "matmul" not in kinds:
            return Pruned(value, False, f"{knob} sets matmul tiles; {case.spec.name}'s stages ({', '.join(sorted(kinds))}) "
                                        "have no matmul")
        if knob in TILE_KNOBS and kinds == {"matmul"}:
            return Pruned(value, False, f"{knob} sets tile stages; {case.spec.name} has matmul stages only")
        changed = [(new, old) for new, old in zip(case.launches(knobs), base_launches) if new != old]
        if not changed:
            return Pruned(value, False, f"{knob}={value!r} launches the same kernels, tiles and grids as the base at "
                                        f"{case.shape_text}: nothing to time")
        return changed_stages(changed, knob, value, case)

    judged = judge_each(label, resolve, knob, values, base, judge)
    if knob in GRID_KNOBS:
        for i, launch in enumerate(base_launches):
            if launch.launch is not None:
                judged = fill_the_sms(knob, judged, getattr(base, knob), _programs(case, resolve, base, knob, i), case.sms)
    return judged


def _programs(case: NdCase, resolve: Callable[[Any], KnobsModel], base: KnobsModel, knob: str, stage: int) -> Callable[[Any], int]:
    """value -> the grid stage `stage` launches with `knob` set to it."""
    def programs(value: Any) -> int:
        launch = case.launches(resolve({**base.model_dump(), knob: value}))[stage].launch
        assert launch is not None
        return launch.programs
    return programs


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


def changed_stages(changed: list[tuple[StageLaunch, StageLaunch]], knob: str, value: Any, case: "NdCase",
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
