"""The matmul family: out = epilogue(a @ b) for 2-D inputs a [M, K] and b [K, N] (either may be
read transposed), the epilogue pointwise on the fp32 accumulator (bias, activation, scale)."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice, routes
from kernelgen.offline.family import Served
from kernelgen.offline.frame.family import FrameFamily
from kernelgen.offline.frame.host import render_file
from kernelgen.offline.frame.plan import FramePlan
from kernelgen.offline.frame.pruning import FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.matmul.emit import matmul_context, matmul_indices, matmul_key
from kernelgen.offline.matmul.kernel import epilogue_refusal
from kernelgen.offline.matmul.knobs import MatmulKnobs
from kernelgen.offline.matmul.pruning import prune_matmul
from kernelgen.offline.matmul.round0 import first_choices as matmul_first_choices
from kernelgen.offline.naming import Names
from kernelgen.spec import OperatorSpec


class MatmulFamily(FrameFamily):
    name = "matmul"
    labels = ("matmul",)
    knobs_model = MatmulKnobs

    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        plan: FramePlan = served.plan.fresh()
        a_idx, b_idx = matmul_indices(plan.view)
        rs = routes(spec, knobs, entries, matmul_key(plan.view, a_idx, b_idx, spec), lambda k: self.resolve(served, k))
        names = Names(spec)
        context = matmul_context(spec, plan.view, plan.kind, names, rs)
        return render_file("matmul", spec, plan.view, served.label, served.summary, knobs, names, context)

    def refusal(self, plan: FramePlan) -> str | None:
        a_idx, b_idx = matmul_indices(plan.view)
        return epilogue_refusal(plan.view.graph, a_idx, b_idx)

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        """float32 operands copied K-major where the perf case's are not (matmul/round0.py); the
        tiles follow the file's table."""
        return matmul_first_choices(spec, served.plan.view, sm_count)

    def prune_case(self, case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str,
                   values: list) -> list[Pruned]:
        return prune_matmul(case, label, resolve, knob, values)
