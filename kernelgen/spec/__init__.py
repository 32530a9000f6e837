"""The operator spec: the YAML a user writes, validated at the edge into typed objects.

    spec = load_spec("operator_specs/broadcast.yaml")   # OperatorSpec, or SpecError naming every mistake
    fn = load_reference(spec)                           # the spec's PyTorch reference as a callable
    inputs = draw_inputs(spec, spec.test_cases[0], "float32", seed=0, device="cpu")
"""

from kernelgen.spec.load import load_spec, validate_spec_data
from kernelgen.spec.model import (DEFAULT_TOLERANCES, DTYPES, FLOAT_DTYPES, InputSpec, OperatorSpec, OutputSpec,
                                  ParamSpec, ToleranceSpec, parse_init)
from kernelgen.spec.reference import PRELUDE, load_reference
from kernelgen.spec.sampling import draw_inputs, torch_dtype
from kernelgen.spec.shapes import Case, Shape, eval_shape_expr

__all__ = [
    "Case", "DEFAULT_TOLERANCES", "DTYPES", "FLOAT_DTYPES", "InputSpec", "OperatorSpec", "OutputSpec", "PRELUDE",
    "ParamSpec", "Shape", "ToleranceSpec", "draw_inputs", "eval_shape_expr", "load_reference", "load_spec",
    "parse_init", "torch_dtype", "validate_spec_data",
]
