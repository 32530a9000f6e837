"""The `if __name__ == "__main__":` self-check of a generated kernel file: the spec's first test case,
drawn on the CPU the way kernelgen.spec.draw_inputs does (kernelgen.spec.init writes the draw), against the reference copied in."""

from __future__ import annotations

import re
from typing import Any

from kernelgen.offline.naming import Names
from kernelgen.runtime import SCRIPT
from kernelgen.spec import DTYPES, OperatorSpec, parse_init
from kernelgen.spec.init import init_code


def main_context(spec: OperatorSpec, names: Names) -> dict[str, Any]:
    """The self-check run as a script: the first test case in the first dtype, against the reference."""
    case, dtype = spec.test_cases[0], spec.dtypes[0]
    draws = []
    for inp, nm in zip(spec.inputs, names.inputs):
        draws.append((nm, f"{init_code(parse_init(inp.init), tuple(case[inp.name]))}"
                          f".to(device=device, dtype=torch.{DTYPES[spec.input_dtype(inp, dtype)]})"))
    tol = spec.tolerance_for(dtype)
    reference = (spec.reference or "").strip()
    return {"draws": draws, "args": names.inputs, "dtype": dtype, "atol": tol.atol, "rtol": tol.rtol,
            "case": ", ".join(f"{n} {list(case[n])}" for n in spec.input_names),
            "reference": reference, "script": SCRIPT,
            # the file imports for the reference only what it names (kernelgen.spec.reference gives it math and F)
            "uses_math": re.search(r"\bmath\b", reference) is not None,
            "uses_f": re.search(r"\bF\b", reference) is not None}
