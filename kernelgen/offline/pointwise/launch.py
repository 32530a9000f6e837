"""What a pointwise knob setting launches at one shape: a Python model of the generated
`_launch_config` (templates/offline/pointwise.py.j2), for the pruning rules."""

from __future__ import annotations

from kernelgen.offline.frame.launch import persistent_cap
from kernelgen.offline.launch import Launch, cdiv, next_pow2
from kernelgen.offline.pointwise.knobs import POINTWISE_TILE, PointwiseKnobs


def pointwise_launch(knobs: PointwiseKnobs, n_rows: int, n_cols: int, itemsize: int, sm_count: int) -> Launch:
    tile = knobs.BLOCK_SIZE or (knobs.TILE_BYTES // itemsize if knobs.TILE_BYTES else POINTWISE_TILE)
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
