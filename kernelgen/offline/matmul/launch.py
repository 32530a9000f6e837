"""The tiles a matmul knob setting launches at one problem size: a Python model of the generated
`_launch_config` (templates/offline/matmul.py.j2), for the pruning rules. The nd family's matmul
stages use the same table (its file's _matmul_config)."""

from __future__ import annotations

from typing import Any


def matmul_tiles(knobs: Any, m: int, n: int, fp32: bool) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, num_warps, num_stages); `knobs`: any model with the
    matmul knobs (MatmulKnobs, NdKnobs), None fields taking the heuristic's value."""
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
