"""What a row knob setting launches at one shape: a Python model of the generated rows file's
`_launch_config` (templates/offline/rows.py.j2), for the pruning rules and round 0."""

from __future__ import annotations

from kernelgen.offline.frame.launch import DEFAULT_L2_BYTES, persistent_cap
from kernelgen.offline.launch import Launch, cdiv, default_warps, next_pow2
from kernelgen.offline.rows import knobs as k
from kernelgen.offline.rows.knobs import RowKnobs


def rows_launch(knobs: RowKnobs, n_rows: int, n_cols: int, sm_count: int, itemsize: int = 4,
                l2_bytes: int = DEFAULT_L2_BYTES) -> Launch:
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
        warps = knobs.num_warps or default_warps(block_c)
        return Launch("split", 1, block_c, warps, n_rows, n_rows * chunks, chunks, knobs.num_stages)
    block_r = min(next_pow2(n_rows), max(1, (knobs.ROW_TILE or k.ROW_TILE) // block_c))
    warps = knobs.num_warps or default_warps(block_r * block_c)
    path = "single" if single else ("online" if alg == "online" else "looped")
    tiles = cdiv(n_rows, block_r)
    programs = min(tiles, persistent_cap(warps, sm_count)) if knobs.persistent else tiles
    if knobs.persistent and path == "online":  # the rows in flight within half the L2
        programs = min(programs, max(sm_count, l2_bytes // 2 // (block_r * n_cols * itemsize)))
    return Launch(path, block_r, block_c, warps, tiles, programs, 1, knobs.num_stages)
