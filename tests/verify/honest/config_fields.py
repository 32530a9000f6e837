# An honest kernel whose launch configuration has ordinary field names (issue 40: `tile`, `mode`,
# `offset`, `start` and `step` were refused as "forbidden-api ... rename it", being also attribute
# names of Python's slices, ranges and files).
import typing

import torch
import triton
import triton.language as tl


class Config(typing.NamedTuple):
    tile: int  # columns per program
    mode: str  # "rows": one program per row block
    offset: int  # first row handled
    start: int  # first column block
    step: int  # rows per program


@triton.jit
def _broadcast_kernel(x_ptr, bias_ptr, out_ptr, n_rows, n_cols, ROWS: tl.constexpr, TILE: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * TILE + tl.arange(0, TILE)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(bias_ptr + cols, mask=cols < n_cols)
    tl.store(out_ptr + offs, (x.to(tl.float32) + b[None, :].to(tl.float32)).to(out_ptr.dtype.element_ty), mask=mask)


def _config(n_cols):
    return Config(tile=min(64, triton.next_power_of_2(n_cols)), mode="rows", offset=0, start=0, step=8)


def broadcast(x, bias):
    x, bias = x.contiguous(), bias.contiguous()
    out = torch.empty_like(x)
    n_cols = x.shape[-1]
    n_rows = x.numel() // n_cols
    cfg = _config(n_cols)
    if cfg.mode != "rows" or cfg.offset or cfg.start:
        raise ValueError(f"broadcast: config {cfg} is not one this wrapper launches")
    grid = (triton.cdiv(n_rows - cfg.offset, cfg.step), triton.cdiv(n_cols, cfg.tile) - cfg.start)
    _broadcast_kernel[grid](x, bias, out, n_rows, n_cols, ROWS=cfg.step, TILE=cfg.tile)
    return out
