# An honest kernel with a multi-config @triton.autotune (issue 40: the CPU interpreter cannot time configs,
# "RuntimeError: 0 active drivers", and every check failed). The recording resolves autotune: on a GPU the
# winner is replayed; on the CPU the first config is checked, with a note.
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 4, "BLOCK_N": 32}, num_warps=2),
        triton.Config({"BLOCK_M": 8, "BLOCK_N": 64}, num_warps=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 16}, num_warps=1),
    ],
    key=["n_rows", "n_cols"],
)
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
    grid = lambda meta: (triton.cdiv(n_rows, meta["BLOCK_M"]), triton.cdiv(n_cols, meta["BLOCK_N"]))  # noqa: E731
    _broadcast_kernel[grid](x, bias, out, n_rows, n_cols)
    return out
