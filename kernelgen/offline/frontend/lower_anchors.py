"""The op table's handlers of the anchors besides reductions: matmuls, scans, gathers and
concatenations. Each becomes one IR value the nd family gives a stage of its own (convolutions,
pooling and attention: lower_conv.py, lower_pool.py, lower_attention.py)."""

from __future__ import annotations

from kernelgen.offline.frontend.call import Builder, Call


def matmul(b: Builder, c: Call) -> int:
    """mm and bmm: [..., M, K] @ [..., K, N]."""
    return b.add("mm", (b.operand(c.args[0]), b.operand(c.args[1])), b.shape_of(c.node), c.dtype)


def scan(b: Builder, c: Call) -> int:
    """cumsum and cumprod along one dim."""
    x = b.operand(c.args[0])
    return b.add("scan", (x,), b.shape_of(c.node), c.dtype, kind="sum" if c.base == "cumsum" else "prod",
                 dim=c.args[1] % max(b.v(x).rank, 1))


def gather(b: Builder, c: Call) -> int:
    x, index = b.operand(c.args[0]), b.operand(c.args[2])
    return b.add("gather", (x, index), b.shape_of(c.node), c.dtype, dim=c.args[1] % b.v(x).rank)


def cat(b: Builder, c: Call) -> int:
    parts = [b.operand(t) for t in c.args[0]]
    dim = c.args[1] if len(c.args) > 1 else c.kwargs.get("dim", 0)
    rank = max(b.v(p).rank for p in parts)
    parts = [p for p in parts if b.v(p).rank == rank]  # legacy 1-D empty tensors are skipped by torch.cat
    return b.add("cat", tuple(parts), b.shape_of(c.node), c.dtype, dim=dim % rank)
