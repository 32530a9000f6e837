"""What every family's launch model shares (each family's launch.py mirrors its generated file's
launch helper in Python, for the pruning rules, which reason about a value before anything is
compiled): one launch of a tiled kernel, the arithmetic its helpers use, the matmul tile table
both the matmul family's file (_launch_config) and nd's (_matmul_config) write, and the convolution
tiles of a file with a convolution stage (_conv_config, _conv_launch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Launch:
    """One launch of a tiled kernel: a row, pointwise or nd tile stage."""

    path: str  # rows: single | looped | online | split; pointwise: 2d | 1d; nd: pointwise | single | looped | scan | split
    block_r: int  # rows per program (1 for a flat 1-D tile); nd: kept positions (BLOCK_K)
    block_c: int  # columns per block (the 1-D tile's elements); nd: reduced elements per step (BLOCK_R)
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


def default_warps(tile: int) -> int:
    """Warps for a tile of this many elements: Liger-Kernel's calculate_settings steps."""
    return 4 if tile <= 2048 else (8 if tile <= 8192 else 16)


def matmul_tiles(knobs: Any, m: int, n: int, fp32: bool, k: int | None = None, kmajor: bool | None = None,
                 tf32: bool = False) -> tuple[int, int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, num_warps, num_stages) at an M x N (x K) output; `knobs`:
    any model with the matmul knobs (MatmulKnobs, NdKnobs), None fields taking the table's value.
    `kmajor`: fp32 operands both read K-major with 16-byte rows (None: as the files' `pack` leaves
    them: packed unless pack=False); `tf32`: PyTorch allows TF32 (one product, not three)."""
    if kmajor is None:
        kmajor = getattr(knobs, "pack", None) is not False
    if fp32:
        bm, bn, bk, warps, stages = fp32_tiles(m, n, k, kmajor, tf32)
    elif m * n >= 1 << 24:
        bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
    elif m * n >= 1 << 20:
        bm, bn, bk, warps, stages = 128, 128, 64, 8, 4
    else:
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 4
    return (knobs.BLOCK_M or bm, knobs.BLOCK_N or bn, knobs.BLOCK_K or bk, knobs.GROUP_SIZE_M,
            knobs.num_warps or warps, knobs.num_stages or stages)


def fp32_tiles(m: int, n: int, k: int | None, kmajor: bool, tf32: bool) -> tuple[int, int, int, int, int]:
    """The files' fp32 tile table (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages). Hopper's wgmma reads 32-bit
    operands only K-major: with b [K, N] row-major, TF32 products ran at 87 TFLOP/s where b^T
    contiguous reached 350 (H200, Triton 3.6, 2026-11-25, 4096^3, benchmarks/gemm_fp32.py). K-major,
    three TF32 products (tf32x3) at 128x128x64, 8 warps, 3 stages: 94 TFLOP/s, 1.85x cuBLAS's
    IEEE fp32 (51); K of 64: 128x64x32 at 4 warps, 4 stages, 1.38x (against 1.24x). Not K-major:
    128x64x32, 4 warps, 4 stages was the best of ten tiles (1.06x, the old 128x128x32 0.69x)."""
    if m * n < 1 << 20:
        return 64, 64, 32, 4, 3  # small outputs: enough programs to fill the SMs
    if not kmajor or (k is not None and k <= 64 and not tf32):
        return 128, 64, 32, 4, 4
    if tf32:
        return 128, 256, 32, 8, 3  # one TF32 product: 350 TFLOP/s at 4096^3 (cuBLAS TF32: 414)
    return 128, 128, 64, 8, 3


@dataclass(frozen=True)
class ConvTiles:
    """What a convolution stage launches at one case (the generated _conv_config and _conv_launch)."""

    form: str  # forward | transposed | direct
    block_m: int
    block_n: int
    block_k: int  # unused by the direct form
    group: int
    num_warps: int
    num_stages: int
    flat: bool  # K as (channel, tap) pairs
    rows: int  # M: output pixels (of one stride phase, transposed)
    cols: int  # N: output channels per group (direct: all of them)
    k: int  # input channels per group x taps
    programs: int  # the grid, both axes
    pack_x: bool = False  # the input copied channels-last before the launch (PACK_X)
    one_loop: bool = False  # (tap, channel block) pairs in one loop, not a channel loop in each tap's (ONE_LOOP)

    @property
    def tiles(self) -> tuple[int, int, int, int, int, int]:
        return self.block_m, self.block_n, self.block_k, self.group, self.num_warps, self.num_stages


def conv_tiles(knobs: Any, form: str, rows: int, cols: int, cin_g: int, taps: int, grid_y: int, fp32: bool,
               one: bool = False, epilogue: bool = False) -> ConvTiles:
    """The generated file's convolution tiles at M=`rows` x N=`cols`, `cin_g` input channels per group,
    `taps` kernel positions, `grid_y` programs along the grid's second axis (groups x stride phases);
    `one`: fp32 products taken as one TF32 product (kernelgen.runtime.v1.conv_precision); `epilogue`: the
    stage computes on the accumulator after the convolution (a bias, an activation)."""
    if form == "direct":
        bm, bn, bk, warps, stages, flat = 128, min(next_pow2(cols), 32), 16, 4, 2, False
    else:
        flat = form == "forward" and (knobs.FLAT_K if knobs.FLAT_K is not None else cin_g < 16)
        # fp32, from an H100 sweep of 68 KernelBench convolutions (benchmarks/conv_tune.py, tf32x3, 2026-11-27):
        # 256 pixels x 64 channels over 8 warps was the fastest of 12 tiles on 34, 128x32 over 4 on 24, and
        # 128 channels won twice. Geomean x eager, forward/transposed: these tiles before 0.34/0.40; 256x64
        # everywhere 0.39/0.35 (a group of 16 channels wastes 3/4 of it); the best of the old tile, 256x64
        # and 128x32 per problem 0.43/0.51 -- what following the group's channels up to 64 approximates
        bn = min(max(next_pow2(cols), 16), 128 if one or not fp32 else 64)
        bk = 32 if flat or fp32 else min(max(next_pow2(cin_g), 16), 64)
        bm = 256 if fp32 and bn >= 64 and rows >= 256 * 264 else 128 if rows >= 128 * 264 else 64
        warps, stages = (8 if bm * bn >= 128 * 128 else 4), (3 if fp32 else 4)
        if one and bn >= 64:
            # one TF32 product, from the same sweep (one product, 14 tiles, 2026-11-28): K steps of 16 four
            # deep; 256x128 over 8 warps where 128 channels and the pixels are there, else 128x64 over 4
            big = bn >= 128 and rows >= 256 * 264
            bm, bn, warps = (256, 128, 8) if big else (128 if rows >= 128 * 264 else 64, 64, 4)
            bk, stages = 16, 4
            if big and epilogue:  # 128 channels x 128 pixels where the stage computes on the accumulator
                bm = 128
            if flat and cin_g * taps <= 32:  # one step of 32 over two of 16 (level 1's 59, K = 27)
                bk = 32
        # one K step (few channels x taps, flattened): nothing to pipeline, and Triton 3.6 on an H100 got
        # KernelBench L1/59 (3x3x1 taps, 3 channels, K=27) wrong in every element with 3 stages (max error
        # 3.7; 9.5e-7 with 1 stage, or with FLAT_K off, or BLOCK_K 16), 2026-11-27
        if flat and cin_g * taps <= (knobs.BLOCK_K or bk):
            stages = 1
    bm, bn, bk = knobs.BLOCK_M or bm, knobs.BLOCK_N or bn, knobs.BLOCK_K or bk
    warps, stages = knobs.num_warps or warps, knobs.num_stages or stages
    pack_x = form != "direct" and not flat and (knobs.PACK_X if knobs.PACK_X is not None else
                                                 one and form == "forward" and (bn <= 64 or taps >= 25))
    programs = cdiv(rows, bm) * cdiv(cols, bn) * grid_y
    one_loop = form != "direct" and not flat and knobs.ONE_LOOP is not False
    return ConvTiles(form, bm, bn, bk, knobs.GROUP_SIZE_M, warps, stages, flat, rows, cols, cin_g * taps, programs,
                     pack_x, one_loop)
