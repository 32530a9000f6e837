"""The spec's analysis, once per spec content: its traced reference and its family."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kernelgen.spec import OperatorSpec

if TYPE_CHECKING:
    from kernelgen.offline.classify import Classification
    from kernelgen.offline.trace import Traced


@functools.lru_cache(maxsize=64)
def route(spec_json: str) -> str:
    """Which generator serves the spec: "classic" (the tuned pointwise, row and matmul families) when
    it can, else "nd"; UnsupportedOperatorError, with the more specific reason, when neither can."""
    from kernelgen.errors import UnsupportedOperatorError

    try:
        analyse(spec_json)
        return "classic"
    except UnsupportedOperatorError as classic:
        from kernelgen.offline.nd.program import analyse_nd_cached

        try:
            analyse_nd_cached(spec_json)
        except UnsupportedOperatorError as nd:
            if "symbolic shapes failed" in nd.message:
                raise classic from None
            raise nd from None
        return "nd"


@functools.lru_cache(maxsize=64)
def analyse(spec_json: str) -> tuple[Traced, Classification]:
    # Tracing costs ~0.1-0.5 s (make_fx per test case and dtype); the optimize loop asks for many
    # knob settings of one spec, so the analysis is cached on the spec's content.
    from kernelgen.offline.classify import classify
    from kernelgen.offline.trace import trace_reference

    spec = OperatorSpec.model_validate_json(spec_json)
    traced = trace_reference(spec)
    return traced, classify(traced)
