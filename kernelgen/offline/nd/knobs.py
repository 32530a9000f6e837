"""The knobs of the n-dimensional family, baked into its file's _KNOBS (None: the file's heuristic;
kernelgen.offline.knobs says how knobs work).

The names match the other families' where they mean the same (num_warps, the matmul tiles,
MAX_SINGLE_PASS, ROW_TILE), so the planner's hypotheses about them apply here too."""

from __future__ import annotations

from typing import Optional

from pydantic import StrictBool

from kernelgen.offline.knobs import Count, KnobsModel, Pow2, candidates


class NdKnobs(KnobsModel):
    # a reduction whose reduced elements (per kept position) fit this is read once into registers
    MAX_SINGLE_PASS: Optional[Count] = candidates(None, 4096, 8192, 32768)
    # elements a tile stage's program holds per step (kept x reduced), 4096 when None
    ROW_TILE: Optional[Pow2] = candidates(None, 1024, 2048, 8192, 16384)
    num_warps: Optional[Pow2] = candidates(None, 2, 4, 8, 16)
    BLOCK_M: Optional[Pow2] = candidates(None, 64, 128, 256)  # matmul stages
    BLOCK_N: Optional[Pow2] = candidates(None, 64, 128, 256)
    BLOCK_K: Optional[Pow2] = candidates(None, 32, 64, 128)
    GROUP_SIZE_M: Count = candidates(8, 1, 4, 16)
    num_stages: Optional[Count] = candidates(None, 2, 3, 4, 5)
    # matmul stages: operands copied K-major with 16-byte rows first (the file's _pack). None: fp32 ones not
    # so already (Hopper's wgmma reads 32-bit operands only K-major); True: any dtype not so; False: never
    pack: Optional[StrictBool] = candidates(None, False, True)
    # split: a reduction whose kept blocks are too few to fill the SMs (a norm or a loss down to a
    # scalar, per-channel statistics over a large batch) shares each block's reduced elements among
    # several programs, a launch per reduction level writing partials, then one combining them and
    # writing (kernelgen.offline.stages.emit_split). None: when the kept blocks give fewer than
    # SPLIT_PER_SM programs per SM; True: wherever the stage has a split form; False: never.
    split: Optional[StrictBool] = candidates(None, False, True)
    SPLIT_PER_SM: Optional[Count] = candidates(None, 2, 8, 16)  # programs per SM a split aims at (None: 4)
