"""Which kind of operator a spec is, for the advice the prompts carry
(templates/prompts/advice/<kind>.md.j2).

What the reference IS decides, not the spec's free-text category: the aten operators it calls when
run symbolically (kernelgen.spec.symbolic) — a KernelBench Conv2d is `aten.convolution` whatever
its category says, a Linear followed by a GroupNorm is a GEMM with an epilogue. The most specific
operator wins (a convolution before a matmul before a normalization before a reduction), and an
attention is a softmax whose result feeds a matmul. The category only refines a reference made of
plain reductions and arithmetic (a softmax or a norm written by hand). Where the reference cannot
run symbolically, the names it calls in its source decide, as before.

A reference that chains GEMMs or convolutions (two without a softmax between them, three or more, or
an attention with its projections) is a **model**, whatever its layers are: KernelBench level 3's MLP
is three GEMMs, not "a matmul operator". Its advice says several kernels and intermediate buffers are
allowed, then gives each kind of layer it holds (`model_parts`) its own advice.
"""

from __future__ import annotations

import ast
from typing import Literal

from kernelgen.spec import OperatorSpec

OperatorKind = Literal["pointwise", "reduction", "scan", "normalization", "softmax", "matmul", "indexing",
                       "rotary", "attention", "convolution", "pooling", "model"]
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
_CONV_NAMES = {"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "conv1d", "conv2d",
               "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}

# aten operators (as spec.symbolic records them) that name a kind, most specific first.
_ATEN: tuple[tuple[str, frozenset[str]], ...] = (
    ("convolution", frozenset({"convolution", "_convolution", "convolution_overrideable", "cudnn_convolution"})),
    ("scan", frozenset({"cumsum", "cumprod", "cummax", "cummin", "_cummax_helper", "_cummin_helper", "logcumsumexp"})),
    ("indexing", frozenset({"gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index", "index_put",
                            "index_add", "index_copy", "index_fill", "take", "embedding", "masked_select", "one_hot"})),
    ("normalization", frozenset({"native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
                                 "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
                                 "rms_norm", "_fused_rms_norm"})),
    ("pooling", frozenset({"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices",
                           "avg_pool1d", "avg_pool2d", "avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
                           "adaptive_max_pool2d", "adaptive_max_pool3d"})),
    ("softmax", frozenset({"_softmax", "_log_softmax", "_safe_softmax"})),
    ("reduction", frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
                             "logsumexp", "argmax", "argmin", "all", "any", "linalg_vector_norm", "norm", "count_nonzero",
                             "nll_loss_forward", "nll_loss2d_forward", "mse_loss", "smooth_l1_loss", "huber_loss",
                             "kl_div", "binary_cross_entropy", "soft_margin_loss", "margin_ranking_loss"})),
)
_ATEN_MATMUL = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "dot", "mv", "addmv", "linear", "_int_mm"})
_ATEN_SDPA = ("_scaled_dot_product", "scaled_dot_product")


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


def _heavy(calls: list[str]) -> list[str]:
    """The GEMMs and convolutions a reference calls, in order: the layers of a model."""
    return [c for c in calls if c in _ATEN_MATMUL or c in _ATEN[0][1]]


def _is_model(calls: list[str]) -> bool:
    """Two GEMMs or convolutions with no softmax between them, three or more, or a fused attention
    (scaled_dot_product) beside one: a chain of layers, not one operator with an epilogue."""
    heavy = [i for i, c in enumerate(calls) if c in _ATEN_MATMUL or c in _ATEN[0][1]]
    if any(c.startswith(_ATEN_SDPA) for c in calls):
        return len(heavy) >= 1
    if len(heavy) >= 3:
        return True
    return len(heavy) == 2 and not any(c in _ATEN[5][1] for c in calls[heavy[0]:heavy[1]])


def kind_of_calls(calls: list[str]) -> OperatorKind:
    """The kind of a reference from the aten operators it calls, in order."""
    if _is_model(calls):
        return "model"
    if any(c.startswith(_ATEN_SDPA) for c in calls):
        return "attention"
    softmax = next((i for i, c in enumerate(calls) if c in _ATEN[5][1]), None)
    if softmax is not None and any(c in _ATEN_MATMUL for c in calls[softmax + 1:]):
        return "attention"  # a softmax whose result feeds a matmul
    called = set(calls)
    if called & _ATEN[0][1]:
        return "convolution"
    if called & _ATEN_MATMUL:
        return "matmul"  # a GEMM with whatever follows it as its epilogue
    for kind, ops in _ATEN[1:]:
        if called & ops:
            return kind  # type: ignore[return-value]
    return "pointwise"


def _kind_of_one(call: str) -> str:
    if call.startswith(_ATEN_SDPA):
        return "attention"
    if call in _ATEN_MATMUL:
        return "matmul"
    return next((kind for kind, ops in _ATEN if call in ops), "")


def model_parts(calls: list[str]) -> list[OperatorKind]:
    """The kinds of layer a model holds, in the order first called (no pointwise: an epilogue)."""
    found = dict.fromkeys(k for k in map(_kind_of_one, calls) if k)
    if "attention" in found:
        found.pop("softmax", None)
    return list(found)  # type: ignore[arg-type]


def describe_layers(calls: list[str]) -> str:
    """`3 GEMMs (addmm) in a chain`, `53 convolutions and 1 GEMM, with normalization and pooling`."""
    heavy = _heavy(calls)
    convs = sum(c in _ATEN[0][1] for c in heavy)
    gemms = len(heavy) - convs
    counted = [f"{n} {what}{'s' if n != 1 else ''}" for n, what in ((convs, "convolution"), (gemms, "GEMM")) if n]
    text = " and ".join(counted) or "several layers"
    if gemms and not convs:
        text += f" ({', '.join(dict.fromkeys(c for c in heavy))})"
    others = [p for p in model_parts(calls) if p not in ("matmul", "convolution")]
    return text + (f", with {' and '.join(others)}" if others else "") + " in a chain"


def operator_kind(spec: OperatorSpec) -> OperatorKind:
    from kernelgen.spec.symbolic import trace_reference

    names, uses_matmul = _called_names(spec.reference or "")
    if _is_rotary(spec, names):
        return "rotary"
    trace = trace_reference(spec)
    if trace is not None and trace.calls:
        kind = kind_of_calls(trace.calls)
        refined = _CATEGORY_KIND.get(spec.category)
        if kind in ("pointwise", "reduction") and refined in ("softmax", "normalization"):
            return refined  # a softmax or a norm written out of reductions and arithmetic
        return kind
    return _kind_from_source(spec, names, uses_matmul)


def _kind_from_source(spec: OperatorSpec, names: set[str], uses_matmul: bool) -> OperatorKind:
    """Where the reference cannot run symbolically: the names its source calls, then the category."""
    matmul = uses_matmul or bool(names & _MATMUL)
    if names & _ATTENTION or (names & _SOFTMAX and matmul) or "attention" in spec.name:
        return "attention"
    if names & _CONV_NAMES:
        return "convolution"
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
