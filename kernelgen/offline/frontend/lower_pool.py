"""Max and average pooling over the last 1-3 dims, lowered as what they compute: the input padded
(with -inf for max, 0 for average) into a buffer, seen through a `window` view ([.., out.., kernel..]:
a window position's stride is stride x the dim's, a kernel position's is dilation x it, so windows
overlap without a copy), and reduced over the kernel dims. Average divides by the kernel's size
(count_include_pad, torch's default) or the divisor given."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Call
from kernelgen.offline.frontend.ir import FLOATS, NoValue
from kernelgen.offline.frontend.lower_reduce import reduce
from kernelgen.offline.frontend.lower_views import view
from kernelgen.offline.unsupported import unsupported


def _ints(v: Any, n: int, default: Any) -> tuple[int, ...]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


def pool(b: Any, c: Call) -> Any:
    n, base, args, kwargs, dtype = c.node, c.base, c.args, c.kwargs, c.dtype
    if dtype not in FLOATS:
        unsupported("pooling over integers")
    is_max = base.startswith("max_pool")
    nd = 3 if "3d" in base else 2 if "2d" in base else 1
    if base.startswith(("adaptive", "_adaptive")) or not base.startswith(("max_pool", "avg_pool")):
        unsupported(f"pooling ({base}) in the n-dimensional generator")
    arg = c.arg
    kernel = _ints(arg(1, "kernel_size", None), nd, None)
    stride = _ints(arg(2, "stride", None), nd, kernel)
    padding = _ints(arg(3, "padding", 0), nd, 0)
    if is_max:
        dilation, ceil = _ints(arg(4, "dilation", 1), nd, 1), bool(arg(5, "ceil_mode", False))
        include_pad, divisor = True, None
    else:
        dilation, ceil = (1,) * nd, bool(arg(4, "ceil_mode", False))
        include_pad, divisor = bool(arg(5, "count_include_pad", True)), arg(6, "divisor_override", None)
    if ceil:
        unsupported("pooling with ceil_mode=True (a last window past the padding)")
    if not include_pad and any(padding):
        unsupported("average pooling with count_include_pad=False over padding")
    x = b.operand(args[0])
    xs = b.v(x).shape
    lead = xs[: len(xs) - nd]
    if any(padding):
        x = _padded(b, x, padding, float("-inf") if is_max else 0.0, dtype)
    outs = tuple(_out_shape(b, n))[-nd:]
    window = view(b, x, "window", tuple(lead) + tuple(outs) + tuple(S.expr(k) for k in kernel),
                  n=nd, kernel=kernel, stride=stride, dilation=dilation)
    dims = tuple(range(len(lead) + nd, len(lead) + 2 * nd))
    r = reduce(b, "max" if is_max else "sum", window, dims, False)
    if not is_max:
        count = float(divisor) if divisor else float(S.prod(S.expr(k) for k in kernel))
        r = b.add("div", (r, b.scalar(count)), b.v(r).shape, dtype)
    if is_max:
        return [r, NoValue("max pooling's indices")]
    return r


def _out_shape(b: Any, n: Any) -> tuple:
    val = n.meta.get("val")
    if isinstance(val, (tuple, list)):  # max_poolNd_with_indices: (values, indices)
        return tuple(S.expr(d) for d in val[0].shape)
    return b.shape_of(n)


def _padded(b: Any, x: int, padding: tuple[int, ...], fill: float, dtype: str) -> int:
    """x in a buffer with `padding` elements of `fill` before and after each of its last dims: the
    interior written from x, each border slab from a constant (slabs overlap at corners, same value)."""
    xs = b.v(x).shape
    nd = len(padding)
    first = len(xs) - nd
    shape = tuple(d + 2 * padding[i - first] if i >= first else d for i, d in enumerate(xs))
    regions = [[("slice", {"dim": first + i, "start": S.expr(p), "step": 1}) for i, p in enumerate(padding) if p]]
    parts = [x]
    for i, p in enumerate(padding):
        if not p:
            continue
        d = first + i
        slab = tuple(S.expr(p) if j == d else s for j, s in enumerate(shape))
        for start in (S.expr(0), shape[d] - p):
            parts.append(b.add("full", (), slab, dtype, value=fill))
            regions.append([("slice", {"dim": d, "start": start, "step": 1})])
    return b.add("pad", tuple(parts), shape, dtype, regions=regions)
