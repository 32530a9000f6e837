"""The pointwise family's knobs (kernelgen.offline.knobs says how knobs work)."""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import StrictBool

from kernelgen.offline.knobs import Count, KnobsModel, Pow2, candidates

# ~4096 elements (16 KB of fp32) per program gives each H100 SM enough loads in flight to approach
# copy bandwidth; the Triton 2-D broadcast kernel measured 87-100% of a 3.0 TB/s copy.
POINTWISE_TILE = 4096


class PointwiseKnobs(KnobsModel):
    code_knobs: ClassVar[tuple[str, ...]] = ("grid", "eviction", "erf", "persistent")

    BLOCK_SIZE: Optional[Pow2] = candidates(None, 512, 1024, 2048, 4096, 8192, 16384, 32768)  # elements per program
    num_warps: Optional[Pow2] = candidates(None, 2, 4, 8, 16)
    num_stages: Optional[Count] = candidates(None, 1, 2, 3)
    grid: Literal["2d", "1d"] = candidates("2d", "1d")  # [rows, cols] tiles, or a flat 1-D grid
    eviction: Literal["none", "evict_first"] = candidates("none", "evict_first")  # on the full-size loads
    autotune: StrictBool = candidates(False, True)
    # Bytes per program instead of elements (BLOCK_SIZE, when set, wins): TILE_BYTES / element size
    # elements, so a 2-byte dtype gets twice fp32's elements -- 16-byte loads per thread at equal
    # bytes in flight (16384: 4096 fp32 or 8192 bf16 elements per program).
    TILE_BYTES: Optional[Pow2] = candidates(None, 16384, 32768, 65536)
    persistent: StrictBool = candidates(False, True)  # ~32 warps' worth of programs per SM, looping over tiles
    # erf as libdevice's erff, or Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7, 6e-7 in fp32; one exp,
    # a division and five FMAs): exact GELU in 2-byte dtypes is bound by arithmetic, 65% of copy on an H200
    erf: Literal["libdevice", "poly"] = candidates("libdevice", "poly")
