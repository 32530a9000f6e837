"""Which values of a convolution knob are worth timing at one case, and why: what each value launches
in every stage (kernelgen.offline.stages.launch; the convolution stage's follows the generated
_conv_config: conv/stage.py, kernelgen.offline.launch.conv_tiles) against the shared budgets
(kernelgen.offline.budgets) -- a knob no stage reads at this case, a value that launches the base's
kernels, tiles and grids, a GEMM tile off the tensor-core multiples or past the shared-memory or
accumulator budgets, a direct tile that spills registers, a tile that leaves SMs idle where another
fills them."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.budgets import REGS_OVERHEAD, REGS_PER_THREAD, Pruned, fill_the_sms, judge_each, matmul_budget
from kernelgen.offline.knobs import KnobsModel
from kernelgen.offline.launch import ConvTiles, next_pow2
from kernelgen.offline.stages.cases import StageCase, changed_stages, describe_launches
from kernelgen.offline.stages.program import StageLaunch

CONV_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_SIZE_M", "FLAT_K", "ONE_LOOP")
TILE_KNOBS = ("MAX_SINGLE_PASS", "ROW_TILE")
GRID_KNOBS = ("BLOCK_M", "BLOCK_N", "MAX_SINGLE_PASS", "ROW_TILE")  # knobs that change a grid


def unread(knob: str, launches: list[StageLaunch]) -> str | None:
    """Why no stage reads `knob` at this case, or None when one does."""
    convs = [s.conv for s in launches if s.conv is not None]
    if knob in TILE_KNOBS and all(s.kind == "conv" for s in launches):
        return f"{knob} sets the tiles of the stages after a convolution; this program has none"
    if knob == "ONE_LOOP" and not any(c.form == "transposed" or (c.form == "forward" and not c.flat) for c in convs):
        return "ONE_LOOP shapes a loop over taps and channel blocks; this convolution has none (direct, or K as (channel, tap) pairs)"
    if knob == "FLAT_K" and not any(c.form == "forward" for c in convs):
        return "FLAT_K chooses how a forward convolution walks K; this one is " + "/".join(sorted({c.form for c in convs}))
    if knob == "tf32" and all(c.form == "direct" for c in convs):
        return "tf32 chooses a tensor-core convolution's fp32 products; the direct (depthwise) form multiplies in fp32"
    if knob in ("BLOCK_K", "GROUP_SIZE_M") and all(c.form == "direct" for c in convs) and \
            not any(s.kind == "matmul" for s in launches):
        return f"{knob} is a GEMM's; the direct (depthwise) convolution has no K loop over channels"
    return None


def _direct_budget(knob: str, value: Any, ct: ConvTiles, sms: int) -> Pruned:
    """A direct tile: an fp32 accumulator and the loaded input per element, in registers."""
    per_thread = max(1, ct.block_m * ct.block_n // (32 * ct.num_warps))
    regs = 2 * per_thread + REGS_OVERHEAD
    what = (f"{knob}={value!r}: direct tile {ct.block_m}x{ct.block_n} over {ct.num_warps} warps = {per_thread} "
            f"elements per thread, ~{regs} registers (accumulator + input + {REGS_OVERHEAD})")
    if regs > REGS_PER_THREAD:
        return Pruned(value, False, f"{what} > {REGS_PER_THREAD} per thread: spills to local memory")
    return Pruned(value, True, f"{what}; {ct.programs} programs on {sms} SMs")


def _conv_verdict(knob: str, value: Any, new: ConvTiles, old: ConvTiles, itemsize: int, sms: int) -> Pruned:
    if new.form == "direct":
        return _direct_budget(knob, value, new, sms)
    if knob == "BLOCK_N" and new.block_n > max(16, next_pow2(new.cols)):
        return Pruned(value, False, f"BLOCK_N={new.block_n} over {new.cols} output channels a group: "
                                    f"{100 * (new.block_n - new.cols) // new.block_n}% of every tile is padding")
    # the same tile over another layout of the input (PACK_X) is another kernel to time, not the base's
    same = new.flat == old.flat and new.pack_x == old.pack_x and new.one_loop == old.one_loop
    got = matmul_budget(knob, value, new.tiles, old.tiles, same, new.rows, new.cols, new.k, itemsize, sms)
    if not got.kept:
        return got
    how = "(channel, tap) pairs" if new.flat else "(tap, channel block) pairs" if new.one_loop else "a channel loop in each tap's"
    layout = "; the input copied channels-last first" if new.pack_x else ""
    return Pruned(value, True, f"{got.reason}; K={new.k} as {how}{layout}; {new.programs} programs with groups and stride phases")


def prune_conv(case: StageCase, label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list,
               base: KnobsModel) -> list[Pruned]:
    base_launches = case.launches(base)
    why = unread(knob, base_launches)

    def judge(knob: str, value: Any, knobs: KnobsModel) -> Pruned:
        if why:
            return Pruned(value, False, why)
        if knob == "tf32":  # the same launches, another product: worth timing where the products are fp32
            return Pruned(value, case.fp32, "the fp32 products' precision: one TF32 product (where PyTorch allows "
                          "TF32 for convolutions) or three (tf32x3, near IEEE)" if case.fp32 else
                          f"tf32 changes float32 products only; this case is {case.itemsize}-byte")
        changed = [(new, old) for new, old in zip(case.launches(knobs), base_launches) if new != old]
        if not changed:
            return Pruned(value, False, f"{knob}={value!r} launches the same kernels, tiles and grids as the base at "
                                        f"{case.shape_text}: nothing to time")
        return changed_stages(changed, knob, value, case, lambda new, old: _conv_verdict(
            knob, value, new.conv, old.conv, case.itemsize, case.sms) if new.conv is not None and old.conv is not None else None)

    judged = judge_each(label, resolve, knob, values, base, judge)
    if knob in GRID_KNOBS and not why:
        for i, launch in enumerate(base_launches):
            judged = fill_the_sms(knob, judged, getattr(base, knob), _programs(case, resolve, base, knob, i), case.sms)
    return judged


def _programs(case: StageCase, resolve: Callable[[Any], KnobsModel], base: KnobsModel, knob: str, stage: int) -> Callable[[Any], int]:
    """value -> the grid stage `stage` launches with `knob` set to it."""
    def programs(value: Any) -> int:
        s = case.launches(resolve({**base.model_dump(), knob: value}))[stage]
        if s.conv is not None:
            return s.conv.programs
        if s.launch is not None:
            return s.launch.programs
        assert s.tiles is not None and s.mnk is not None
        return -(-s.mnk[0] // s.tiles[0]) * -(-s.mnk[1] // s.tiles[1])
    return programs


def describe(launches: list[StageLaunch]) -> str:
    """What a setting launches, stage by stage, in words (round 0's reason)."""
    parts = []
    for s in launches:
        c = s.conv
        if c is None:
            parts.append(describe_launches([s]))
            continue
        how = "direct, no tensor cores" if c.form == "direct" else \
            f"{c.form}, K={c.k} as {'(channel, tap) pairs' if c.flat else 'taps x channels'}"
        parts.append(f"stage {s.stage} (conv {c.rows}x{c.cols}, {how}): {c.block_m}x{c.block_n}"
                     f"{'' if c.form == 'direct' else 'x' + str(c.block_k)} tiles, {c.num_warps} warps, "
                     f"{c.num_stages} stages, {c.programs} programs{', the input channels-last' if c.pack_x else ''}")
    return "; ".join(parts)
