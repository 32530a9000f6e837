"""What every family's pruning rules share (the seed's assembly-aware pruning): the budgets of an
NVIDIA H100/H200 SM a knob value is measured against -- 255 registers per thread and 64K per SM,
~227 KB of shared memory per block, tensor-core tiles in multiples of 16, at least 2 programs per
SM -- the verdict type, and the loop that judges every value of one knob at one case.

Each family's pruning.py says what a value launches there (its launch.py, a model of the generated
file's launch helper) and which of its own rules apply; reasons are written for the log, with the
numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kernelgen.offline.launch import Launch, cdiv, next_pow2
from kernelgen.offline.knobs import KnobsModel

REGS_PER_THREAD = 255  # the most registers a thread may hold before spilling to local memory
REGS_OVERHEAD = 40  # addresses, masks, loop state: what a kernel holds besides its tiles
SMEM_PER_BLOCK = 227 * 1024  # opt-in shared memory per block on H100/H200 (228 KB per SM)
DEFAULT_SMS = 132  # H100 SXM / H200: used when the caller does not know the device


@dataclass(frozen=True)
class Pruned:
    value: Any
    kept: bool  # worth timing
    reason: str  # why, with the numbers


# judge(knob, value, knobs) -> the verdict on one value that is not the base setting
Judge = Callable[[str, Any, KnobsModel], Pruned]


def judge_each(label: str, resolve: Callable[[Any], KnobsModel], knob: str, values: list, base: KnobsModel,
               judge: Judge) -> list[Pruned]:
    """Every value of `knob` (the rest as in the resolved `base`): a value the family's knobs model
    refuses is dropped with its error, the base setting is kept as the reference, the rest judged."""
    if knob not in type(base).model_fields:
        raise ValueError(f"unknown knob {knob!r} for the {label} family; known: {', '.join(type(base).model_fields)}")
    out = []
    for value in values:
        try:
            knobs = resolve({**base.model_dump(), knob: value})
        except ValueError as e:
            out.append(Pruned(value, False, str(e)))
            continue
        if knobs == base:
            out.append(Pruned(value, True, f"the base setting ({knob}={value!r}): the reference the others are timed against"))
        else:
            out.append(judge(knob, value, knobs))
    return out


def register_budget(knob: str, value: Any, launch: Launch, sms: int, live: int) -> Pruned:
    """A tile of `live` fp32 values per element against the register file: spilling past 255 per
    thread drops the value; otherwise how many programs an SM holds, and the grid."""
    regs = live * launch.per_thread + REGS_OVERHEAD
    what = (f"{knob}={value!r}: {launch.path} tile {launch.block_r}x{launch.block_c} over {launch.num_warps} warps = "
            f"{launch.per_thread} elements per thread, ~{regs} registers ({live} fp32 values + {REGS_OVERHEAD})")
    if regs > REGS_PER_THREAD:
        return Pruned(value, False, f"{what} > {REGS_PER_THREAD} per thread: spills to local memory")
    per_sm = max(1, 65536 // (max(regs, 32) * 32 * launch.num_warps))
    return Pruned(value, True, f"{what}, {per_sm} program(s) per SM by the 64K-register file; "
                               f"{launch.programs} programs on {sms} SMs")


def matmul_budget(knob: str, value: Any, tiles: tuple, base_tiles: tuple, same_autotune: bool,
                  m: int, n: int, k: int, itemsize: int, sms: int) -> Pruned:
    """A matmul tile (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_SIZE_M, warps, stages) at M x N x K: the same
    tile as the base, tensor-core multiples, K padding, shared memory, accumulator registers."""
    bm, bn, bk, group, warps, stages = tiles
    if tiles == base_tiles and same_autotune:
        return Pruned(value, False, f"{knob}={value!r} gives the base's tile {bm}x{bn}x{bk} ({warps} warps, {stages} stages) "
                                    f"at M={m} N={n} K={k}: nothing to time")
    if any(b % 16 for b in (bm, bn, bk)):
        return Pruned(value, False, f"tile {bm}x{bn}x{bk}: tensor-core MMAs take multiples of 16")
    if bk > next_pow2(k) and knob == "BLOCK_K":
        return Pruned(value, False, f"BLOCK_K={bk} > K={k}: most of every step is padding")
    smem = stages * (bm * bk + bk * bn) * itemsize
    if smem > SMEM_PER_BLOCK:
        return Pruned(value, False, f"{stages} stages x ({bm}x{bk} + {bk}x{bn}) x {itemsize} B = {smem // 1024} KB "
                                    f"of shared memory > {SMEM_PER_BLOCK // 1024} KB per block")
    acc = bm * bn // (32 * warps)
    if acc + REGS_OVERHEAD > REGS_PER_THREAD:
        return Pruned(value, False, f"a {bm}x{bn} fp32 accumulator over {warps} warps is {acc} registers per thread "
                                    f"(+{REGS_OVERHEAD}) > {REGS_PER_THREAD}: spills")
    if knob == "GROUP_SIZE_M" and cdiv(m, bm) <= 1:
        return Pruned(value, False, f"one row block (M={m}, BLOCK_M={bm}): grouping orders nothing")
    programs = cdiv(m, bm) * cdiv(n, bn)
    return Pruned(value, True, f"tile {bm}x{bn}x{bk}, {warps} warps, {stages} stages: {smem // 1024} KB shared memory, "
                               f"{acc} accumulator registers per thread, {programs} programs on {sms} SMs")


def fill_the_sms(knob: str, judged: list[Pruned], base_value: Any, programs_of: Callable[[Any], int], sms: int) -> list[Pruned]:
    """Values that keep fewer than 2 programs per SM where another kept value reaches more are
    dropped (`programs_of(value)`: the grid that value launches)."""
    programs = {id(p): programs_of(p.value) for p in judged if p.kept}
    if not programs:
        return judged
    target = min(2 * sms, max(programs.values()))
    out = []
    for p in judged:
        got = programs.get(id(p))
        if got is not None and got < target and p.value != base_value:
            p = Pruned(p.value, False, f"{knob}={p.value!r}: {got} programs on {sms} SMs (< 2 per SM) where another value "
                                       f"reaches {target}: SMs would idle")
        out.append(p)
    return out
