"""Scaled dot-product attention, lowered as what it computes: softmax(q @ k^T * scale [+ mask]) @ v,
two batched matmuls around a row softmax. The scheduler gives the first matmul and the softmax's
passes their own stages, with the scores in a float32 buffer between them ([B*H, L, S]: 1 GB at
KernelBench's 32x32x512x512), not an online-softmax (flash) kernel: correct at any head dim
(KernelBench's is 1024, past the 256 a flash kernel's registers hold), and readable."""

from __future__ import annotations

import math
from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Builder, Call
from kernelgen.offline.frontend.ir import FLOATS, NoValue
from kernelgen.offline.frontend.lower_reduce import softmax
from kernelgen.offline.frontend.lower_views import view
from kernelgen.offline.unsupported import unsupported

# aten's attention ops and where their causal flag and scale sit (positional, then keyword)
ATTENTION_OPS = {"_scaled_dot_product_flash_attention_for_cpu": (4, "is_causal"),
       "_scaled_dot_product_flash_attention": (4, "is_causal"),
       "_scaled_dot_product_efficient_attention": (5, "is_causal"),
       "scaled_dot_product_attention": (5, "is_causal")}


def attention(b: Builder, c: Call) -> Any:
    base, args, kwargs, dtype = c.base, c.args, c.kwargs, c.dtype
    if dtype not in FLOATS:
        unsupported("attention over integers")
    q, k, v = (b.operand(a) for a in args[:3])
    mask = kwargs.get("attn_mask")
    if base == "_scaled_dot_product_efficient_attention":
        mask = args[3] if len(args) > 3 else mask
    if base == "scaled_dot_product_attention":
        mask = args[3] if len(args) > 3 else mask
    at, name = ATTENTION_OPS[base]
    causal = bool(args[at] if len(args) > at else kwargs.get(name, False))
    dropout = args[at - 1] if base != "_scaled_dot_product_efficient_attention" and len(args) > at - 1 else kwargs.get("dropout_p", 0.0)
    if dropout:
        unsupported("attention with dropout (random numbers: no one right answer)")
    if mask is not None:
        unsupported("attention with an explicit attn_mask")
    qs, ks, vs = b.v(q).shape, b.v(k).shape, b.v(v).shape
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4:
        unsupported("attention over other than [batch, heads, length, dim] tensors")
    bsz, heads, length, dim = qs
    src, dv = ks[2], vs[3]
    given = kwargs.get("scale")
    if given is not None:
        scale = b.scalar(float(given))
    elif dim.is_number:
        scale = b.scalar(1.0 / math.sqrt(int(dim)))
    else:  # 1/sqrt(head dim), the head dim a size known at the call
        scale = b.add("rsqrt", (b.add("size", (), (), "float32", expr=dim),), (), "float32")
    bh = S.prod((bsz, heads))
    q3 = view(b, q, "reshape", (bh, length, dim))
    kt = view(b, view(b, k, "reshape", (bh, src, dim)), "permute", perm=(0, 2, 1))
    scores = b.add("mm", (q3, kt), (bh, length, src), dtype)
    scaled = b.add("mul", (scores, scale), (bh, length, src), dtype)
    if causal:  # query i sees keys j <= i (torch's is_causal: the top-left-aligned lower triangle)
        r = view(b, b.add("iota", (), (length,), "int64"), "unsqueeze", dim=1)
        c = b.add("iota", (), (src,), "int64")
        keep = b.add("le", (b.add("sub", (c, r), (length, src), "int64"), b.scalar(0)), (length, src), "bool")
        scaled = b.add("where", (keep, scaled, b.scalar(float("-inf"))), (bh, length, src), dtype)
    probs = softmax(b, scaled, (2,), log=False)
    out = b.add("mm", (probs, view(b, v, "reshape", (bh, src, dv))), (bh, length, dv), dtype)
    result = view(b, out, "reshape", (bsz, heads, length, dv))
    extra = NoValue("attention's saved statistics")
    return [result, extra, extra, extra, extra, extra, extra, extra, extra]
