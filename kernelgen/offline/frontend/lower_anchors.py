"""The op table's handlers of the anchors besides reductions: matmuls (and 1x1 convolutions, which
are batched matmuls), scans, gathers and concatenations. Each becomes one IR value the nd family
gives a stage of its own (pooling and attention: lower_pool.py, lower_attention.py)."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Call
from kernelgen.offline.frontend.lower_views import view
from kernelgen.offline.unsupported import unsupported


def matmul(b: Any, c: Call) -> int:
    """mm and bmm: [..., M, K] @ [..., K, N]."""
    return b.add("mm", (b.operand(c.args[0]), b.operand(c.args[1])), b.shape_of(c.node), c.dtype)


def scan(b: Any, c: Call) -> int:
    """cumsum and cumprod along one dim."""
    x = b.operand(c.args[0])
    return b.add("scan", (x,), b.shape_of(c.node), c.dtype, kind="sum" if c.base == "cumsum" else "prod",
                 dim=c.args[1] % max(b.v(x).rank, 1))


def gather(b: Any, c: Call) -> int:
    x, index = b.operand(c.args[0]), b.operand(c.args[2])
    return b.add("gather", (x, index), b.shape_of(c.node), c.dtype, dim=c.args[1] % b.v(x).rank)


def cat(b: Any, c: Call) -> int:
    parts = [b.operand(t) for t in c.args[0]]
    dim = c.args[1] if len(c.args) > 1 else c.kwargs.get("dim", 0)
    rank = max(b.v(p).rank for p in parts)
    parts = [p for p in parts if b.v(p).rank == rank]  # legacy 1-D empty tensors are skipped by torch.cat
    return b.add("cat", tuple(parts), b.shape_of(c.node), c.dtype, dim=dim % rank)


def convolution(b: Any, c: Call) -> int:
    """A convolution is served only when it is a batched matmul: 1x1 kernel, stride 1, no padding,
    no dilation, one group, not transposed."""
    x, w, bias, stride, padding, dilation, transposed, _, groups = c.args[:9]
    dtype = c.dtype
    ws = b.v(b.operand(w)).shape
    if (transposed or groups != 1 or any(int(s) != 1 for s in stride) or any(int(p) != 0 for p in padding)
            or any(int(d) != 1 for d in dilation) or any(not S.is_one(k) for k in ws[2:])):
        unsupported("a convolution (the offline generator serves 1x1 convolutions only, as a batched matmul; "
                    "other kernels, strides, padding or groups need an LLM)")
    xv = b.operand(x)
    xs = b.v(xv).shape
    bsz, cin, rest = xs[0], xs[1], xs[2:]
    cout = ws[0]
    x3 = view(b, xv, "reshape", (bsz, cin, S.prod(rest)))
    w2 = view(b, view(b, b.operand(w), "reshape", (cout, cin)), "unsqueeze", dim=0)
    w3 = view(b, w2, "expand", (bsz, cout, cin))
    y = b.add("mm", (w3, x3), (bsz, cout, S.prod(rest)), dtype)
    if bias is not None:
        bias3 = view(b, view(b, b.operand(bias), "reshape", (cout, S.ONE)), "unsqueeze", dim=0)
        y = b.add("add", (y, bias3), (bsz, cout, S.prod(rest)), dtype)
    return view(b, y, "reshape", (bsz, cout) + tuple(rest))
