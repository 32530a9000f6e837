"""The families of the offline generator, in the order they are asked, and the route of a spec to
the first that serves it.

Order: the specialised, tuned families first (their kernels are the fastest where they apply),
the general n-dimensional family last (it serves most of what they refuse). A new family is one
folder beside these (kernelgen/offline/<family>/: its family.py implementing
kernelgen.offline.family.Family, its knobs, its emission) and one line in FAMILIES below.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from kernelgen.offline.conv.family import ConvFamily
from kernelgen.offline.family import Family, Refused, Served
from kernelgen.offline.frontend.trace import traced_spec
from kernelgen.offline.matmul.family import MatmulFamily
from kernelgen.offline.nd.family import NdFamily
from kernelgen.offline.pointwise.family import PointwiseFamily
from kernelgen.offline.rows.family import RowsFamily
from kernelgen.offline.unsupported import unsupported
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
class Routed:
    """The family that serves a spec, and what it said when it accepted it."""

    family: Family
    served: Served


@functools.lru_cache(maxsize=64)
def _route(spec_json: str) -> Routed:
    spec = OperatorSpec.model_validate_json(spec_json)
    traced_spec(spec_json)  # the front end's refusal (a reference that cannot be traced) is every family's
    refusals: list[Refused] = []
    for family in FAMILIES:
        verdict = family.examine(spec)
        if isinstance(verdict, Served):
            return Routed(family, verdict)
        refusals.append(verdict)
    details = [r for r in refusals if r.scope == "detail"]
    unsupported((details or refusals)[-1].reason)


def route(spec: OperatorSpec) -> Routed:
    """The first family that serves `spec` (cached on its content), or UnsupportedOperatorError with
    the reason of the last family that recognised it but refused a detail."""
    return _route(spec.model_dump_json())
