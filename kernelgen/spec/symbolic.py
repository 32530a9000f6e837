"""What the reference does to shapes, read from one run on fake tensors whose every size is a symbol.

The reference runs once under torch's FakeTensorMode with a ShapeEnv (no memory, no kernel), each
input dimension a symbol of its own (`duck_shape=False`: two sizes that happen to be equal in the case
stay two symbols unless the reference makes them equal). What comes back is exact where a guess
from one case is not: each output dimension as an expression over the input dimensions and the
module's constants (`x[2] - conv2d_weight[2] + 1`, not "conv2d_weight[0]" because C_out happened to
equal H - 2), the sizes the reference pins to a constant (a LayerNorm's normalized shape), the sizes it
requires to be equal (a convolution's input channels), and the aten operators it calls, which say
what the reference IS (a convolution, a GEMM with an epilogue, a reduction).

Dimensions of size 0 or 1 in the traced case are constants to the ShapeEnv (broadcasting depends on
them), so every expression is checked against the other cases by whoever uses it (spec.outshapes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kernelgen.spec.model import OperatorSpec
from kernelgen.spec.rnnshapes import rnn_shapes
from kernelgen.spec.shapes import Case

MAX_CALLS = 4096  # operators recorded per run: a reference looping in Python is still told apart by its first ones


@dataclass(frozen=True)
class SymbolicTrace:
    """One symbolic run of the reference (spec.symbolic.trace_reference)."""

    case: Case  # the case whose sizes were the symbols' hints
    labels: dict[Any, str]  # sympy symbol -> "x[2]"
    outputs: list[list[Any]]  # per output, per dim: a sympy expression (an Integer where it is constant)
    pinned: dict[str, int] = field(default_factory=dict)  # "x[1]" -> 64: a size the reference requires
    equal: list[tuple[str, str]] = field(default_factory=list)  # ("conv2d_weight[1]", "x[1]"): sizes it makes equal
    calls: list[str] = field(default_factory=list)  # aten operators in the order called: "convolution", "add", ...

    @property
    def ops(self) -> list[str]:
        """Each operator once, in order of its first call."""
        return list(dict.fromkeys(self.calls))

    def render(self, expr: Any) -> str:
        """An expression in the inputs' dimension labels: `x[2] - conv2d_weight[2] + 1`."""
        return render_expr(expr, self.labels)

    def evaluate(self, expr: Any, case: Case) -> int | None:
        """The expression's value at `case` (None when a symbol's input dim is not in it)."""
        import sympy

        values = {}
        for sym in getattr(expr, "free_symbols", ()):
            label = self.labels.get(sym)
            name, _, rest = (label or "").partition("[")
            dim = int(rest.rstrip("]")) if rest else None
            if name not in case or dim is None or dim >= len(case[name]):
                return None
            values[sym] = sympy.Integer(case[name][dim])
        value = sympy.sympify(expr).xreplace(values)
        return int(value) if value.is_Integer else None


# --- printing --------------------------------------------------------------------------------------
def _order(term: Any, position: dict[Any, int]) -> tuple:
    """Terms as a person writes them: positive ones first, then by the inputs' order (x[2] before
    conv2d_weight[2]), the constant last."""
    places = sorted(position.get(s, len(position)) for s in getattr(term, "free_symbols", ()))
    return (not places, bool(term.as_coeff_Mul()[0] < 0), places, str(term))


def render_expr(expr: Any, labels: dict[Any, str]) -> str:
    import sympy
    from torch.utils._sympy import functions as fns

    position = {sym: i for i, sym in enumerate(labels)}  # labels are made in input order, dim by dim

    def atom(e: Any) -> str:
        """A right operand of // or %: in parentheses unless it is one symbol or number."""
        text = go(e, True)
        return text if e.is_Symbol or e.is_Integer else f"({text})"

    def go(e: Any, top: bool = False) -> str:
        if isinstance(e, int) or getattr(e, "is_Integer", False):
            return str(int(e))
        if e.is_Symbol:
            return labels.get(e, str(e))
        if e.is_Add:
            terms = sorted(e.args, key=lambda t: _order(t, position))
            text = go(terms[0])
            for t in terms[1:]:
                if bool(t.as_coeff_Mul()[0] < 0):
                    text += f" - {go(-t)}"
                else:
                    text += f" + {go(t)}"
            return text if top else f"({text})"
        if e.is_Mul:
            coeff, rest = e.as_coeff_Mul()
            factors = [f"({go(f, True)})" if isinstance(f, (fns.FloorDiv, fns.Mod, fns.PythonMod)) else go(f)
                       for f in sympy.Mul.make_args(rest)]
            if coeff == -1:
                return "-" + "*".join(factors)
            return "*".join(([str(coeff)] if coeff != 1 else []) + factors)
        if isinstance(e, fns.FloorDiv):
            return f"{go(e.args[0])} // {atom(e.args[1])}"
        if isinstance(e, fns.CeilDiv):
            return f"ceil({go(e.args[0], True)} / {go(e.args[1], True)})"
        if isinstance(e, (fns.Mod, fns.PythonMod)):
            return f"{go(e.args[0])} % {atom(e.args[1])}"
        if isinstance(e, (fns.Max, fns.Min)):
            return f"{type(e).__name__.lower()}({', '.join(go(a, True) for a in e.args)})"
        if e.is_Pow and e.args[1].is_Integer and int(e.args[1]) > 0:
            return f"{go(e.args[0])}**{int(e.args[1])}"
        return str(e.xreplace({s: sympy.Symbol(labels.get(s, str(s))) for s in e.free_symbols}))

    return go(expr, True)


def _tidy(expr: Any, divisible: set[tuple[Any, int]]) -> Any:
    """`8*(c // 8)` as `c` where the reference requires c to be a multiple of 8 (a GroupNorm's channels,
    split into groups and joined again): a multiple of an exact floor division is a multiple of its
    numerator. A bare `c // 8` stays as it reads."""
    from torch.utils._sympy.functions import FloorDiv

    def whole(e: Any) -> bool:
        if not e.is_Mul:
            return False
        coeff, rest = e.as_coeff_Mul()
        return (isinstance(rest, FloorDiv) and rest.args[1].is_Integer and coeff.is_Integer and coeff != 0
                and (rest.args[0], int(rest.args[1])) in divisible and int(coeff) % int(rest.args[1]) == 0)

    def undo(e: Any) -> Any:
        coeff, rest = e.as_coeff_Mul()
        return (int(coeff) // int(rest.args[1])) * rest.args[0]

    return expr.replace(whole, undo) if hasattr(expr, "replace") else expr


# --- the run ---------------------------------------------------------------------------------------
class _OpRecorder:
    """A TorchDispatchMode that notes each aten operator the reference calls (made lazily: torch)."""

    @staticmethod
    def make() -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode

        class Recorder(TorchDispatchMode):
            def __init__(self) -> None:
                super().__init__()
                self.calls: list[str] = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                name = str(func.overloadpacket).removeprefix("aten.")
                if not name.startswith("prim.") and len(self.calls) < MAX_CALLS:
                    self.calls.append(name)
                return func(*args, **(kwargs or {}))

        return Recorder()


def _fake_inputs(spec: OperatorSpec, case: Case, mode: Any) -> tuple[list[Any], dict[Any, str]]:
    import torch
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    from kernelgen.spec.sampling import torch_dtype

    fakes, labels = [], {}
    for inp in spec.inputs:
        meta = torch.empty(case[inp.name], dtype=torch_dtype(spec.input_dtype(inp, spec.dtypes[0])), device="meta")
        context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * meta.dim())
        fake = mode.from_tensor(meta, symbolic_context=context)
        for d, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt):
                labels[size.node.expr] = f"{inp.name}[{d}]"
        fakes.append(fake)
    return fakes, labels


def _run(spec: OperatorSpec, case: Case) -> SymbolicTrace:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from kernelgen.spec.reference import load_reference

    fn = load_reference(spec)
    env = ShapeEnv(duck_shape=False)
    mode = FakeTensorMode(shape_env=env)
    fakes, labels = _fake_inputs(spec, case, mode)
    recorder = _OpRecorder.make()
    with rnn_shapes(), mode, recorder:
        out = fn(*fakes, **spec.param_defaults)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    pinned: dict[str, int] = {}
    classes: dict[Any, list[Any]] = {}  # the ShapeEnv's representative -> the symbols it stands for
    for sym, label in labels.items():
        value = env.replace(sym)
        if value.is_Integer:
            pinned[label] = int(value)
        elif value in labels:
            classes.setdefault(value, []).append(sym)
    # Sizes made equal are named after the first input that has them (gemm_weight[0], not gemm_bias[0]).
    position = {sym: i for i, sym in enumerate(labels)}
    canonical = {rep: min(members, key=position.__getitem__) for rep, members in classes.items()}
    equal = [(labels[s], labels[canonical[rep]]) for rep, members in classes.items() for s in members
             if s != canonical[rep]]

    divisible = {(env.replace(m.args[0]).xreplace(canonical), int(m.args[1])) for m in env.divisible
                 if m.args[1].is_Integer}

    def named(size: Any) -> Any:
        if not isinstance(size, torch.SymInt):
            return int(size)
        return _tidy(env.replace(size.node.expr).xreplace(canonical), divisible)

    shapes = [[named(s) for s in o.shape] for o in outs if isinstance(o, torch.Tensor)]
    return SymbolicTrace(case=case, labels=labels, outputs=shapes, pinned=pinned, equal=equal, calls=recorder.calls)


@lru_cache(maxsize=32)
def _cached(spec_json: str, case_json: str) -> SymbolicTrace | None:
    spec = OperatorSpec.model_validate_json(spec_json)
    try:
        return _run(spec, json.loads(case_json))
    except Exception:  # noqa: BLE001 - an op without a fake kernel, a data-dependent shape: no symbolic facts
        return None


def trace_reference(spec: OperatorSpec, case: Case | None = None) -> SymbolicTrace | None:
    """The reference run symbolically with `case`'s sizes as hints (default: the first perf case);
    None when it cannot be (no reference, a data-dependent shape, an op fake tensors do not support)."""
    if spec.reference is None:
        return None
    case = case if case is not None else spec.effective_perf_cases[0]
    return _cached(spec.model_dump_json(), json.dumps(case, sort_keys=True))
