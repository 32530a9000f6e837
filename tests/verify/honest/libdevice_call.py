# An honest kernel calling the device library (issue 40: any triton.language.extra.libdevice call failed
# on the CPU interpreter, "cannot convert None", though the allowlist admits libdevice). fma has a
# tl.math twin the interpreter runs; pow runs through numpy there; both compile to libdevice on a GPU.
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _broadcast_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(bias_ptr + cols, mask=cols < n_cols).to(tl.float32)
    y = libdevice.fma(x, 1.0, b[None, :])  # x * 1 + b, one rounding
    y = libdevice.pow(y, 1.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def broadcast(x, bias):
    x, bias = x.contiguous(), bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    _broadcast_kernel[(triton.cdiv(n_rows, 16), triton.cdiv(n_cols, 64))](x, bias, out, n_rows, n_cols, BLOCK_M=16, BLOCK_N=64)
    return out
