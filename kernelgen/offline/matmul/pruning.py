"""Which values of a matmul knob are worth timing at one case, and why: the tile each value gives
at the case's M x N x K against the shared budgets (kernelgen.offline.budgets.matmul_budget)."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import Pruned, judge_each, matmul_budget
from kernelgen.offline.frame.pruning import FrameCase
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.matmul.knobs import MatmulKnobs
from kernelgen.offline.launch import matmul_tiles


def prune_matmul(case: FrameCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list) -> list[Pruned]:
    m, n, k = mnk(case)
    fp32 = case.dtype == "float32"

    def judge(knob: str, value: Any, knobs: KnobsModel) -> Pruned:
        assert isinstance(knobs, MatmulKnobs) and isinstance(case.base, MatmulKnobs)
        return matmul_budget(knob, value, matmul_tiles(knobs, m, n, fp32, k), matmul_tiles(case.base, m, n, fp32, k),
                             knobs.autotune == case.base.autotune, m, n, k, case.itemsize, case.sms)

    return judge_each(label, resolve, knob, values, case.base, judge)


def mnk(case: FrameCase) -> tuple[int, int, int]:
    """M, N and K of the case: the matmul's operands' shapes, transposed as the reference reads them."""
    graph, inputs = case.view.graph, case.view.inputs
    mm = next(n for n in graph.nodes if n.op == "mm")
    a_i, b_i = (graph.node(i).attrs["index"] for i in mm.args)
    a, b = case.shapes[case.spec.input_names[a_i]], case.shapes[case.spec.input_names[b_i]]
    m, k = (a[1], a[0]) if inputs[a_i].transposed else (a[0], a[1])
    n = b[0] if inputs[b_i].transposed else b[1]
    return m, n, k
