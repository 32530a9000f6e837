"""The op table: every ATen op the front end lowers, by name (without the in-place underscore), and
the handler that lowers it into the IR -- the one place an op is added.

A pointwise op is a row of kernelgen.offline.frontend.exprs (its IR name, the ATen names that lower
to it and its Triton expression): the rows below are made from that table. Any other op is one row
here, naming its handler (lower_pointwise.py, lower_views.py, lower_reduce.py, lower_anchors.py,
lower_conv.py, lower_pool.py, lower_attention.py). An ATen op with no row is refused, named ("the op
aten.sort.default"). The families then decide which IR they serve (kernelgen.offline.registry).
"""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.frontend import lower_anchors as anchors
from kernelgen.offline.frontend import lower_conv as conv
from kernelgen.offline.frontend import lower_pointwise as pw
from kernelgen.offline.frontend import lower_reduce as red
from kernelgen.offline.frontend import lower_views as views
from kernelgen.offline.frontend.exprs import BINARY, UNARY
from kernelgen.offline.frontend.lower_attention import ATTENTION_OPS, attention
from kernelgen.offline.frontend.lower_pool import pool

Handler = Callable[[Any, Any], Any]  # (IRBuilder, Call) -> a value id, a list of them, NoValue or None


def _rows(names: tuple[str, ...] | list[str], handler: Handler) -> dict[str, Handler]:
    return {name: handler for name in names}


OPS: dict[str, Handler] = {
    # pointwise, from the expression table
    **{aten: pw.unary(op) for op, row in UNARY.items() for aten in row.aten},
    **{aten: pw.binary(op) for op, row in BINARY.items() for aten in row.aten},
    "pow": pw.power,
    "where": pw.where,
    "masked_fill": pw.masked_fill,
    **_rows(("clamp", "clamp_min", "clamp_max"), pw.clamp),
    **_rows(("triu", "tril"), pw.triangle),
    # dtypes, copies and constants
    **_rows(("_to_copy", "convert_element_type", "to", "type_as"), pw.cast),
    **_rows(("clone", "alias", "detach", "lift_fresh_copy", "contiguous"), pw.identity),
    "copy_": pw.copy_into,
    **_rows(("empty", "empty_like", "empty_strided", "new_empty"), pw.uninitialised),
    "scalar_tensor": pw.scalar_tensor,
    **_rows(tuple(pw.FILLS), pw.filled),
    # views
    **_rows(("view", "reshape", "_unsafe_view"), views.reshape),
    "expand": views.expand,
    "broadcast_in_dim": views.broadcast_in_dim,
    "unsqueeze": views.unsqueeze,
    "squeeze": views.squeeze,
    **_rows(("permute", "t", "transpose", "numpy_T"), views.permute),
    "slice": views.slice_,
    "select": views.select,
    "flip": views.flip,
    # reductions and what is built on them
    **_rows(("sum", "mean"), red.sum_or_mean),
    **_rows(("amax", "amin"), red.amax_or_amin),
    **_rows(("max", "min"), red.max_or_min),  # of two tensors too: maximum, minimum
    **_rows(("argmax", "argmin"), red.argmax_or_argmin),
    "prod": red.prod,
    **_rows(("var", "var_mean"), red.var_or_var_mean),
    "logsumexp": red.lower_logsumexp,
    **_rows(("_softmax", "_log_softmax", "softmax", "log_softmax"), red.lower_softmax),
    "native_layer_norm": red.lower_layer_norm,
    "native_group_norm": red.lower_group_norm,
    **_rows(("_native_batch_norm_legit", "_native_batch_norm_legit_functional", "native_batch_norm",
             "_native_batch_norm_legit_no_training"), red.lower_batch_norm),
    **_rows(("any", "all"), red.any_or_all),
    # anchors of their own
    **_rows(("mm", "bmm"), anchors.matmul),
    "convolution": conv.convolution,
    "constant_pad_nd": conv.constant_pad_nd,
    **_rows([f"{kind}_pad{d}d" for kind in conv.PAD_MODES for d in (1, 2, 3)], conv.refused_pad),
    **_rows(("cumsum", "cumprod"), anchors.scan),
    "gather": anchors.gather,
    "cat": anchors.cat,
    **_rows([f"max_pool{d}d{suffix}" for d in (1, 2, 3) for suffix in ("", "_with_indices")], pool),
    **_rows([f"avg_pool{d}d" for d in (1, 2, 3)], pool),
    **_rows([f"{prefix}adaptive_{kind}_pool{d}d" for prefix in ("", "_") for kind in ("max", "avg") for d in (1, 2, 3)],
            pool),  # refused there, by name: no adaptive pooling
    **_rows(tuple(ATTENTION_OPS), attention),
}
