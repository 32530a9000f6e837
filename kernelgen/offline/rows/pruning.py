"""Which values of a row knob are worth timing at one case, and why: online and split only where
the reductions fold into one pass and the shape calls for them, no looping over rows that fit in
registers, then the shared rules (kernelgen.offline.frame.pruning, kernelgen.offline.budgets)."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned, fill_the_sms, judge_each
from kernelgen.offline.dispatch import frame_key
from kernelgen.offline.launch import Launch, next_pow2
from kernelgen.offline.frame.pruning import NOT_BY_PROGRAMS, FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.rows import knobs as defaults
from kernelgen.offline.rows.fusion import fusible, levels
from kernelgen.offline.rows.knobs import RowKnobs
from kernelgen.offline.rows.launch import rows_launch


def prune_rows(case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list) -> list[Pruned]:
    rows, cols = frame_key(case.input_shapes)

    def launch(knobs: RowKnobs) -> Launch:
        return rows_launch(knobs, rows, cols, case.sms, case.itemsize)

    def judge(knob: str, value: Any, knobs: KnobsModel) -> Pruned:
        assert isinstance(knobs, RowKnobs) and isinstance(case.base, RowKnobs)
        got = launch(knobs)
        special = _row_rules(case, knob, value, knobs, got, rows, cols)
        if special is not None:
            return special
        # a row algorithm counts through the launch's path: None and "looped" both loop a 50257-wide row
        same_code = (knobs.eviction, knobs.persistent, knobs.autotune) == (case.base.eviction, case.base.persistent,
                                                                           case.base.autotune)
        return case.same_or_budget(knob, value, got, launch(case.base), same_code)

    judged = judge_each(label, resolve, knob, values, case.base, judge)
    if knob in NOT_BY_PROGRAMS:
        return judged
    return fill_the_sms(knob, judged, getattr(case.base, knob),
                        lambda v: launch(resolve({**case.base.model_dump(), knob: v})).programs, case.sms)


def _row_rules(case: FrameCase, knob: str, value: Any, knobs: RowKnobs, launch: Launch, rows: int, cols: int) -> Pruned | None:
    base = case.base
    assert isinstance(base, RowKnobs)
    graph = case.view.graph
    n_levels = levels(graph)
    fits = next_pow2(cols) <= (base.MAX_SINGLE_PASS or defaults.ROW_MAX_SINGLE)
    if knob == "algorithm":
        return _algorithm(case, value, knobs, launch, rows, cols, n_levels, fits)
    if knob == "persistent" and value:
        return case.persistent(value, launch)
    if knob == "num_stages" and launch.path == "single":
        return Pruned(value, False, f"rows of {cols} sit in registers: no loop whose loads num_stages could pipeline")
    if knob == "MAX_SINGLE_PASS" and value < next_pow2(cols) <= defaults.ROW_SINGLE_LIMIT and launch.path != "single":
        return Pruned(value, False, f"rows of {cols} fit a {next_pow2(cols)}-wide register tile; MAX_SINGLE_PASS={value} "
                                    f"would loop over them, {n_levels + 1} reads instead of 1")
    return None


def _algorithm(case: FrameCase, value: Any, knobs: RowKnobs, launch: Launch, rows: int, cols: int, n_levels: int,
               fits: bool) -> Pruned | None:
    why = fusible(case.view.graph)
    if value in ("online", "split") and why is not None:
        return Pruned(value, False, f"{value} needs statistics that merge in one pass; {case.spec.name}'s do not: {why}")
    if value == "online":
        if launch.path != "online":
            return Pruned(value, False, f"rows of {cols} fit in registers (<= {knobs.MAX_SINGLE_PASS or defaults.ROW_MAX_SINGLE}): "
                                        "read once already, online changes nothing here")
        if n_levels < 2 and all(o.space != "full" for o in case.view.outputs):
            return Pruned(value, False, f"one reduction and no per-element output: the looped kernel reads each row of {cols} "
                                        "once already; online is the same work")
        row_bytes = cols * case.itemsize
        in_flight = min(launch.programs, case.sms * max(1, 32 // launch.num_warps)) * launch.block_r * row_bytes
        return Pruned(value, True, f"rows of {cols} > the single-pass limit: looped reads each row {n_levels + 1} times "
                                   f"({n_levels} statistics pass(es) + the write pass), online once plus a write-pass "
                                   f"re-read of ~{in_flight / 2**20:.0f} MiB in flight ({'fits' if in_flight < 40 * 2**20 else 'exceeds'} a 50 MB L2)")
    if value == "split":
        if launch.path != "split":
            return Pruned(value, False, f"{rows} rows >= 2 x {case.sms} SMs, or rows of {cols} <= {defaults.SPLIT_MIN_COLS} "
                                        "columns: every SM has rows already; split would add a launch and a round trip")
        return Pruned(value, True, f"{rows} rows on {case.sms} SMs leave {max(case.sms - rows, 0)} SMs idle with a program per row; "
                                   f"split runs {launch.programs} programs ({launch.chunks} chunks of a row each)")
    if value == "looped" and fits:
        return Pruned(value, False, f"rows of {cols} fit in registers: looping re-reads each row {n_levels + 1} times instead of once")
    if value == "single" and launch.path != "single":
        return Pruned(value, False, f"rows of {cols} exceed {defaults.ROW_SINGLE_LIMIT}: single falls back to the loop")
    return None
