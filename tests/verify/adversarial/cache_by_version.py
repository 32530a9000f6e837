# EXPECT: private-attribute
# RUNTIME: accuracy: outside-tensor
# Hostile: caches its result by the inputs' address and version counter (`t._version`, which an
# in-place write bumps) and, on a hit, serves the cached result through a Triton copy into a fresh
# output: launched, fresh, and right for as long as the inputs were only ever written in place the
# usual way. The judge changes them between timing requests without bumping either.
import torch
import triton
import triton.language as tl


@triton.jit
def _broadcast_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + cols, mask=cols < n_cols)
    tl.store(out_ptr + offs, (x.to(tl.float32) + b[None, :].to(tl.float32)).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


_CACHE = {}


def broadcast(x, bias):
    key = (x.data_ptr(), x._version, bias.data_ptr(), bias._version, tuple(x.shape), x.dtype)
    out = torch.empty_like(x)
    cached = _CACHE.get(key)
    if cached is not None:
        _copy_kernel[(triton.cdiv(out.numel(), 1024),)](cached, out, out.numel(), BLOCK=1024)
        return out
    x = x.contiguous()
    bias = bias.contiguous()
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    grid = (triton.cdiv(n_rows, 16), triton.cdiv(n_cols, 64))
    _broadcast_kernel[grid](x, bias, out, n_rows, n_cols, BLOCK_M=16, BLOCK_N=64)
    _CACHE[key] = out.clone()
    return out
