"""The row families' knobs (row reductions, softmax, layer and RMS norms: kernelgen.offline.knobs
says how knobs work)."""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import StrictBool

from kernelgen.offline.knobs import Count, KnobsModel, Pow2, candidates

# A row of up to 8192 elements stays in registers (8192 fp32 over 8-16 warps is 16-32 registers per
# value); longer rows loop over 4096-column blocks, one pass per reduction.
ROW_MAX_SINGLE = 8192
ROW_LOOP_BLOCK = 4096
# Small rows: pack rows into one program until the tile holds ~2048 elements (a 64-wide softmax
# with one row per program would leave 15/16 of every warp idle).
ROW_TILE = 2048
# algorithm="single": rows up to 32768 elements stay in registers (32 fp32 registers per value at
# 32 warps); longer rows fall back to the loop.
ROW_SINGLE_LIMIT = 32768
# algorithm="split": a row is split only while there are fewer row blocks than 2 programs per SM,
# and each program keeps at least 2048 columns (8 KB of fp32), so the second launch and the
# partials' round trip stay small against the row's own traffic.
SPLIT_MIN_COLS = 2048


class RowKnobs(KnobsModel):
    code_knobs: ClassVar[tuple[str, ...]] = ("algorithm", "eviction", "persistent")

    MAX_SINGLE_PASS: Optional[Count] = candidates(None, 2048, 4096, 8192, 16384, 32768)  # longest row read once
    LOOP_BLOCK: Optional[Pow2] = candidates(None, 1024, 2048, 4096, 8192, 16384)  # columns per step of longer rows
    ROW_TILE: Optional[Count] = candidates(None, 512, 1024, 2048, 4096, 8192, 16384)  # elements a program holds
    num_warps: Optional[Pow2] = candidates(None, 1, 2, 4, 8, 16, 32)
    num_stages: Optional[Count] = candidates(None, 1, 2, 3, 4)
    eviction: Literal["none", "evict_first"] = candidates("none", "evict_first")
    autotune: StrictBool = candidates(False, True)
    # What a row longer than MAX_SINGLE_PASS costs (None: single up to it, looped beyond):
    #   single  rows up to MAX_SINGLE_PASS or, unset, 32768 in registers; longer rows loop
    #   looped  every row loops: one read per reduction level, then a write pass
    #   online  one read pass for every statistic (a running max rescales the running sums;
    #           Welford for mean and variance), then the write pass, its re-read hinted to L2
    #   split   few rows: each row over several programs writing partial statistics, a second
    #           launch combining them and writing (more rows than 2 per SM: as None)
    algorithm: Optional[Literal["single", "looped", "online", "split"]] = candidates(None, "online", "split", "single", "looped")
    persistent: StrictBool = candidates(False, True)  # ~32 warps' worth of programs per SM, looping over row blocks
