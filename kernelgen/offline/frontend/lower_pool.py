"""Max and average pooling over the last 1-3 dims, lowered as what they compute: the input padded
(with -inf for max, 0 for average) into a buffer, seen through a `window` view ([.., out.., kernel..]:
a window position's stride is stride x the dim's, a kernel position's is dilation x it, so windows
overlap without a copy), and reduced over the kernel dims.

Every size follows the input: the pooled sizes are the trace's expressions over the input's dims
(floor or ceil mode, padding, dilation), never the traced case's numbers. ceil_mode adds a last window
that may run past the high padding by up to stride - 1 elements: the buffer is padded that much more
on the high side, with the same fill, so the window reads nothing outside it. Average divides by the
kernel's size where every window counts all of it (floor mode, count_include_pad: torch's default),
by the divisor given, and otherwise by each window's own count, as torch counts it: per dim, the
window's positions inside the padded input (count_include_pad) or inside the input itself, the
product over the dims (window_count)."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Call
from kernelgen.offline.frontend.ir import FLOATS, NoValue
from kernelgen.offline.frontend.lower_reduce import mean, reduce
from kernelgen.offline.frontend.lower_views import view
from kernelgen.offline.unsupported import unsupported


def _ints(v: Any, n: int, default: Any) -> tuple[int, ...]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        v = default
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


def pool(b: Any, c: Call) -> Any:
    base, args, dtype = c.base, c.args, c.dtype
    if dtype not in FLOATS:
        unsupported("pooling over integers")
    is_max = base.startswith("max_pool")
    nd = 3 if "3d" in base else 2 if "2d" in base else 1
    if base.startswith(("adaptive", "_adaptive")):
        return _adaptive(b, c, nd)
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
    x = b.operand(args[0])
    xs = b.v(x).shape
    lead, sizes = xs[: len(xs) - nd], xs[len(xs) - nd:]
    # ceil mode: the last window may start in the input and end up to stride - 1 past the high padding
    high = tuple(p + (s - 1 if ceil else 0) for p, s in zip(padding, stride))
    if any(padding) or any(high):
        x = _padded(b, x, padding, high, float("-inf") if is_max else 0.0, dtype)
    outs = tuple(_out_shape(b, c.node))[-nd:]
    window = view(b, x, "window", tuple(lead) + tuple(outs) + tuple(S.expr(k) for k in kernel),
                  n=nd, kernel=kernel, stride=stride, dilation=dilation)
    dims = tuple(range(len(lead) + nd, len(lead) + 2 * nd))
    r = reduce(b, "max" if is_max else "sum", window, dims, False)
    if is_max:
        return [r, NoValue("max pooling's indices")]
    if divisor:
        count = b.scalar(float(divisor))
    else:
        count = window_count(b, sizes, outs, kernel, stride, padding, ceil, include_pad)
    return b.add("div", (r, count), b.v(r).shape, dtype)


def _adaptive(b: Any, c: Call, nd: int) -> Any:
    """Adaptive pooling to one element per dim (a global pooling; torch traces the average to a mean,
    the max stays adaptive_max_poolNd): a max or a mean over the last nd dims, which keep a size of 1.
    To more elements the windows' sizes vary with the input's (start floor(i*L/out), end ceil), which
    the window view cannot say."""
    size = c.arg(1, "output_size", None)
    size = list(size) if isinstance(size, (list, tuple)) else [size]
    if any(s is None or S.expr(s) != 1 for s in size):
        unsupported(f"adaptive pooling ({c.base}) to more than one element per dim (windows whose sizes vary with "
                    "the input's); to one element it is a global max or mean, which the generator serves")
    x = b.operand(c.args[0])
    dims = tuple(range(b.v(x).rank - nd, b.v(x).rank))
    if c.base.startswith("adaptive_max"):
        return [reduce(b, "max", x, dims, True), NoValue("adaptive max pooling's indices")]
    return mean(b, x, dims, True)


def window_count(b: Any, sizes: tuple, outs: tuple, kernel: tuple, stride: tuple, padding: tuple, ceil: bool,
                 include_pad: bool) -> int:
    """Each window's divisor, as torch's avg_pool counts it, a [out..] float32 tensor: per dim, window i
    starts at a = i*stride - pad and counts min(a + k, L + pad) - a positions (count_include_pad: the
    padding counts, the part past it, which only ceil mode reaches, does not) or min(a + k, L) - max(a, 0)
    (only the input's own), the product over the dims. A dim where every window counts the same (its
    whole kernel inside the padded input, or a kernel of 1 without padding) is a number in the product."""
    n = len(kernel)
    count, whole = None, 1
    for d in range(n):
        if kernel[d] == 1 and padding[d] == 0 or include_pad and not (ceil and stride[d] > 1):
            whole *= kernel[d]
            continue
        shape = () if S.is_one(outs[d]) else (outs[d],)  # one window: its start is a number (0 - pad)
        i = b.scalar(0) if not shape else b.add("iota", (), shape, "int64")
        start = b.add("sub", (b.add("mul", (i, b.scalar(stride[d])), shape, "int64"), b.scalar(padding[d])), shape, "int64")
        end = b.add("add", (start, b.scalar(kernel[d])), shape, "int64")
        size = b.add("size", (), (), "int64", expr=S.expr(sizes[d]))
        if include_pad:
            limit, low = b.add("add", (size, b.scalar(padding[d])), (), "int64"), start
        else:
            limit, low = size, b.add("maximum", (start, b.scalar(0)), shape, "int64")
        width = b.add("sub", (b.add("minimum", (end, limit), shape, "int64"), low), shape, "int64")
        width = b.add("cast", (width,), shape, "float32")
        for _ in range(n - 1 - d):  # dim d of [out..]: a trailing 1 per later dim
            width = view(b, width, "unsqueeze", dim=b.v(width).rank)
        if count is not None:
            width = b.add("mul", (count, width), S.broadcast(b.v(count).shape, b.v(width).shape), "float32")
        count = width
    if count is None:
        return b.scalar(float(whole))
    return count if whole == 1 else b.add("mul", (count, b.scalar(float(whole))), b.v(count).shape, "float32")


def _out_shape(b: Any, n: Any) -> tuple:
    val = n.meta.get("val")
    if isinstance(val, (tuple, list)):  # max_poolNd_with_indices: (values, indices)
        return tuple(S.expr(d) for d in val[0].shape)
    return b.shape_of(n)


def _padded(b: Any, x: int, low: tuple[int, ...], high: tuple[int, ...], fill: float, dtype: str) -> int:
    """x in a buffer with `low` and `high` elements of `fill` before and after each of its last dims:
    the interior written from x, each border slab from a constant (slabs overlap at corners, same value)."""
    xs = b.v(x).shape
    nd = len(low)
    first = len(xs) - nd
    shape = tuple(d + low[i - first] + high[i - first] if i >= first else d for i, d in enumerate(xs))
    regions = [[("slice", {"dim": first + i, "start": S.expr(p), "step": 1}) for i, p in enumerate(low) if p]]
    parts = [x]
    for i, (lo, hi) in enumerate(zip(low, high)):
        d = first + i
        for start, width in ((S.expr(0), lo), (shape[d] - hi, hi)):
            if not width:
                continue
            slab = tuple(S.expr(width) if j == d else s for j, s in enumerate(shape))
            parts.append(b.add("full", (), slab, dtype, value=fill))
            regions.append([("slice", {"dim": d, "start": start, "step": 1})])
    return b.add("pad", tuple(parts), shape, dtype, regions=regions)
