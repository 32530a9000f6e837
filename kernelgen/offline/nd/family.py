"""The n-dimensional family's face (kernelgen.offline.family): what the families before it refuse,
within reductions over any dims, norms, losses, scans, pooling, attention and batched matmuls, as a
program of stages (kernelgen.offline.stages) with the engine's own stage kinds only."""

from __future__ import annotations

from collections.abc import Mapping

from kernelgen.offline.budgets import Pruned
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice, routes
from kernelgen.offline.family import Family, Refused, Served, Subject, Verdict
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.nd.knobs import NdKnobs
from kernelgen.offline.nd.pruning import prune_nd
from kernelgen.offline.nd.round0 import first_choices as nd_first_choices
from kernelgen.offline.stages.analysis import analyse, dispatch_key
from kernelgen.offline.stages.cases import stage_case
from kernelgen.offline.stages.file import stage_file
from kernelgen.offline.unsupported import NotServed
from kernelgen.spec import OperatorSpec


class NdFamily(Family):
    name = "nd"
    knobs_model = NdKnobs

    def examine(self, subject: Subject) -> Verdict:
        if subject.traced.graph.computes("conv"):
            return Refused(self.name, "a convolution (the conv family's)", scope="outside")
        try:
            analysis = analyse(subject.spec, subject.traced)
        except NotServed as e:
            return Refused(self.name, e.what)
        return Served(analysis, "nd", analysis.summary)

    def emit(self, spec: OperatorSpec, served: Served, knobs: KnobsModel, entries: list[DispatchEntry]) -> str:
        rs = routes(spec, knobs, entries, lambda shapes: dispatch_key(spec, shapes), lambda k: self.resolve(served, k))
        return stage_file(spec, served.plan, rs, "nd")

    def first_choices(self, spec: OperatorSpec, served: Served, sm_count: int) -> list[FirstChoice]:
        """The file's heuristics at every perf case x dtype (single-pass reductions up to 16384
        elements, tiles of 4096, the matmul table), and `split=True` where a reduction's kept blocks
        leave the SMs idle (nd/round0.py); each case's reason says what it launches."""
        return nd_first_choices(lambda shapes, dtype: stage_case(spec, served.plan, shapes, dtype, sm_count),
                                spec.effective_perf_cases, spec.dtypes)

    def prune(self, spec: OperatorSpec, served: Served, knob: str, values: list, base: KnobsModel,
              shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
        case = stage_case(spec, served.plan, dict(shapes), dtype, sm_count)
        return prune_nd(case, served.label, lambda k: self.resolve(served, k), knob, values, base)
