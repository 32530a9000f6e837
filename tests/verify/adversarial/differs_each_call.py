# EXPECT: plan-differs
# Launches a different block size on every call: a second identical call records another plan, so no
# single plan stands for what the wrapper does (a replay would time one of its behaviours).
import torch
import triton
import triton.language as tl


@triton.jit
def _broadcast_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + cols, mask=cols < n_cols)
    tl.store(out_ptr + offs, (x.to(tl.float32) + b[None, :].to(tl.float32)).to(out_ptr.dtype.element_ty), mask=mask)


_CALLS = [0]


def broadcast(x, bias):
    _CALLS[0] += 1
    block = 8 if _CALLS[0] % 2 else 16
    x, bias = x.contiguous(), bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    _broadcast_kernel[(triton.cdiv(n_rows, block), triton.cdiv(n_cols, 64))](x, bias, out, n_rows, n_cols, BLOCK_M=block, BLOCK_N=64)
    return out
