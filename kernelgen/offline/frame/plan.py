"""What the pointwise, row and matmul families know of a spec they serve: the reference over the
frame (kernelgen.offline.frame.trace) and its classification (family label, each input's role)."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

from kernelgen.offline.frame.classify import Classification, classify
from kernelgen.offline.frame.trace import Traced, trace_reference
from kernelgen.spec import OperatorSpec


@dataclass(frozen=True)
class FramePlan:
    traced: Traced
    kind: Classification

    def fresh(self) -> FramePlan:
        """A copy whose graph emission may annotate (spaces): the cached plan stays clean."""
        return FramePlan(copy.deepcopy(self.traced), self.kind)


@functools.lru_cache(maxsize=64)
def analyse_frame(spec_json: str) -> FramePlan:
    # Tracing costs ~0.1-0.5 s (make_fx per test case and dtype); the optimize loop asks for many
    # knob settings of one spec, so the analysis is cached on the spec's content.
    traced = trace_reference(OperatorSpec.model_validate_json(spec_json))
    return FramePlan(traced, classify(traced))
