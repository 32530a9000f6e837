"""Which kind of operator a spec is, for the advice the prompts carry
(templates/prompts/advice/<kind>.md.j2).

The spec's `category` has seven values; the advice needs more (a cumsum is a scan, not a reduction;
a rotary embedding is neither pointwise nor matmul). So the reference decides first, by the calls it
makes, and the category only when the reference shows nothing more specific: a cumsum reference is
a scan even when its category is "other".
"""

from __future__ import annotations

import ast
from typing import Literal

from kernelgen.spec import OperatorSpec

OperatorKind = Literal["pointwise", "reduction", "scan", "normalization", "softmax", "matmul", "indexing",
                       "rotary", "attention"]
KINDS: tuple[str, ...] = OperatorKind.__args__  # type: ignore[attr-defined]

_CATEGORY_KIND: dict[str, OperatorKind] = {
    "pointwise": "pointwise", "broadcast": "pointwise", "reduction": "reduction", "softmax": "softmax",
    "normalization": "normalization", "matmul": "matmul",
}
# Calls that name the kind outright, most specific first.
_SCANS = {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "associative_scan"}
_ATTENTION = {"scaled_dot_product_attention", "multi_head_attention_forward"}
_INDEXING = {"gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add", "index_copy",
             "index_put", "index_fill", "take", "take_along_dim", "embedding", "embedding_bag", "masked_select",
             "masked_scatter", "one_hot"}
_NORMS = {"layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "normalize", "local_response_norm",
          # nn modules, as a KernelBench problem's Model builds them
          "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
          "InstanceNorm2d", "InstanceNorm3d"}
_SOFTMAX = {"softmax", "log_softmax", "softmin", "Softmax", "LogSoftmax"}
_MATMUL = {"matmul", "mm", "bmm", "addmm", "baddbmm", "linear", "einsum", "tensordot", "dot", "mv", "addmv", "Linear"}
_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "norm", "logsumexp", "argmax",
               "argmin", "all", "any", "count_nonzero", "nansum", "nanmean", "var_mean", "std_mean"}
_ROTARY_WORDS = ("rotary", "rope")


def _called_names(source: str) -> tuple[set[str], bool]:
    """Names of every function or method the reference calls, and whether it uses `@`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), False
    names: set[str] = set()
    matmul = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                names.add(f.attr)
            elif isinstance(f, ast.Name):
                names.add(f.id)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            matmul = True
    return names, matmul


def _is_rotary(spec: OperatorSpec, names: set[str]) -> bool:
    text = f"{spec.name} {spec.description}".lower()
    if any(w in text for w in _ROTARY_WORDS):
        return True
    inputs = {n.lower() for n in spec.input_names}
    return {"cos", "sin"} <= inputs or "rotate_half" in names


def operator_kind(spec: OperatorSpec) -> OperatorKind:
    names, uses_matmul = _called_names(spec.reference or "")
    matmul = uses_matmul or bool(names & _MATMUL)
    if names & _ATTENTION or (names & _SOFTMAX and matmul) or "attention" in spec.name:
        return "attention"
    if _is_rotary(spec, names):
        return "rotary"
    if names & _SCANS:
        return "scan"
    if names & _INDEXING:
        return "indexing"
    if spec.category in _CATEGORY_KIND:
        return _CATEGORY_KIND[spec.category]
    for calls, kind in ((_NORMS, "normalization"), (_SOFTMAX, "softmax"), (_MATMUL, "matmul")):
        if names & calls:
            return kind  # type: ignore[return-value]
    if matmul:
        return "matmul"
    if names & _REDUCTIONS:
        return "reduction"
    return "pointwise"
