"""Convolutions, as the op table's one row for `aten.convolution` lowers them, and the zero padding
that often comes before one (`aten.constant_pad_nd`: F.pad, and Conv's padding='same' where the
kernel is even).

A convolution becomes one `conv` value (args: the input and the weight; attrs: transposed, stride,
padding, dilation, groups and the number of spatial dims `n`) that the nd scheduler gives a stage of
its own: an implicit GEMM over the input, its epilogue on the accumulator tile. Its bias is an `add`
of the bias seen as [C, 1, ..] after it, so it joins that epilogue like any per-channel operand. Two
forms stay what they were before this row served every convolution: a 1x1 kernel with stride 1,
no padding, one group (not transposed) is a batched matmul -- [B, Cout, Cin] @ [B, Cin, L] -- which
nd's matmul stage runs as a plain GEMM. A zero pad right before a convolution folds into it: its
low sides into the convolution's padding (the high sides only widen the output, which the traced
shape already says), so no padded copy of the input is written.
"""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Call
from kernelgen.offline.frontend.ir import FLOATS
from kernelgen.offline.frontend.lower_views import view
from kernelgen.offline.unsupported import unsupported

PAD_MODES = {"reflection": "reflect", "replication": "replicate"}


def _size(b: Any, a: Any) -> Any:
    """An int argument that may be symbolic (padding='same' pads by (kernel - 1) // 2): an expression."""
    if hasattr(a, "op") and a in b.env:  # an fx node of SymInt arithmetic, lowered to its expression
        return S.expr(b.env[a])
    return S.expr(a)


def _zero(e: Any) -> bool:
    return S.expr(e) == 0


def convolution(b: Any, c: Call) -> int:
    """aten.convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    x_arg, w_arg, bias, stride, padding, dilation, transposed, _, groups = c.args[:9]
    if c.dtype not in FLOATS:
        unsupported(f"a convolution over {c.dtype} (the convolution kernels compute in floating point)")
    x, w = b.operand(x_arg), b.operand(w_arg)
    n = b.v(w).rank - 2
    if n not in (1, 2, 3) or b.v(x).rank != n + 2:
        unsupported(f"a convolution of a {b.v(x).rank}-D input (unbatched, or more than 3 spatial dims): "
                    "the convolution kernels take [N, C, spatial..] with 1 to 3 spatial dims")
    stride, dilation = tuple(int(s) for s in stride), tuple(int(d) for d in dilation)
    pads = tuple(_size(b, p) for p in padding)
    groups = _size(b, groups)  # symbolic where the reference passes groups=x.shape[1]
    groups = int(groups) if groups.is_number else groups
    shape = b.shape_of(c.node)
    if _is_matmul(b, w, stride, pads, dilation, bool(transposed), groups):
        return _as_matmul(b, x, w, bias, c.dtype)
    if not transposed:
        x, pads = _fold_pad(b, x, pads)
    y = b.add("conv", (x, w), shape, c.dtype, transposed=bool(transposed), stride=stride, padding=pads,
              dilation=dilation, groups=groups, n=n)
    if bias is not None:
        y = b.add("add", (y, view(b, b.operand(bias), "reshape", (shape[1],) + (S.ONE,) * n)), shape, c.dtype)
    return y


def _is_matmul(b: Any, w: int, stride: tuple, pads: tuple, dilation: tuple, transposed: bool, groups: Any) -> bool:
    return (not transposed and groups == 1 and all(s == 1 for s in stride) and all(_zero(p) for p in pads)
            and all(d == 1 for d in dilation) and all(S.is_one(k) for k in b.v(w).shape[2:]))


def _as_matmul(b: Any, x: int, w: int, bias: Any, dtype: str) -> int:
    """A 1x1 convolution with stride 1: [B, Cout, Cin] @ [B, Cin, L] over the flattened spatial dims,
    its bias added to the [B, Cout, L] product."""
    xs, ws = b.v(x).shape, b.v(w).shape
    bsz, cin, rest = xs[0], xs[1], xs[2:]
    cout = ws[0]
    x3 = view(b, x, "reshape", (bsz, cin, S.prod(rest)))
    w3 = view(b, view(b, view(b, w, "reshape", (cout, cin)), "unsqueeze", dim=0), "expand", (bsz, cout, cin))
    y = b.add("mm", (w3, x3), (bsz, cout, S.prod(rest)), dtype)
    if bias is not None:
        bias3 = view(b, view(b, b.operand(bias), "reshape", (cout, S.ONE)), "unsqueeze", dim=0)
        y = b.add("add", (y, bias3), (bsz, cout, S.prod(rest)), dtype)
    return view(b, y, "reshape", (bsz, cout) + tuple(rest))


def _fold_pad(b: Any, x: int, pads: tuple) -> tuple[int, tuple]:
    """A zero pad of the spatial dims before the convolution: read its source, padded by the mask."""
    v = b.v(x)
    if v.op != "pad" or "lo" not in v.attrs or v.attrs["fill"] != 0:
        return x, pads
    lo, hi = v.attrs["lo"], v.attrs["hi"]
    n = len(pads)
    if not all(_zero(p) for p in list(lo[:-n]) + list(hi[:-n])):
        return x, pads  # it pads the batch or the channels too: the padded copy is the input
    return v.args[0], tuple(p + q for p, q in zip(pads, lo[-n:]))


def constant_pad_nd(b: Any, c: Call) -> int:
    """F.pad(x, pad, value=v): x in a buffer with `pad` elements of v on each side of its last dims
    (pad lists the last dim's low and high side first), as pooling pads (a `pad` value)."""
    x = b.operand(c.args[0])
    pad = [_size(b, p) for p in c.arg(1, "pad", [])]
    value = float(c.arg(2, "value", 0.0) or 0.0)
    xs = b.v(x).shape
    rank = len(xs)
    lo, hi = [S.expr(0)] * rank, [S.expr(0)] * rank
    for i in range(len(pad) // 2):
        lo[rank - 1 - i], hi[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    if any((p.is_number and p < 0) for p in lo + hi):
        unsupported("F.pad with a negative pad (a crop)")
    shape = b.shape_of(c.node)
    regions = [[("slice", {"dim": d, "start": lo[d], "step": 1}) for d in range(rank) if not (_zero(lo[d]) and _zero(hi[d]))]]
    parts = [x]
    for d in range(rank):
        for start, width in ((S.expr(0), lo[d]), (shape[d] - hi[d], hi[d])):
            if _zero(width):
                continue
            slab = tuple(width if j == d else s for j, s in enumerate(shape))
            parts.append(b.add("full", (), slab, c.dtype, value=value))
            regions.append([("slice", {"dim": d, "start": start, "step": 1})])
    if len(parts) == 1:
        return x
    return b.add("pad", tuple(parts), shape, c.dtype, regions=regions, lo=tuple(lo), hi=tuple(hi), fill=value)


def refused_pad(b: Any, c: Call) -> None:
    """Reflection and replication pads: what Conv's padding_mode='reflect' / 'replicate' traces to."""
    kind = next(k for k in PAD_MODES if c.base.startswith(k))
    unsupported(f"padding_mode='{PAD_MODES[kind]}' (aten.{c.base}: a {kind} border; the convolution kernels "
                "pad with zeros only)")
