"""Plain Triton row sums, among the kernels the read ceiling is the best of (kernelgen.verify.judge.peaks).

PyTorch's own reductions under-read a large row-major matrix: on an H200 an honest Triton row sum of
65536x4096 float32 (one program per row block, the whole row in registers) read 4437 GB/s, 5% above
the best of them. The ceiling must include what such a kernel reaches, or it calls it invalid. A few
launch shapes are tried (one row per program with the whole row in one block, and blocks of rows
streamed in column chunks), since which is fastest differs between GPUs.
"""

from __future__ import annotations

from typing import Any, Callable

import triton
import triton.language as tl

# (rows per program, columns per block, num_warps)
CONFIGS = ((1, 4096, 8), (1, 4096, 16), (4, 1024, 8), (8, 512, 8))


@triton.jit
def _row_sum_kernel(
    x_ptr,  # pointer to a row-major (n_rows, n_cols) float32 matrix
    out_ptr,  # pointer to the n_rows sums
    n_rows,  # rows in x
    n_cols,  # columns in x
    BLOCK_R: tl.constexpr,  # rows per program
    BLOCK_C: tl.constexpr,  # columns per step
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_mask = rows < n_rows
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        acc += tl.load(x_ptr + rows[:, None].to(tl.int64) * n_cols + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.sum(acc, axis=1), mask=row_mask)


def row_sum(x: Any, block_r: int, block_c: int, num_warps: int) -> Any:
    """The row sums of a contiguous 2-D float32 tensor (read n_rows x n_cols elements, write n_rows)."""
    import torch

    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    _row_sum_kernel[(triton.cdiv(n_rows, block_r),)](x, out, n_rows, n_cols, BLOCK_R=block_r, BLOCK_C=block_c,
                                                     num_warps=num_warps)
    return out


def row_sum_kernels(rows: Any) -> dict[str, Callable[[], Any]]:
    """One named call per launch shape, each summing `rows`."""
    return {f"triton row sum {r}x{c} w{w}": (lambda r=r, c=c, w=w: row_sum(rows, r, c, w)) for r, c, w in CONFIGS}
