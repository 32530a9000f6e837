"""One Triton expression per IR op. Floats are computed in fp32 (loads upcast, stores round once)."""

from __future__ import annotations

import math

from kernelgen.offline.frame.graph import Node
from kernelgen.offline.unsupported import unsupported

_TL_INT = {"int8": "tl.int8", "uint8": "tl.uint8", "int16": "tl.int16", "int32": "tl.int32", "int64": "tl.int64"}
_NAN_ALL = "propagate_nan=tl.PropagateNan.ALL"  # torch.maximum/minimum propagate NaN; tl's default does not

_UNARY = {
    "exp": "tl.exp({a})",
    "exp2": "tl.exp2({a})",
    "log": "tl.log({a})",
    "log2": "tl.log2({a})",
    "log1p": "tl.log(1.0 + {a})",
    "expm1": "(tl.exp({a}) - 1.0)",
    "sqrt": "tl.sqrt({a})",
    "rsqrt": "tl.rsqrt({a})",
    "sigmoid": "tl.sigmoid({a})",
    # tanh(x) = 2 * sigmoid(2x) - 1: tl.math.tanh is missing from some Triton releases (3.9 has none).
    "tanh": "(2.0 * tl.sigmoid(2.0 * {a}) - 1.0)",
    "erf": "tl.math.erf({a})",
    "sin": "tl.sin({a})",
    "cos": "tl.cos({a})",
    "abs": "tl.abs({a})",
    "reciprocal": "(1.0 / {a})",
    "relu": "tl.where({a} < 0, 0.0, {a})",  # written so that NaN passes through, as torch.relu does
    "floor": "tl.floor({a})",
    "ceil": "tl.ceil({a})",
    "trunc": "tl.where({a} < 0, tl.ceil({a}), tl.floor({a}))",
    "sign": "tl.where({a} > 0, 1.0, tl.where({a} < 0, -1.0, 0.0))",
    "square": "({a} * {a})",
    "cube": "({a} * {a} * {a})",
    "neg": "(-{a})",
    "logical_not": "({a} == 0)",
}
_BINARY = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "div": "({a} / {b})",
    "maximum": "tl.maximum({a}, {b}, " + _NAN_ALL + ")",
    "minimum": "tl.minimum({a}, {b}, " + _NAN_ALL + ")",
    "eq": "({a} == {b})",
    "ne": "({a} != {b})",
    "lt": "({a} < {b})",
    "le": "({a} <= {b})",
    "gt": "({a} > {b})",
    "ge": "({a} >= {b})",
    "logical_and": "(({a} != 0) & ({b} != 0))",
    "logical_or": "(({a} != 0) | ({b} != 0))",
    "logical_xor": "(({a} != 0) ^ ({b} != 0))",
    "bitwise_and": "({a} & {b})",
    "bitwise_or": "({a} | {b})",
    "bitwise_xor": "({a} ^ {b})",
}


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


def pointwise(node: Node, args: list[str], arg_nodes: list[Node]) -> str:
    """The Triton expression for a pointwise node, given its operands' expressions."""
    op = node.op
    if op in _UNARY:
        if op == "neg" and arg_nodes[0].dtype == "bool":
            unsupported("negation of a bool tensor")
        return _UNARY[op].format(a=args[0])
    if op == "bitwise_not":
        return f"({args[0]} == 0)" if arg_nodes[0].dtype == "bool" else f"(~{args[0]})"
    if op in _BINARY:
        return _BINARY[op].format(a=args[0], b=args[1])
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
    if op == "pow":
        unsupported("pow with an exponent other than -1, -0.5, 0.5, 1, 2 or 3")
    unsupported(f"the op {op}")
