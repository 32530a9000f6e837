"""What an nd knob setting launches at one case, stage by stage: a Python model of the generated
file's _tile_config and _matmul_config (templates/offline/stages.py.j2), for the pruning rules
and round 0. tests/offline/test_nd_tuning.py holds the two to the same answers.

Sizes come from the case: each stage's frame is symbolic in the inputs' dims, and the groups the
wrapper merges (kernelgen.offline.stages.frames.groups) are evaluated at the case's shapes, as the
generated _layout does for contiguous inputs.
"""

from __future__ import annotations

import math
from typing import Optional

import sympy

from kernelgen.offline.stages.analysis import StageAnalysis
from kernelgen.offline.stages.emit_matmul import MatmulKernel
from kernelgen.offline.stages.emit_split import SplitKernel
from kernelgen.offline.stages.emit_tile import TileKernel
from kernelgen.offline.stages.program import Stage, StageKnobs, StageLaunch
from kernelgen.offline.launch import Launch, cdiv, default_warps, matmul_tiles, next_pow2

# Launch heuristics of the generated file (its _tile_config): a reduction whose elements fit 16384
# (64 KB of fp32 per program) is read once into registers; a step of a tile stage holds 4096
# elements (~16 KB of fp32 loads in flight per program); a scan step 1024 elements of its dim.
# A single-pass reduction holds at most 256 kept positions per program; contiguous kept positions
# go 128 to a tile (512 B of fp32 per reduced row), and a reduction that reads its elements once
# takes that wide tile over a single pass narrower than 32 of them (a narrow one reads part sectors).
# A split reduction aims at 4 programs per SM, 16 where a write pass follows (H200, 2026-11-25:
# FrobeniusNorm 112x64x512x512 5.84 / 5.60 / 5.61 ms at 4 / 8 / 16, BatchNorm 64x64x512x512 4.93 /
# 4.81 / 4.67 ms; a loss to a scalar, HingeLoss 32768^2, 0.99 / 1.02 / 1.04 ms), each program over
# >= 8 steps, its combine over <= 8192 partials. It splits only where the kept blocks are fewer than
# 2 per SM (an instance norm's 7168 blocks of 262144 elements took 5.52 ms unsplit, 7.73 ms split in
# two) and from 1M elements (below, ~4 MB of fp32 takes a few microseconds on one wave anyway).
CONFIG = {"single": 16384, "tile": 4096, "scan": 1024, "single_kept": 256, "contig_kept": 128, "contig_min": 32,
          "split_per_sm": 4, "split_per_sm_writes": 16, "split_min_steps": 8, "split_tile": 8192,
          "split_min_elems": 1 << 20, "split_below": 2,
          "flat_below": 32}
SINGLE_KEPT = CONFIG["single_kept"]
CONTIGUOUS_KEPT = CONFIG["contig_kept"]


def split_per_sm(split: Optional[SplitKernel]) -> int:
    """The programs per SM a stage's split form aims at (0: it has none): the file's split_sm."""
    if split is None:
        return 0
    return CONFIG["split_per_sm_writes"] if split.writes else CONFIG["split_per_sm"]


def tile_config(knobs: StageKnobs, kind: str, n_kt: int, n_ko: int, n_rt: int, n_ro: int, k_contig: bool,
                one_pass: bool = False, split_sm: int = 0, sms: int = 132) -> Launch:
    """The generated _tile_config: the path (pointwise, scan, single, looped or split), BLOCK_K x
    BLOCK_R, the warps and the grid (a split's: kept blocks x n_split, chunks = n_split)."""
    single_max = knobs.MAX_SINGLE_PASS or CONFIG["single"]
    tile_max = knobs.ROW_TILE or CONFIG["tile"]
    forced = knobs.split if split_sm else False
    split = None
    if kind == "pointwise":
        block_k, block_r, path = min(next_pow2(n_kt), tile_max), 1, "pointwise"
    elif kind == "scan":
        block_r = min(next_pow2(n_rt), CONFIG["scan"])
        block_k, path = max(1, min(next_pow2(n_kt), tile_max // block_r)), "scan"
    else:
        single = n_ro == 1 and n_rt <= single_max and forced is not True
        if single and k_contig and one_pass and n_kt >= CONFIG["contig_min"] and \
                single_max // next_pow2(n_rt) < CONFIG["contig_min"]:
            single = False
        if single:
            block_r = next_pow2(n_rt)
            block_k, path = max(1, min(next_pow2(n_kt), single_max // block_r, SINGLE_KEPT)), "single"
        elif k_contig:
            block_k = min(next_pow2(n_kt), CONTIGUOUS_KEPT)
            block_r, path = max(1, min(next_pow2(n_rt), tile_max // block_k)), "looped"
        else:
            block_r = min(next_pow2(n_rt), tile_max)
            block_k, path = max(1, min(next_pow2(n_kt), tile_max // block_r)), "looped"
        if not single and forced is not False:
            split = split_count(n_ko * cdiv(n_kt, block_k), n_ro * cdiv(n_rt, block_r), block_k, block_r, sms,
                                forced is True, knobs.SPLIT_PER_SM or split_sm)
    warps = knobs.num_warps or default_warps(block_k * block_r)
    tiles = n_ko * cdiv(n_kt, block_k)
    if split is not None:
        return Launch("split", block_k, block_r, warps, tiles, tiles * split[0], split[0], knobs.num_stages)
    return Launch(path, block_k, block_r, warps, tiles, tiles, 1, knobs.num_stages)


def split_count(kept: int, steps_all: int, block_k: int, block_r: int, sms: int, forced: bool,
                per_sm: int) -> Optional[tuple[int, int]]:
    """The generated _split: (n_split, steps per program) or None."""
    if not forced and (kept >= CONFIG["split_below"] * sms or kept * steps_all * block_k * block_r < CONFIG["split_min_elems"]):
        return None
    most = min(steps_all if forced else steps_all // CONFIG["split_min_steps"], max(2, CONFIG["split_tile"] // block_k))
    n_split = min(max(cdiv(per_sm * sms, kept), 2 if forced else 1), most)
    if n_split < 2:
        return None
    steps = cdiv(steps_all, n_split)
    return cdiv(steps_all, steps), steps


def flat(kind: str, n_kt: int, n_ko: int, k_contig: bool, big: bool) -> bool:
    """The generated plan's FLAT choice for a stage that has the form: a tiled kept group under
    flat_below positions beside other kept positions, and no buffer of 2**31 elements or more. Not
    for a reduction or scan whose tiled group is contiguous: its tile then reads BLOCK_R rows of that
    group at once (whole sectors), where a flat tile would read one position's column, a 32-byte
    sector per element (x[64, 4096, 16].sum(1): 8x the bytes)."""
    return not big and n_ko > 1 and n_kt < CONFIG["flat_below"] and (kind == "pointwise" or not k_contig)


def _big(analysis: StageAnalysis, binding: dict[str, int]) -> bool:
    """Whether a buffer reaches 2**31 elements at the case (the generated plan's `big`: 64-bit offsets)."""
    return max((math.prod(size_at(d, binding) for d in b.shape) for b in analysis.program.buffers.values()),
               default=0) >= 2**31


def _binding(analysis: StageAnalysis, shapes: dict[str, list[int]], input_names: list[str]) -> dict[str, int]:
    """Each dimension symbol of the trace -> its size at the case."""
    return {name: shapes[input_names[i]][d] for name, (i, d) in analysis.traced.graph.symbols.items()}


def size_at(e: sympy.Expr | int, binding: dict[str, int]) -> int:
    e = sympy.sympify(e)
    return int(e.xreplace({s: sympy.Integer(binding[s.name]) for s in e.free_symbols if s.name in binding}))


def _group_sizes(st: Stage, binding: dict[str, int]) -> list[int]:
    frame = [size_at(d, binding) for d in st.frame]
    return [math.prod(frame[d] for d in grp) for grp in st.groups]


def _k_contig(analysis: StageAnalysis, st: Stage, kernel: TileKernel, binding: dict[str, int]) -> bool:
    """Whether the stage's first access walks the tiled kept group with stride 1 (contiguous buffers)."""
    from kernelgen.offline.stages.frames import frame_strides

    if not kernel.ports or kernel.k_groups[-1] not in kernel.ports[0].groups:
        return False
    port = kernel.ports[0]
    strides = frame_strides(st, analysis.program.buffers[port.buffer].shape, port.access.views, port.access.map)
    if strides is None:
        return False
    frame = [size_at(d, binding) for d in st.frame]
    dims = [d for d in st.groups[kernel.k_groups[-1]] if frame[d] != 1]
    return bool(dims) and size_at(strides[dims[-1]], binding) == 1


def stage_launches(analysis: StageAnalysis, knobs: StageKnobs, shapes: dict[str, list[int]], input_names: list[str],
                   fp32: bool, sms: int = 132) -> list[StageLaunch]:
    """Every stage's launch under `knobs` at the case `shapes` (input name -> shape)."""
    binding = _binding(analysis, shapes, input_names)
    big = _big(analysis, binding)
    out = []
    for st, kernel in zip(analysis.program.stages, analysis.kernels):
        sizes = _group_sizes(st, binding)
        anchor = analysis.anchors.get(st.kind)
        if anchor is not None:  # a family's own stage kind (a convolution): its own launch model
            out.append(anchor.launch(analysis.traced.graph, st, kernel, knobs, binding, fp32))
            continue
        if isinstance(kernel, MatmulKernel):
            m, n = sizes[kernel.batch], sizes[kernel.batch + 1]
            k = size_at(analysis.traced.graph[analysis.traced.graph[st.anchor].args[0]].shape[-1], binding)
            out.append(StageLaunch(st.id, "matmul", tiles=matmul_tiles(knobs, m, n, fp32, k), mnk=(m, n, k)))
            continue
        assert isinstance(kernel, TileKernel)
        kt, rt = kernel.k_groups[-1], kernel.r_groups[-1] if kernel.r_groups else None
        n_kt, n_ko = sizes[kt], math.prod(sizes[g] for g in kernel.k_groups[:-1])
        k_contig = _k_contig(analysis, st, kernel, binding)
        if kernel.flat and flat(st.kind, n_kt, n_ko, k_contig, big):
            n_kt, n_ko, k_contig = n_kt * n_ko, 1, False
        launch = tile_config(knobs, st.kind, n_kt, n_ko, sizes[rt] if rt is not None else 1,
                             math.prod(sizes[g] for g in kernel.r_groups[:-1]), k_contig, kernel.one_pass,
                             split_per_sm(kernel.split), sms)
        out.append(StageLaunch(st.id, st.kind, launch=launch))
    return out
