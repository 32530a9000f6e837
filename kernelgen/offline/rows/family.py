"""The row families: one reduction level or two over the last dimension and what is computed from
them per element -- row sums, means and maxima, softmax and log_softmax, layer and RMS norms --
with the row in registers, looped, in one read pass (online) or split over programs."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import FirstChoice, Route
from kernelgen.offline.family import Served
from kernelgen.offline.frame.emitter import assign_spaces
from kernelgen.offline.frame.family import FrameFamily
from kernelgen.offline.frame.plan import FramePlan
from kernelgen.offline.frame.pruning import FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.naming import Names
from kernelgen.offline.rows.emit import rows_context
from kernelgen.offline.rows.knobs import RowKnobs
from kernelgen.offline.rows.pruning import prune_rows
from kernelgen.offline.rows.round0 import first_choices
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec


class RowsFamily(FrameFamily):
    name = "rows"
    labels = ("row_reduction", "softmax", "layernorm", "rmsnorm")
    knobs_model = RowKnobs

    def context(self, spec: OperatorSpec, plan: FramePlan, names: Names, rs: list[Route]) -> dict[str, Any]:
        return rows_context(spec, plan.view, plan.kind, names, rs)

    def refusal(self, plan: FramePlan) -> str | None:
        try:  # each value per element, per row or scalar: a reduction of a per-row value has no place
            assign_spaces(plan.fresh().view.graph, plan.kind.roles)
        except NotServed as e:
            return e.what
        return None

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        return first_choices(spec, served.plan, sm_count)

    def prune_case(self, case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str,
                   values: list) -> list[Pruned]:
        return prune_rows(case, label, resolve, knob, values)
