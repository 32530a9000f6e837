"""Which values of one knob are worth timing at one case, and why (the seed's assembly-aware pruning).

    prune(spec, "algorithm", [None, "online", "split"], base, {"x": [4096, 50257]}, "bfloat16", 132)
    -> [Pruned(None, True, "the base setting ..."), Pruned("online", True, "rows of 50257 > ..."), ...]

Each value is judged by what it would launch at the case's shape (kernelgen.offline.launch, a model
of the generated `_launch_config`), against budgets of an NVIDIA H100/H200 SM: 255 registers per
thread and 64K per SM, ~227 KB of shared memory per block, tensor-core tiles in multiples of 16,
and at least 2 programs per SM. Reasons are written for the log, with the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kernelgen.offline import knobs as defaults
from kernelgen.offline.analysis import analyse
from kernelgen.offline.dispatch import code_key, frame_key
from kernelgen.offline.fusion import fusible, levels
from kernelgen.offline.knobs import Knobs, MatmulKnobs, PointwiseKnobs, RowKnobs, resolve
from kernelgen.offline.launch import Launch, cdiv, collapsed_frame, matmul_tiles, next_pow2, pointwise_launch, rows_launch
from kernelgen.spec import DTYPES, OperatorSpec

REGS_PER_THREAD = 255  # the most registers a thread may hold before spilling to local memory
REGS_OVERHEAD = 40  # addresses, masks, loop state: what a kernel holds besides its tiles
SMEM_PER_BLOCK = 227 * 1024  # opt-in shared memory per block on H100/H200 (228 KB per SM)
DEFAULT_SMS = 132  # H100 SXM / H200: used when the caller does not know the device
ERF_POLY_ERROR = 1.5e-7  # Abramowitz-Stegun 7.1.26's bound on |erf error| (exact arithmetic)
ERF_POLY_FP32 = 6e-7  # the same formula evaluated in fp32, as the kernels do (5.4e-7 measured near x = 0.04)


@dataclass(frozen=True)
class Pruned:
    value: Any
    kept: bool  # worth timing
    reason: str  # why, with the numbers


def prune(spec: OperatorSpec, knob: str, values: list, base: Knobs | dict, shapes: dict[str, list[int]], dtype: str,
          sm_count: int | None) -> list[Pruned]:
    """Judge every value of `knob` (the rest of the knobs as in `base`) at one case: `shapes`
    (input name -> shape) in `dtype`, on a device of `sm_count` SMs (None: 132, an H100/H200)."""
    traced, kind = analyse(spec.model_dump_json())
    base = resolve(kind.family, base)
    if knob not in type(base).model_fields:
        raise ValueError(f"unknown knob {knob!r} for the {kind.family} family; known: {', '.join(type(base).model_fields)}")
    sms = sm_count or DEFAULT_SMS
    itemsize = getattr(torch, DTYPES[dtype]).itemsize
    ctx = _Case(spec, traced, kind.family, base, shapes, dtype, itemsize, sms)
    out = []
    for value in values:
        try:
            knobs = resolve(kind.family, {**base.model_dump(), knob: value})
        except ValueError as e:
            out.append(Pruned(value, False, str(e)))
            continue
        out.append(ctx.judge(knob, value, knobs))
    return _relative(ctx, knob, out)


@dataclass
class _Case:
    spec: OperatorSpec
    traced: Any
    family: str
    base: Knobs
    shapes: dict[str, list[int]]
    dtype: str
    itemsize: int
    sms: int

    @property
    def shape_text(self) -> str:
        return ", ".join(f"{n} {list(self.shapes[n])}" for n in self.spec.input_names)

    def launch(self, knobs: Knobs) -> Launch | tuple:
        if isinstance(knobs, MatmulKnobs):
            m, n, kk = self.mnk()
            return matmul_tiles(knobs, m, n, self.dtype == "float32")
        if isinstance(knobs, RowKnobs):
            rows, cols = frame_key([self.shapes[n] for n in self.spec.input_names])
            return rows_launch(knobs, rows, cols, self.sms, self.itemsize)
        assert isinstance(knobs, PointwiseKnobs)
        rows, cols = collapsed_frame([self.shapes[n] for n in self.spec.input_names], keep_last=False)
        return pointwise_launch(knobs, rows, cols, self.itemsize, self.sms)

    def mnk(self) -> tuple[int, int, int]:
        mm = next(n for n in self.traced.graph.nodes if n.op == "mm")
        a_i, b_i = (self.traced.graph.node(i).attrs["index"] for i in mm.args)
        a, b = self.shapes[self.spec.input_names[a_i]], self.shapes[self.spec.input_names[b_i]]
        m, kk = (a[1], a[0]) if self.traced.inputs[a_i].transposed else (a[0], a[1])
        n = b[0] if self.traced.inputs[b_i].transposed else b[1]
        return m, n, kk

    # --- one value ------------------------------------------------------------------------
    def judge(self, knob: str, value: Any, knobs: Knobs) -> Pruned:
        if knobs == self.base:
            return Pruned(value, True, f"the base setting ({knob}={value!r}): the reference the others are timed against")
        if self.family == "matmul":
            return self._matmul(knob, value, knobs)
        launch, base_launch = self.launch(knobs), self.launch(self.base)
        special = self._rows(knob, value, knobs, launch) if self.family != "pointwise" else self._pointwise(knob, value, knobs, launch)
        if special is not None:
            return special
        if launch == base_launch and _same_code(knobs, self.base):
            return Pruned(value, False, f"{knob}={value!r} launches the same kernel, tile and grid as the base at {self.shape_text}: "
                                        "nothing to time")
        return self._budget(knob, value, launch)

    def _budget(self, knob: str, value: Any, launch: Launch) -> Pruned:
        live = 2 if launch.path in ("single", "2d", "1d") else 3  # the tile and a temporary (+ an accumulator when looping)
        regs = live * launch.per_thread + REGS_OVERHEAD
        what = (f"{knob}={value!r}: {launch.path} tile {launch.block_r}x{launch.block_c} over {launch.num_warps} warps = "
                f"{launch.per_thread} elements per thread, ~{regs} registers ({live} fp32 values + {REGS_OVERHEAD})")
        if regs > REGS_PER_THREAD:
            return Pruned(value, False, f"{what} > {REGS_PER_THREAD} per thread: spills to local memory")
        per_sm = max(1, 65536 // (max(regs, 32) * 32 * launch.num_warps))
        return Pruned(value, True, f"{what}, {per_sm} program(s) per SM by the 64K-register file; "
                                   f"{launch.programs} programs on {self.sms} SMs")

    def _rows(self, knob: str, value: Any, knobs: RowKnobs, launch: Launch) -> Pruned | None:
        rows, cols = frame_key([self.shapes[n] for n in self.spec.input_names])
        why = fusible(self.traced.graph)
        n_levels = levels(self.traced.graph)
        fits = next_pow2(cols) <= (self.base.MAX_SINGLE_PASS or defaults.ROW_MAX_SINGLE)
        if knob == "algorithm":
            if value in ("online", "split") and why is not None:
                return Pruned(value, False, f"{value} needs statistics that merge in one pass; {self.spec.name}'s do not: {why}")
            if value == "online":
                if launch.path != "online":
                    return Pruned(value, False, f"rows of {cols} fit in registers (<= {knobs.MAX_SINGLE_PASS or defaults.ROW_MAX_SINGLE}): "
                                                "read once already, online changes nothing here")
                if n_levels < 2 and all(o.space != "full" for o in self.traced.outputs):
                    return Pruned(value, False, f"one reduction and no per-element output: the looped kernel reads each row of {cols} "
                                                "once already; online is the same work")
                row_bytes = cols * self.itemsize
                in_flight = min(launch.programs, self.sms * max(1, 32 // launch.num_warps)) * launch.block_r * row_bytes
                return Pruned(value, True, f"rows of {cols} > the single-pass limit: looped reads each row {n_levels + 1} times "
                                           f"({n_levels} statistics pass(es) + the write pass), online once plus a write-pass "
                                           f"re-read of ~{in_flight / 2**20:.0f} MiB in flight ({'fits' if in_flight < 40 * 2**20 else 'exceeds'} a 50 MB L2)")
            if value == "split":
                if launch.path != "split":
                    return Pruned(value, False, f"{rows} rows >= 2 x {self.sms} SMs, or rows of {cols} <= {defaults.SPLIT_MIN_COLS} "
                                                "columns: every SM has rows already; split would add a launch and a round trip")
                return Pruned(value, True, f"{rows} rows on {self.sms} SMs leave {max(self.sms - rows, 0)} SMs idle with a program per row; "
                                           f"split runs {launch.programs} programs ({launch.chunks} chunks of a row each)")
            if value == "looped" and fits:
                return Pruned(value, False, f"rows of {cols} fit in registers: looping re-reads each row {n_levels + 1} times instead of once")
            if value == "single" and launch.path != "single":
                return Pruned(value, False, f"rows of {cols} exceed {defaults.ROW_SINGLE_LIMIT}: single falls back to the loop")
        if knob == "persistent" and value:
            return self._persistent(value, launch)
        if knob == "num_stages" and launch.path == "single":
            return Pruned(value, False, f"rows of {cols} sit in registers: no loop whose loads num_stages could pipeline")
        if knob == "MAX_SINGLE_PASS" and value < next_pow2(cols) <= defaults.ROW_SINGLE_LIMIT and launch.path != "single":
            return Pruned(value, False, f"rows of {cols} fit a {next_pow2(cols)}-wide register tile; MAX_SINGLE_PASS={value} "
                                        f"would loop over them, {n_levels + 1} reads instead of 1")
        return None

    def _persistent(self, value: Any, launch: Launch) -> Pruned:
        if launch.path == "split":
            return Pruned(value, False, "split rows launch a fixed grid: persistent does not apply")
        if launch.programs >= launch.tiles:
            return Pruned(value, False, f"{launch.tiles} tiles fit one wave of {launch.programs} persistent programs: no loop, same launch")
        return Pruned(value, True, f"{launch.tiles} tiles over {launch.programs} programs ({launch.tiles / launch.programs:.1f} each): "
                                   "fewer program launches and tails")

    def _pointwise(self, knob: str, value: Any, knobs: PointwiseKnobs, launch: Launch) -> Pruned | None:
        if knob == "erf" and value == "poly":
            if not any(n.op == "erf" for n in self.traced.graph.nodes if n.id in self.traced.graph.live()):
                return Pruned(value, False, f"{self.spec.name} has no erf: the same kernel")
            atol = self.spec.tolerance_for(self.dtype).atol
            if ERF_POLY_FP32 > atol / 10:
                return Pruned(value, False, f"|erf error| <= {ERF_POLY_FP32:g} in fp32 is not well inside atol {atol:g} ({self.dtype})")
            return Pruned(value, True, f"erf by A&S 7.1.26: |error| <= {ERF_POLY_ERROR:g} ({ERF_POLY_FP32:g} evaluated in fp32), "
                                       f"far inside atol {atol:g} ({self.dtype}); one exp, a division and five FMAs "
                                       "instead of libdevice's erff")
        if knob == "persistent" and value:
            return self._persistent(value, launch)
        if knob == "num_stages":
            return Pruned(value, False, "a pointwise tile has no loop (persistent loops carry no prefetchable loads): nothing to pipeline")
        return None

    def _matmul(self, knob: str, value: Any, knobs: MatmulKnobs) -> Pruned:
        m, n, kk = self.mnk()
        bm, bn, bk, group, warps, stages = matmul_tiles(knobs, m, n, self.dtype == "float32")
        if (bm, bn, bk, group, warps, stages) == matmul_tiles(self.base, m, n, self.dtype == "float32") and \
                knobs.autotune == self.base.autotune:
            return Pruned(value, False, f"{knob}={value!r} gives the base's tile {bm}x{bn}x{bk} ({warps} warps, {stages} stages) "
                                        f"at M={m} N={n} K={kk}: nothing to time")
        if any(b % 16 for b in (bm, bn, bk)):
            return Pruned(value, False, f"tile {bm}x{bn}x{bk}: tensor-core MMAs take multiples of 16")
        if bk > next_pow2(kk) and knob == "BLOCK_K":
            return Pruned(value, False, f"BLOCK_K={bk} > K={kk}: most of every step is padding")
        smem = stages * (bm * bk + bk * bn) * self.itemsize
        if smem > SMEM_PER_BLOCK:
            return Pruned(value, False, f"{stages} stages x ({bm}x{bk} + {bk}x{bn}) x {self.itemsize} B = {smem // 1024} KB "
                                        f"of shared memory > {SMEM_PER_BLOCK // 1024} KB per block")
        acc = bm * bn // (32 * warps)
        if acc + REGS_OVERHEAD > REGS_PER_THREAD:
            return Pruned(value, False, f"a {bm}x{bn} fp32 accumulator over {warps} warps is {acc} registers per thread "
                                        f"(+{REGS_OVERHEAD}) > {REGS_PER_THREAD}: spills")
        if knob == "GROUP_SIZE_M" and cdiv(m, bm) <= 1:
            return Pruned(value, False, f"one row block (M={m}, BLOCK_M={bm}): grouping orders nothing")
        programs = cdiv(m, bm) * cdiv(n, bn)
        return Pruned(value, True, f"tile {bm}x{bn}x{bk}, {warps} warps, {stages} stages: {smem // 1024} KB shared memory, "
                                   f"{acc} accumulator registers per thread, {programs} programs on {self.sms} SMs")


def _same_code(a: Knobs, b: Knobs) -> bool:
    """Whether two settings run the same kernel text (a row algorithm counts through the launch's
    path: None and "looped" both loop a 50257-wide row)."""
    if isinstance(a, RowKnobs) and isinstance(b, RowKnobs):
        return (a.eviction, a.persistent, a.autotune) == (b.eviction, b.persistent, b.autotune)
    return code_key(a) == code_key(b) and a.autotune == b.autotune


def _relative(ctx: _Case, knob: str, judged: list[Pruned]) -> list[Pruned]:
    """Values that keep fewer than 2 programs per SM where another kept value reaches more."""
    if ctx.family == "matmul" or knob in ("algorithm", "persistent", "erf", "eviction", "autotune"):
        return judged
    programs = {}
    for p in judged:
        if p.kept:
            knobs = resolve(ctx.family, {**ctx.base.model_dump(), knob: p.value})
            launch = ctx.launch(knobs)
            programs[id(p)] = launch.programs
    if not programs:
        return judged
    target = min(2 * ctx.sms, max(programs.values()))
    out = []
    for p in judged:
        got = programs.get(id(p))
        if got is not None and got < target and p.value != getattr(ctx.base, knob):
            p = Pruned(p.value, False, f"{knob}={p.value!r}: {got} programs on {ctx.sms} SMs (< 2 per SM) where another value "
                                       f"reaches {target}: SMs would idle")
        out.append(p)
    return out
