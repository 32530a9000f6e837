"""What a knob setting launches at one shape: a Python model of the generated `_launch_config`.

The generated file must run alone, so its heuristics are written out there (templates/offline/);
this module mirrors them for kernelgen.offline.pruning, which reasons about a value before anything
is compiled. tests/offline/test_offline_pruning.py holds the two to the same answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernelgen.offline import knobs as k
from kernelgen.offline.knobs import MatmulKnobs, PointwiseKnobs, RowKnobs


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Launch:
    """One launch of a row or pointwise kernel."""

    path: str  # rows: single | looped | online | split; pointwise: 2d | 1d
    block_r: int  # rows per program (1 for a flat 1-D tile)
    block_c: int  # columns per block (the 1-D tile's elements)
    num_warps: int
    tiles: int  # row blocks or tiles of work
    programs: int  # the grid: tiles, capped by a persistent grid; split: rows x chunks
    chunks: int = 1  # split rows: programs per row
    num_stages: int | None = None

    @property
    def tile(self) -> int:
        return self.block_r * self.block_c

    @property
    def per_thread(self) -> int:
        """Elements of a tile each thread holds (fp32 registers per live value)."""
        return max(1, self.tile // (32 * self.num_warps))


def _warps(tile: int) -> int:
    return 4 if tile <= 2048 else (8 if tile <= 8192 else 16)


def persistent_cap(num_warps: int, sm_count: int) -> int:
    return max(1, k.PERSISTENT_WARPS_PER_SM // num_warps) * sm_count


def rows_launch(knobs: RowKnobs, n_rows: int, n_cols: int, sm_count: int, itemsize: int = 4,
                l2_bytes: int = k.DEFAULT_L2_BYTES) -> Launch:
    """The generated rows file's `_launch_config` (templates/offline/rows.py.j2)."""
    alg = knobs.algorithm
    block_c = next_pow2(n_cols)
    limit = knobs.MAX_SINGLE_PASS or (k.ROW_SINGLE_LIMIT if alg == "single" else k.ROW_MAX_SINGLE)
    single = alg != "looped" and block_c <= limit
    if not single:
        block_c = min(knobs.LOOP_BLOCK or k.ROW_LOOP_BLOCK, block_c)
    if alg == "split" and n_rows < 2 * sm_count and n_cols > k.SPLIT_MIN_COLS:
        chunks = min(cdiv(2 * sm_count, n_rows), cdiv(n_cols, k.SPLIT_MIN_COLS))
        block_c = min(knobs.LOOP_BLOCK or k.ROW_LOOP_BLOCK, next_pow2(cdiv(n_cols, chunks)))
        chunk_cols = cdiv(cdiv(n_cols, chunks), block_c) * block_c
        chunks = cdiv(n_cols, chunk_cols)
        warps = knobs.num_warps or _warps(block_c)
        return Launch("split", 1, block_c, warps, n_rows, n_rows * chunks, chunks, knobs.num_stages)
    block_r = min(next_pow2(n_rows), max(1, (knobs.ROW_TILE or k.ROW_TILE) // block_c))
    warps = knobs.num_warps or _warps(block_r * block_c)
    path = "single" if single else ("online" if alg == "online" else "looped")
    tiles = cdiv(n_rows, block_r)
    programs = min(tiles, persistent_cap(warps, sm_count)) if knobs.persistent else tiles
    if knobs.persistent and path == "online":  # the rows in flight within half the L2
        programs = min(programs, max(sm_count, l2_bytes // 2 // (block_r * n_cols * itemsize)))
    return Launch(path, block_r, block_c, warps, tiles, programs, 1, knobs.num_stages)


def pointwise_launch(knobs: PointwiseKnobs, n_rows: int, n_cols: int, itemsize: int, sm_count: int) -> Launch:
    """The generated pointwise file's `_launch_config` (templates/offline/pointwise.py.j2)."""
    tile = knobs.BLOCK_SIZE or (knobs.TILE_BYTES // itemsize if knobs.TILE_BYTES else k.POINTWISE_TILE)
    if knobs.grid == "1d":
        block_r, block_c = 1, min(next_pow2(n_rows * n_cols), tile)
        tiles = cdiv(n_rows * n_cols, block_c)
    else:
        block_c = min(next_pow2(n_cols), tile)
        block_r = min(next_pow2(n_rows), max(1, tile // block_c))
        tiles = cdiv(n_rows, block_r) * cdiv(n_cols, block_c)
    t = block_r * block_c
    warps = knobs.num_warps or (4 if t < 4096 else (8 if t <= 8192 else 16))
    programs = min(tiles, persistent_cap(warps, sm_count)) if knobs.persistent else tiles
    return Launch(knobs.grid, block_r, block_c, warps, tiles, programs, 1, knobs.num_stages)


def matmul_tiles(knobs: MatmulKnobs, m: int, n: int, fp32: bool) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, num_warps, num_stages): templates/offline/matmul.py.j2."""
    if fp32:
        bm, bn, bk, warps, stages = (128, 128, 32, 8, 3) if m * n >= 1 << 20 else (64, 64, 32, 4, 3)
    elif m * n >= 1 << 24:
        bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
    elif m * n >= 1 << 20:
        bm, bn, bk, warps, stages = 128, 128, 64, 8, 4
    else:
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 4
    return (knobs.BLOCK_M or bm, knobs.BLOCK_N or bn, knobs.BLOCK_K or bk, knobs.GROUP_SIZE_M,
            knobs.num_warps or warps, knobs.num_stages or stages)


def collapsed_frame(shapes: list[list[int]], keep_last: bool) -> tuple[int, int]:
    """(rows, cols) of the frame the generated wrapper makes of contiguous inputs of these shapes
    (its `_frame`: size-1 dims dropped, dims every input walks as one merged)."""
    out = tuple(torch.broadcast_shapes(*[tuple(s) for s in shapes]))
    strides = []
    for s in shapes:
        contiguous = [math.prod(s[i + 1:]) for i in range(len(s))]
        lead = len(out) - len(s)
        strides.append([0] * lead + [0 if d == 1 and t != 1 else st for d, t, st in zip(s, out[lead:], contiguous)])
    dims = [(size, tuple(st[d] for st in strides)) for d, size in enumerate(out)]
    last = dims.pop() if keep_last and dims else None
    merged: list[tuple[int, tuple]] = []
    for size, st in dims:
        if size == 1:
            continue
        if merged and all(p == q * size for p, q in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * size, st)
        else:
            merged.append((size, st))
    if last is not None:
        merged.append(last)
    sizes = [size for size, _ in merged] or [1]
    return max(math.prod(sizes[:-1]), 1), max(sizes[-1], 1)
