"""Which values of an nd knob are worth timing at one case, and why: what each value launches in
every stage (kernelgen.offline.stages.launch, a model of the generated _tile_config and _matmul_config) against the
shared budgets (kernelgen.offline.budgets) -- a knob no stage reads, a value that launches the
base's kernels, tiles and grids, a tile that spills registers, a matmul tile that breaks the
tensor-core, shared-memory or accumulator budgets, a tile that leaves SMs idle where another fills
them."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned, fill_the_sms, judge_each
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.stages.cases import StageCase, changed_stages

MATMUL_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "pack")
TILE_KNOBS = ("MAX_SINGLE_PASS", "ROW_TILE")
GRID_KNOBS = ("MAX_SINGLE_PASS", "ROW_TILE")  # the tile stages' grids follow BLOCK_K, which these set


def prune_nd(case: StageCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list,
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


def _programs(case: StageCase, resolve: Callable[[Any], KnobsModel], base: KnobsModel, knob: str, stage: int) -> Callable[[Any], int]:
    """value -> the grid stage `stage` launches with `knob` set to it."""
    def programs(value: Any) -> int:
        launch = case.launches(resolve({**base.model_dump(), knob: value}))[stage].launch
        assert launch is not None
        return launch.programs
    return programs
