"""The `if __name__ == "__main__":` self-check of a generated kernel file: the spec's first test case,
drawn on the CPU the way kernelgen.spec.draw_inputs does, against the reference copied in."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.naming import Names
from kernelgen.spec import DTYPES, OperatorSpec, parse_init


def _draw(kind: str, args: tuple[float, ...], shape: tuple[int, ...]) -> str:
    """An expression drawing one input on the CPU the way kernelgen.spec.draw_inputs does
    (`parse_init` has checked the number of arguments of each kind)."""
    if kind == "randn":
        return f"torch.randn({shape})"
    if kind == "rand":
        return f"torch.rand({shape})"
    if kind == "uniform":
        return f"(torch.rand({shape}) * {args[1] - args[0]!r} + {args[0]!r})"
    if kind == "normal":
        return f"(torch.randn({shape}) * {args[1]!r} + {args[0]!r})"
    if kind == "randint":
        return f"torch.randint({int(args[0])}, {int(args[1])}, {shape})"
    if kind == "bernoulli":
        return f"(torch.rand({shape}) < {args[0]!r})"
    return f"torch.ones({shape})"


def main_context(spec: OperatorSpec, names: Names) -> dict[str, Any]:
    """The self-check run as a script: the first test case in the first dtype, against the reference."""
    case, dtype = spec.test_cases[0], spec.dtypes[0]
    draws = []
    for inp, nm in zip(spec.inputs, names.inputs):
        kind, args = parse_init(inp.init)
        draws.append((nm, f"{_draw(kind, args, tuple(case[inp.name]))}"
                          f".to(device=device, dtype=torch.{DTYPES[spec.input_dtype(inp, dtype)]})"))
    tol = spec.tolerance_for(dtype)
    return {"draws": draws, "args": names.inputs, "dtype": dtype, "atol": tol.atol, "rtol": tol.rtol,
            "case": ", ".join(f"{n} {list(case[n])}" for n in spec.input_names),
            "reference": (spec.reference or "").strip()}
