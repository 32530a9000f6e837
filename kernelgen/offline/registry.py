"""The families of the offline generator, in the order they are asked, and the route of a spec to
the first that serves it.

Order: the specialised, tuned families first (their kernels are the fastest where they apply),
the general n-dimensional family last (it serves most of what they refuse). A new family is one
folder beside these (kernelgen/offline/<family>/: its family.py implementing
kernelgen.offline.family.Family, its knobs, its emission) and one line in FAMILIES below.

A route is made once per spec: the spec's canonical form (its JSON) is computed once and keys the
one cache, the reference is traced once (kernelgen.offline.frontend.trace) and the trace handed to
each family's examine in turn. Everything after -- round 0's choices, the file, the knob space,
pruning -- is asked of the Routed, which holds the family's analysis.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelgen.offline.budgets import DEFAULT_SMS, Pruned
from kernelgen.offline.conv.family import ConvFamily
from kernelgen.offline.dispatch import DispatchEntry, FirstChoice, first_entries
from kernelgen.offline.family import Family, Refused, Served, Subject
from kernelgen.offline.frontend.trace import trace_reference
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.matmul.family import MatmulFamily
from kernelgen.offline.nd.family import NdFamily
from kernelgen.offline.pointwise.family import PointwiseFamily
from kernelgen.offline.rows.family import RowsFamily
from kernelgen.offline.unsupported import NotServed, unsupported
from kernelgen.spec import OperatorSpec

FAMILIES: tuple[Family, ...] = (
    PointwiseFamily(),  # elementwise over the broadcast frame
    RowsFamily(),  # reductions over the last dim: row reductions, softmax, layer and RMS norms
    MatmulFamily(),  # a 2-D matmul with a pointwise epilogue
    # before nd, which refuses convolutions (its only ones are 1x1 with stride 1, batched matmuls), so
    # that this family's refusal of a convolution it does not serve is the reason a user is told
    ConvFamily(),  # convolutions (1-3 spatial dims, transposed, grouped, depthwise) with the chain after them
    NdFamily(),  # reductions, norms, scans, pooling, attention, batched matmuls over any dims
)


@dataclass(frozen=True)
class OfflineKernel:
    source: str  # full text of <name>_triton.py
    family: str  # the label it is served as: pointwise | row_reduction | softmax | layernorm | rmsnorm | matmul | nd
    knobs: KnobsModel  # the knob settings baked into the source (the base route)
    summary: str  # one line: what was traced
    dispatch: tuple[DispatchEntry, ...] = ()  # the per-shape entries routed to their own knobs


@dataclass(frozen=True)
class Routed:
    """The family that serves a spec, what it said when it accepted it, and the subject it examined."""

    family: Family
    served: Served
    subject: Subject

    @property
    def spec(self) -> OperatorSpec:
        return self.subject.spec

    @property
    def label(self) -> str:
        """What the spec is served as (the family's knobs mean; the tuning memory files it under it)."""
        return self.served.label

    def kernel(self, knobs: KnobsModel | Mapping[str, Any] | None = None,
               dispatch: list[DispatchEntry] | None = None) -> OfflineKernel:
        """The file with `knobs` baked in and `dispatch` (entries or their dicts) routed to their own."""
        resolved = self.family.resolve(self.served, knobs)
        entries = [e if isinstance(e, DispatchEntry) else DispatchEntry.model_validate(e) for e in dispatch or []]
        source = self.family.emit(self.spec, self.served, resolved, entries)
        return OfflineKernel(source=source, family=self.label, knobs=resolved, summary=self.served.summary,
                             dispatch=tuple(entries))

    def first_choices(self, sm_count: int | None = None) -> list[FirstChoice]:
        return self.family.first_choices(self.spec, self.served, sm_count or DEFAULT_SMS)

    def first_kernel(self, sm_count: int | None = None) -> OfflineKernel:
        """Round 0's file: the default knobs and a dispatch table of first_choices' settings."""
        return self.kernel(None, first_entries(self.first_choices(sm_count)))

    def knob_space(self) -> dict[str, list[Any]]:
        return self.family.knob_space()

    def prune(self, knob: str, values: list[Any], base: KnobsModel | Mapping[str, Any],
              shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
        resolved = self.family.resolve(self.served, base)
        return self.family.prune(self.spec, self.served, knob, values, resolved, shapes, dtype, sm_count)


def examine(spec: OperatorSpec, key: str) -> Routed:
    """Trace once, then ask each family in order; UnsupportedOperatorError with the reason of the last
    family that recognised the spec but refused a detail (the front end's refusal is every family's)."""
    subject = Subject(spec, key, trace_reference(spec))
    refusals: list[Refused] = []
    for family in FAMILIES:
        verdict = family.examine(subject)
        if isinstance(verdict, Served):
            return Routed(family, verdict, subject)
        refusals.append(verdict)
    details = [r for r in refusals if r.scope == "detail"]
    unsupported((details or refusals)[-1].reason)


_ROUTES: OrderedDict[str, Routed | NotServed] = OrderedDict()  # canonical form -> its route or refusal
_KEEP = 64  # the optimize loop asks one spec many times; a batch goes through many specs


def route(spec: OperatorSpec) -> Routed:
    """The first family that serves `spec`, made once per spec content (the route, and its refusal,
    are kept for the next ask: tracing and examining cost 0.2-1 s)."""
    key = spec.model_dump_json()
    got = _ROUTES.get(key)
    if got is None:
        try:
            got = examine(spec, key)
        except NotServed as e:
            got = e
        _ROUTES[key] = got
        if len(_ROUTES) > _KEEP:
            _ROUTES.popitem(last=False)
    _ROUTES.move_to_end(key)
    if isinstance(got, NotServed):
        raise NotServed(got.what)
    return got
