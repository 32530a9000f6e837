"""The knobs of each family: typed, with their candidate values, and the defaults baked into a file.

`None` means: the generated file keeps its shape-aware heuristic for that knob (the `_launch_config`
helper picks it per call). Any other value is baked in as a constant. The first candidate of every
knob is its default; the optimize loop changes one knob at a time from `knob_space`. Knobs are
stored in state.json, so every model round-trips through JSON (`model_dump` / `model_validate`).

Two kinds of knob: most are launch constants (block sizes, warps, stages: a dispatch table gives
each shape its own), while those in CODE_KNOBS change the kernel's text (the algorithm, the erf,
the eviction hint, a persistent loop, the grid's rank): a file whose dispatch table uses several
values of one holds a @triton.jit function per combination (kernelgen.offline.dispatch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError

# Pointwise: ~4096 elements (16 KB of fp32) per program gives each H100 SM enough loads in flight
# to approach copy bandwidth; the Triton 2-D broadcast kernel measured 87-100% of a 3.0 TB/s copy.
POINTWISE_TILE = 4096
# Row programs: a row of up to 8192 elements stays in registers (8192 fp32 over 8-16 warps is
# 16-32 registers per value); longer rows loop over 4096-column blocks, one pass per reduction.
ROW_MAX_SINGLE = 8192
ROW_LOOP_BLOCK = 4096
# Small rows: pack rows into one program until the tile holds ~2048 elements (a 64-wide softmax
# with one row per program would leave 15/16 of every warp idle).
ROW_TILE = 2048
# algorithm="single": rows up to 32768 elements stay in registers (32 fp32 registers per value at
# 32 warps); longer rows fall back to the loop.
ROW_SINGLE_LIMIT = 32768
# Persistent grids: about 32 resident warps per SM (half of Hopper's 64), i.e. 32 // num_warps
# programs per SM, each looping over tiles; under the CPU interpreter 4 "SMs" (no device to ask).
PERSISTENT_WARPS_PER_SM = 32
INTERPRETER_SMS = 4
# An online row's write pass re-reads what its statistics pass read; a persistent online grid keeps
# the rows in flight within half the device's L2 (this much where the device reports none: an H100's).
DEFAULT_L2_BYTES = 50 * 2**20
# algorithm="split": a row is split only while there are fewer row blocks than 2 programs per SM,
# and each program keeps at least 2048 columns (8 KB of fp32), so the second launch and the
# partials' round trip stay small against the row's own traffic.
SPLIT_MIN_COLS = 2048

# A stage count, a threshold or a group size: a positive int (True is not 512).
Count = Annotated[int, Field(strict=True, gt=0)]


def _power_of_two(n: int) -> int:
    if n & (n - 1):
        raise ValueError("must be a power of two (tl.arange and num_warps take nothing else)")
    return n


# A block size or a warp count: Triton takes powers of two only.
Pow2 = Annotated[Count, AfterValidator(_power_of_two)]


def candidates(default: Any, *others: Any) -> Any:
    """A knob's field: its default and the values the optimize loop tries, default first."""
    return Field(default=default, json_schema_extra={"candidates": [default, *others]})


class _Knobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def space(cls) -> dict[str, list[Any]]:
        return {name: list(f.json_schema_extra["candidates"]) for name, f in cls.model_fields.items()}  # type: ignore[index]


class PointwiseKnobs(_Knobs):
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


class RowKnobs(_Knobs):
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


class MatmulKnobs(_Knobs):
    BLOCK_M: Optional[Pow2] = candidates(None, 64, 128, 256)
    BLOCK_N: Optional[Pow2] = candidates(None, 64, 128, 256)
    BLOCK_K: Optional[Pow2] = candidates(None, 32, 64, 128)
    GROUP_SIZE_M: Count = candidates(8, 1, 4, 16)  # row-blocks sharing columns of b in L2
    num_warps: Optional[Pow2] = candidates(None, 4, 8)
    num_stages: Optional[Count] = candidates(None, 2, 3, 4, 5)
    autotune: StrictBool = candidates(False, True)


Knobs = Union[PointwiseKnobs, RowKnobs, MatmulKnobs]

# The knobs that change a kernel's text rather than its launch (see the module docstring).
CODE_KNOBS = {
    PointwiseKnobs: ("grid", "eviction", "erf", "persistent"),
    RowKnobs: ("algorithm", "eviction", "persistent"),
    MatmulKnobs: (),
}


def knobs_class(family: str) -> type[Knobs]:
    if family == "pointwise":
        return PointwiseKnobs
    if family == "matmul":
        return MatmulKnobs
    return RowKnobs  # row_reduction, softmax, layernorm, rmsnorm


def resolve(family: str, knobs: Knobs | Mapping[str, Any] | None) -> Knobs:
    """The family's knobs: a typed model as is, or the defaults overridden by a dict of knobs.
    Unknown knobs, bad values, or another family's model are a ValueError that names them."""
    cls = knobs_class(family)
    if isinstance(knobs, _Knobs):
        if not isinstance(knobs, cls):
            raise ValueError(f"{type(knobs).__name__} given for the {family} family, which takes {cls.__name__}")
        return knobs
    given = dict(knobs or {})
    unknown = [k for k in given if k not in cls.model_fields]
    if unknown:
        raise ValueError(f"unknown knob {unknown[0]!r} for the {family} family; known: {', '.join(cls.model_fields)}")
    try:
        return cls.model_validate(given)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        raise ValueError(f"knob {name}={given.get(name)!r} is not valid for the {family} family: {err['msg']} "
                         f"(candidates: {cls.space().get(name)})") from None
