"""The pointwise ops of the IR: for each, the ATen ops that lower to it and its Triton expression.
This is the one place a new pointwise op is added (the op table, kernelgen.offline.frontend.optable,
makes a row for every ATen name here). Floats are computed in fp32 (loads upcast, stores round once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelgen.offline.unsupported import unsupported

_TL_INT = {"int8": "tl.int8", "uint8": "tl.uint8", "int16": "tl.int16", "int32": "tl.int32", "int64": "tl.int64"}
_NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"  # torch.maximum/minimum propagate NaN; tl's default does not


@dataclass(frozen=True)
class Pointwise:
    """One IR op: its Triton expression over its operands' ({a}, {b}) and the ATen ops lowered to it."""

    expr: str
    aten: tuple[str, ...] = ()


UNARY: dict[str, Pointwise] = {
    "neg": Pointwise("(-{a})", ("neg",)),
    "exp": Pointwise("tl.exp({a})", ("exp",)),
    "exp2": Pointwise("tl.exp2({a})", ("exp2",)),
    "log": Pointwise("tl.log({a})", ("log",)),
    "log2": Pointwise("tl.log2({a})", ("log2",)),
    "log1p": Pointwise("tl.log(1.0 + {a})", ("log1p",)),
    "expm1": Pointwise("(tl.exp({a}) - 1.0)", ("expm1",)),
    "sqrt": Pointwise("tl.sqrt({a})", ("sqrt",)),
    "rsqrt": Pointwise("tl.rsqrt({a})", ("rsqrt",)),
    "sigmoid": Pointwise("tl.sigmoid({a})", ("sigmoid",)),
    # tanh(x) = 2 * sigmoid(2x) - 1: tl.math.tanh is missing from some Triton releases (3.9 has none).
    "tanh": Pointwise("(2.0 * tl.sigmoid(2.0 * {a}) - 1.0)", ("tanh",)),
    "erf": Pointwise("tl.math.erf({a})", ("erf",)),
    "sin": Pointwise("tl.sin({a})", ("sin",)),
    "cos": Pointwise("tl.cos({a})", ("cos",)),
    "abs": Pointwise("tl.abs({a})", ("abs",)),
    "reciprocal": Pointwise("(1.0 / {a})", ("reciprocal",)),
    "relu": Pointwise("tl.where({a} < 0, 0.0, {a})", ("relu",)),  # written so that NaN passes through, as torch.relu does
    "floor": Pointwise("tl.floor({a})", ("floor",)),
    "ceil": Pointwise("tl.ceil({a})", ("ceil",)),
    "trunc": Pointwise("tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))", ("trunc",)),
    "sign": Pointwise("tl.where({a} > 0, 1.0, tl.where({a} < 0, -1.0, 0.0))", ("sign",)),
    "square": Pointwise("({a} * {a})", ("square",)),  # also pow(x, 2)
    "cube": Pointwise("({a} * {a} * {a})"),  # pow(x, 3)
    "logical_not": Pointwise("({a} == 0)", ("logical_not",)),
    "bitwise_not": Pointwise("(~{a})", ("bitwise_not",)),  # of a bool: ({a} == 0), below
    "isnan": Pointwise("({a} != {a})", ("isnan",)),
    "isinf": Pointwise('(tl.abs({a}) == float("inf"))', ("isinf",)),
    "isfinite": Pointwise('(tl.abs({a}) < float("inf"))', ("isfinite",)),
}
BINARY: dict[str, Pointwise] = {
    "add": Pointwise("({a} + {b})", ("add",)),
    "sub": Pointwise("({a} - {b})", ("sub", "rsub")),  # rsub: operands swapped when lowered
    "mul": Pointwise("({a} * {b})", ("mul",)),
    "div": Pointwise("({a} / {b})", ("div", "true_divide")),
    "maximum": Pointwise("tl.maximum({a}, {b}, " + _NAN_ALL + ")", ("maximum", "fmax")),
    "minimum": Pointwise("tl.minimum({a}, {b}, " + _NAN_ALL + ")", ("minimum", "fmin")),
    "eq": Pointwise("({a} == {b})", ("eq",)),
    "ne": Pointwise("({a} != {b})", ("ne",)),
    "lt": Pointwise("({a} < {b})", ("lt",)),
    "le": Pointwise("({a} <= {b})", ("le",)),
    "gt": Pointwise("({a} > {b})", ("gt",)),
    "ge": Pointwise("({a} >= {b})", ("ge",)),
    "logical_and": Pointwise("(({a} != 0) & ({b} != 0))", ("logical_and",)),
    "logical_or": Pointwise("(({a} != 0) | ({b} != 0))", ("logical_or",)),
    "logical_xor": Pointwise("(({a} != 0) ^ ({b} != 0))", ("logical_xor",)),
    "bitwise_and": Pointwise("({a} & {b})", ("bitwise_and",)),
    "bitwise_or": Pointwise("({a} | {b})", ("bitwise_or",)),
    "bitwise_xor": Pointwise("({a} ^ {b})", ("bitwise_xor",)),
}
# pow(x, e) lowers to another op for these exponents (1: x itself); other exponents are refused
POW_EXPONENTS = {2: "square", 0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal", 3: "cube"}


def literal(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if math.isnan(value):
            return 'float("nan")'
        if math.isinf(value):
            return 'float("inf")' if value > 0 else '-float("inf")'
        return repr(value)
    return repr(value)


def pointwise(node: Any, args: list[str], arg_nodes: list[Any]) -> str:
    """The Triton expression for a pointwise IR value (any IR's node with `op` and `dtype`), given
    its operands' expressions and nodes."""
    op = node.op
    if op == "bitwise_not" and arg_nodes[0].dtype == "bool":
        return f"({args[0]} == 0)"
    if op in UNARY:
        if op == "neg" and arg_nodes[0].dtype == "bool":
            unsupported("negation of a bool tensor")
        return UNARY[op].expr.format(a=args[0])
    if op in BINARY:
        return BINARY[op].expr.format(a=args[0], b=args[1])
    if op == "where":
        cond = args[0] if arg_nodes[0].dtype == "bool" else f"({args[0]} != 0)"
        return f"tl.where({cond}, {args[1]}, {args[2]})"
    if op == "cast":
        target, src = node.dtype, arg_nodes[0].dtype
        if target == "bool":
            return f"({args[0]} != 0)"
        if target in _TL_INT:
            return f"{args[0]}.to({_TL_INT[target]})"
        if target in ("float16", "bfloat16", "float32", "float64"):
            return f"{args[0]}.to(tl.float32)"  # from int or bool; float math stays fp32
        unsupported(f"a cast from {src} to {target}")
    unsupported(f"the op {op}")
