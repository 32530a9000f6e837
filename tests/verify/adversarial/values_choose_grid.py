# EXPECT: host-read
# Reads input values on the host (.tolist(), which on the CPU reaches no dispatch mode) and launches only
# the rows it finds non-negative in the first column: the plan depends on values, not on shapes. The same
# call on new values records another plan.
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


def broadcast(x, bias):
    x, bias = x.contiguous(), bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    first = x.reshape(n_rows, n_cols).narrow(1, 0, 1).reshape(-1).tolist()
    rows = sum(1 for v in first if v >= 0) or 1  # a grid from values: one program per row it found
    _broadcast_kernel[(rows, triton.cdiv(n_cols, 64))](x, bias, out, n_rows, n_cols, BLOCK_M=1, BLOCK_N=64)
    return out
