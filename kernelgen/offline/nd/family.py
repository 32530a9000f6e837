"""The n-dimensional family's face (kernelgen.offline.family): what the families before it refuse,
within reductions over any dims, norms, losses, scans, pooling, attention and batched matmuls, as a
program of stages (kernelgen.offline.nd)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelgen.offline.budgets import Pruned, judge_each
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice, routes
from kernelgen.offline.family import Family, Refused, Served, Verdict
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.nd.knobs import NdKnobs
from kernelgen.offline.nd.program import analyse_nd_cached, dispatch_key, generate_nd_source
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec


class NdFamily(Family):
    name = "nd"
    knobs_model = NdKnobs

    def examine(self, spec: OperatorSpec) -> Verdict:
        try:
            analysis = analyse_nd_cached(spec.model_dump_json())
        except NotServed as e:
            return Refused(self.name, e.what)
        return Served(analysis, "nd", analysis.summary)

    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        if entries:
            raise ValueError("the nd family has no per-shape dispatch table yet: one setting serves every shape")
        rs = routes(spec, knobs, [], lambda shapes: dispatch_key(spec, shapes), lambda k: self.resolve(served, k))
        return generate_nd_source(spec, served.plan, rs)

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        return []  # its tile heuristics decide per call

    def prune(self, spec: OperatorSpec, served: Served, knob: str, values: list, base: KnobsModel,
              shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
        def judge(knob: str, value: Any, knobs: KnobsModel) -> Pruned:
            return Pruned(value, True, "no pruning rules for the nd family: timed")

        return judge_each("nd", lambda k: self.resolve(served, k), knob, values, base, judge)
