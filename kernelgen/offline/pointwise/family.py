"""The pointwise family: elementwise work over the inputs' broadcast frame (activations, scales,
biases, comparisons, casts), one program per tile, no reduction."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice, frame_key, routes
from kernelgen.offline.family import Served
from kernelgen.offline.frame.emitter import assign_spaces
from kernelgen.offline.frame.family import FrameFamily
from kernelgen.offline.frame.host import render_file
from kernelgen.offline.frame.plan import FramePlan
from kernelgen.offline.frame.pruning import FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.naming import Names
from kernelgen.offline.pointwise.emit import pointwise_context
from kernelgen.offline.pointwise.knobs import PointwiseKnobs
from kernelgen.offline.pointwise.pruning import prune_pointwise
from kernelgen.spec import OperatorSpec


class PointwiseFamily(FrameFamily):
    name = "pointwise"
    labels = ("pointwise",)
    knobs_model = PointwiseKnobs

    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        plan: FramePlan = served.plan.fresh()
        rs = routes(spec, knobs, entries, lambda shapes: frame_key([shapes[n] for n in spec.input_names]),
                    lambda k: self.resolve(served, k))
        assign_spaces(plan.view.graph, plan.kind.roles)
        names = Names(spec)
        context = pointwise_context(spec, plan.view, plan.kind, names, rs)
        return render_file("pointwise", spec, plan.view, served.label, served.summary, knobs, names, context)

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        return []  # the file's tiles reach 87-100% of copy bandwidth at every shape: round 0 keeps them

    def prune_case(self, case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str,
                   values: list) -> list[Pruned]:
        return prune_pointwise(case, label, resolve, knob, values)
