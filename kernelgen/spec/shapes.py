"""Shapes in a spec, and the restricted arithmetic a spec's `flops` expression may use over them."""

from __future__ import annotations

import ast
from typing import Any

Shape = list[int]
Case = dict[str, Shape]  # input name -> shape, one test or perf case

_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)


def eval_shape_expr(expr: str, case: Case) -> float:
    """Evaluate e.g. `2 * a[0] * a[1] * b[1]` or `numel(x)`; inputs name their shapes."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in case:
                raise ValueError(f"unknown name {node.id!r} (inputs: {', '.join(case)})")
            return case[node.id]
        if isinstance(node, ast.Subscript):
            seq = ev(node.value)
            idx = ev(node.slice)
            return seq[idx]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINOPS):
            left, right = ev(node.left), ev(node.right)
            return {
                ast.Add: lambda: left + right,
                ast.Sub: lambda: left - right,
                ast.Mult: lambda: left * right,
                ast.Div: lambda: left / right,
                ast.FloorDiv: lambda: left // right,
                ast.Pow: lambda: left**right,
                ast.Mod: lambda: left % right,
            }[type(node.op)]()
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "numel"
            and len(node.args) == 1
        ):
            n = 1
            for d in ev(node.args[0]):
                n *= d
            return n
        raise ValueError(f"unsupported syntax in expression: {ast.unparse(node)!r}")

    return ev(ast.parse(expr, mode="eval"))
