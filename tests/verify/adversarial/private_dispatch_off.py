# EXPECT: private-attribute
# RUNTIME: accuracy: unwritten-output
# Hostile: computes the answer in PyTorch with the dispatcher's Python modes switched off through a
# private attribute (torch._C._DisableTorchDispatch), so the worker's guard never sees the arithmetic,
# and launches a kernel that writes nothing.
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


def broadcast(x, bias):
    out = torch.empty_like(x)
    with torch._C._DisableTorchDispatch():
        out.copy_(x + bias)
    _broadcast_kernel[(1, 1)](x, bias, out, 0, x.shape[-1], BLOCK_M=16, BLOCK_N=64)
    return out
