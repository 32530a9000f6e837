"""The matmul family's knobs (kernelgen.offline.knobs says how knobs work): tiles, the L2 grouping,
warps and pipeline stages, all launch constants."""

from __future__ import annotations

from typing import Optional

from pydantic import StrictBool

from kernelgen.offline.knobs import Count, KnobsModel, Pow2, candidates


class MatmulKnobs(KnobsModel):
    BLOCK_M: Optional[Pow2] = candidates(None, 64, 128, 256)
    BLOCK_N: Optional[Pow2] = candidates(None, 64, 128, 256)
    BLOCK_K: Optional[Pow2] = candidates(None, 32, 64, 128)
    GROUP_SIZE_M: Count = candidates(8, 1, 4, 16)  # row-blocks sharing columns of b in L2
    num_warps: Optional[Pow2] = candidates(None, 4, 8)
    num_stages: Optional[Count] = candidates(None, 2, 3, 4, 5)
    autotune: StrictBool = candidates(False, True)
    # operands copied K-major with 16-byte rows before the product (the file's _pack). None: fp32 ones not
    # so already (Hopper's wgmma reads 32-bit operands only K-major); True: any dtype not so; False: never
    pack: Optional[StrictBool] = candidates(None, False, True)
