"""Which values of a pointwise knob are worth timing at one case, and why: the erf polynomial only
where the reference has an erf and the dtype's tolerance leaves room, no pipelining without a loop,
persistent grids only with tiles to loop over, then the shared rules (kernelgen.offline.budgets)."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned, fill_the_sms, judge_each
from kernelgen.offline.frame.launch import collapsed_frame
from kernelgen.offline.launch import Launch
from kernelgen.offline.frame.pruning import NOT_BY_PROGRAMS, FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.pointwise.knobs import PointwiseKnobs
from kernelgen.offline.pointwise.launch import pointwise_launch

ERF_POLY_ERROR = 1.5e-7  # Abramowitz-Stegun 7.1.26's bound on |erf error| (exact arithmetic)
ERF_POLY_FP32 = 6e-7  # the same formula evaluated in fp32, as the kernels do (5.4e-7 measured near x = 0.04)


def prune_pointwise(case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list) -> list[Pruned]:
    def launch(knobs: PointwiseKnobs) -> Launch:
        rows, cols = collapsed_frame(case.input_shapes, keep_last=False)
        return pointwise_launch(knobs, rows, cols, case.itemsize, case.sms)

    def judge(knob: str, value: Any, knobs: KnobsModel) -> Pruned:
        assert isinstance(knobs, PointwiseKnobs)
        got = launch(knobs)
        special = _pointwise_rules(case, knob, value, got)
        if special is not None:
            return special
        same_code = knobs.code_key() == case.base.code_key() and knobs.autotune == case.base.autotune
        return case.same_or_budget(knob, value, got, launch(case.base), same_code)

    judged = judge_each(label, resolve, knob, values, case.base, judge)
    if knob in NOT_BY_PROGRAMS:
        return judged
    return fill_the_sms(knob, judged, getattr(case.base, knob),
                        lambda v: launch(resolve({**case.base.model_dump(), knob: v})).programs, case.sms)


def _pointwise_rules(case: FrameCase, knob: str, value: Any, launch: Launch) -> Pruned | None:
    if knob == "erf" and value == "poly":
        graph = case.view.graph
        if not any(n.op == "erf" for n in graph.nodes if n.id in graph.live()):
            return Pruned(value, False, f"{case.spec.name} has no erf: the same kernel")
        atol = case.spec.tolerance_for(case.dtype).atol
        if ERF_POLY_FP32 > atol / 10:
            return Pruned(value, False, f"|erf error| <= {ERF_POLY_FP32:g} in fp32 is not well inside atol {atol:g} ({case.dtype})")
        return Pruned(value, True, f"erf by A&S 7.1.26: |error| <= {ERF_POLY_ERROR:g} ({ERF_POLY_FP32:g} evaluated in fp32), "
                                   f"far inside atol {atol:g} ({case.dtype}); one exp, a division and five FMAs "
                                   "instead of libdevice's erff")
    if knob == "persistent" and value:
        return case.persistent(value, launch)
    if knob == "num_stages":
        return Pruned(value, False, "a pointwise tile has no loop (persistent loops carry no prefetchable loads): nothing to pipeline")
    return None
