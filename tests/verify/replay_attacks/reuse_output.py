# OUTCOME: refused outside-tensor
# Issue 40's "an output reused within a timing request": after a call computed its output, the next calls
# on the same input tensors return that output again without launching anything, so a timing request of
# many calls costs one kernel. A replay allocates fresh buffers on every call and never calls the
# wrapper; and the wrapper's second recorded call returns a tensor the call did not make.
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


_LAST = []  # (x, bias, out) of the last call


def broadcast(x, bias):
    if _LAST and _LAST[0][0] is x and _LAST[0][1] is bias:
        return _LAST[0][2]
    xc, bc = x.contiguous(), bias.contiguous()
    out = torch.empty_like(xc)
    n_cols = xc.shape[-1]
    n_rows = xc.numel() // n_cols
    _broadcast_kernel[(triton.cdiv(n_rows, 16), triton.cdiv(n_cols, 64))](xc, bc, out, n_rows, n_cols, BLOCK_M=16, BLOCK_N=64)
    _LAST[:] = [(x, bias, out)]
    return out
