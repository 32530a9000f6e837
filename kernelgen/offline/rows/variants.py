"""Kernel text for the one-read-pass rows: `online` (a program per row block, one statistics pass and
one write pass) and `split` (a row over several programs: partial statistics, then a second launch
combining them and writing). Which reductions allow it, and the arithmetic, in kernelgen.offline.rows.fusion.

Reads per element of a 50257-wide log_softmax row: looped 3 (max, sum, write pass) + 1 write;
online 1 + a write pass whose re-read of the row (400 KB in fp32 per row, ~130 rows in flight on
an H200: ~50 MB) mostly hits L2, so ~1 read from HBM + 1 write.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.rows.fusion import Fusion, fuse
from kernelgen.offline.frame.graph import FrameGraph
from kernelgen.offline.naming import Names
from kernelgen.offline.frame.emitter import REDUCTIONS, Emitter, accumulator, signature
from kernelgen.offline.rows.kernel import full_statements, row_prologue, row_values, write_pass

NEG_INF = '-float("inf")'


@dataclass
class StatsPass:
    """One read pass computing every statistic of (a part of) a row."""

    what: str  # the comment above the loop
    inits: list[str]  # before the loop: running states
    loop: list[str]  # inside the loop over column blocks (cols, mask and `start` defined)
    after: list[str]  # after it: every statistic per row (lanes merged)
    values: list[str]  # then the reductions' values the statistics give (v3 = mean * n)


@dataclass
class OnlineKernel:
    params: list[tuple[str, str]]
    pointers: list[str]
    sizes: list[str]
    prologue: list[str]
    stats: StatsPass
    after: list[str]  # the per-row values the statistics make computable
    row_stores: list[str]
    final: list[str]  # the write pass (empty: no per-element output)


@dataclass
class SplitKernels:
    params: list[tuple[str, str]]  # both launches take the same arguments
    pointers: list[str]
    sizes: list[str]
    prologue: list[str]
    stats: StatsPass  # stage 1: over the program's chunk of the row
    partial_stores: list[str]  # stage 1: its statistics into the scratch buffer
    combine: list[str]  # stage 2: every chunk's statistics of the row, merged
    after: list[str]
    row_stores: list[str]  # by the row's first program only
    final: list[str]  # the write pass over the program's chunk


def _stats_pass(g: FrameGraph, em: Emitter, fusion: Fusion, computed: set[int], total: str) -> StatsPass:
    """The fused statistics loop; `total` is the number of columns the loop covers."""
    roots = [n.args[0] for n in fusion.plain] + [m.args[0] for m in fusion.maxes] + [s1.args[0] for s1 in fusion.means]
    inits: list[str] = []
    loop = full_statements(g, em, roots, computed)
    after: list[str] = []
    for n in fusion.plain:
        start, step, end = accumulator(n, em.var(g.node(n.args[0])))
        inits.append(start)
        loop.append(step)
        after.append(end)
    for m in fusion.maxes:
        b = em.var(g.node(m.args[0]))
        sums = [s for mm, s in fusion.softmax if mm.id == m.id]
        inits.append(f"m{m.id} = tl.full([BLOCK_R, 1], {NEG_INF}, tl.float32)  # running max of the row")
        inits += [f"acc{s.id} = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)  # per lane: sum of exp(x - running max)"
                  for s in sums]
        loop.append(f"m_new = tl.maximum(m{m.id}, tl.max(tl.where(mask, {b}, {NEG_INF}), axis=1)[:, None])")
        loop.append(f"alpha = tl.exp(m{m.id} - m_new)  # rescales the sums kept so far to the new max")
        loop += [f"acc{s.id} = acc{s.id} * alpha + tl.where(mask, tl.exp({b} - m_new), 0.0)" for s in sums]
        loop.append(f"m{m.id} = m_new")
        after.append(f"v{m.id} = m{m.id}  # max over the row")
        after += [f"v{s.id} = tl.sum(acc{s.id}, axis=1)[:, None]  # sum of exp(x - max) over the row" for s in sums]
    if fusion.means:
        loop.append("inv = 1.0 / (start // BLOCK_C + 1)  # this block holds every valid lane's (k+1)-th value")
        after.append("lanes = tl.arange(0, BLOCK_C)[None, :]")
        after.append(f"cnt = ((tl.maximum({total} - lanes, 0) + BLOCK_C - 1) // BLOCK_C).to(tl.float32)  # values per lane")
    for s1 in fusion.means:
        a = em.var(g.node(s1.args[0]))
        inits.append(f"mean{s1.id} = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)  # Welford, per lane: running mean")
        inits.append(f"m2{s1.id} = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)  # and sum of squared deviations")
        loop.append(f"delta = tl.where(mask, {a} - mean{s1.id}, 0.0)")
        loop.append(f"mean{s1.id} += delta * inv")
        loop.append(f"m2{s1.id} += delta * tl.where(mask, {a} - mean{s1.id}, 0.0)")
        after.append(f"rmean{s1.id} = tl.sum(mean{s1.id} * cnt, axis=1)[:, None] / {total}  # lanes merged (Chan et al.)")
        after.append(f"dev{s1.id} = mean{s1.id} - rmean{s1.id}")
        after.append(f"rm2{s1.id} = tl.sum(m2{s1.id} + cnt * dev{s1.id} * dev{s1.id}, axis=1)[:, None]")
    values = []  # the Welford pairs' sums, from the merged means (online only: split stores the means)
    for s1, s2 in fusion.welford:
        values.append(f"v{s1.id} = rmean{s1.id} * {total}  # sum over the row")
        values.append(f"v{s2.id} = rm2{s1.id}  # sum of squared deviations from the mean")
    for n in fusion.plain + fusion.maxes + [s for _, s in fusion.softmax] + [p for pair in fusion.welford for p in pair]:
        computed.add(n.id)
    parts = [f"v{n.id} = {n.op}" for n in fusion.plain] + [f"v{m.id} = max" for m in fusion.maxes]
    parts += [f"v{s.id} = sum of exp(x - max), rescaled as the max grows" for _, s in fusion.softmax]
    parts += [f"v{s1.id}, v{s2.id} = sum and squared deviations (Welford)" for s1, s2 in fusion.welford]
    return StatsPass(", ".join(parts), inits, loop, after, values)


def online_kernel(graph: FrameGraph, roles: list[str], names: Names, params: list[str], out_spaces: list[str],
                  eviction: str) -> OnlineKernel:
    """A program per BLOCK_R rows: one read pass for every statistic, then the write pass."""
    fusion = fuse(graph)
    em = Emitter(graph, roles, names, "2d", eviction)
    args, pointers, sizes = signature(graph, roles, names, out_spaces, params)
    args += [("BLOCK_R: tl.constexpr", "rows per program"), ("BLOCK_C: tl.constexpr", "columns per step of the loops")]
    prologue, computed = row_prologue(graph, em)
    stats = _stats_pass(graph, em, fusion, computed, "n_cols")
    after = stats.values + row_values(graph, em, computed, 2, {})
    row_stores, final = write_pass(graph, em, names, out_spaces, computed, cache=True)
    return OnlineKernel(args, pointers, sizes, prologue, stats, after, row_stores, final)


def split_kernels(graph: FrameGraph, roles: list[str], names: Names, params: list[str], out_spaces: list[str],
                  eviction: str) -> SplitKernels:
    """Stage 1: a program per (row block, chunk of columns) writes its chunk's statistics; stage 2:
    the same grid merges every chunk's statistics of its rows and writes its chunk of the output."""
    fusion = fuse(graph)
    em = Emitter(graph, roles, names, "2d", eviction)
    args, pointers, sizes = signature(graph, roles, names, out_spaces, params, scratch=True)
    sizes = sizes + ["n_chunks", "chunk_cols"]
    args += [("n_chunks", "programs per row block: the row's chunks"),
             ("chunk_cols", "columns per chunk, a multiple of BLOCK_C"),
             ("BLOCK_R: tl.constexpr", "rows per program"), ("BLOCK_C: tl.constexpr", "columns per step of the loops"),
             ("CHUNKS: tl.constexpr", "n_chunks rounded up to a power of two (stage 2 loads them at once)")]
    prologue, computed = row_prologue(graph, em)
    stats = _stats_pass(graph, em, fusion, set(computed), "(hi - lo)")
    stat_values = partial_stats(fusion)
    n = len(stat_values)
    partial_stores = [f"tl.store(partials_ptr + part[:, None] + {k}, {val}, mask=row_mask[:, None])  # {what}"
                      for k, (val, what, _) in enumerate(stat_values)]
    partial_stores.insert(0, f"part = (rows * n_chunks + chunk) * {n}  # {n} statistics per (row, chunk)")
    combine = ["chunk_ids = tl.arange(0, CHUNKS)",
               "c_mask = row_mask[:, None] & (chunk_ids[None, :] < n_chunks)",
               f"c_part = (rows[:, None] * n_chunks + chunk_ids[None, :]) * {n}"]
    for k, (_, what, other) in enumerate(stat_values):
        combine.append(f"p{k} = tl.load(partials_ptr + c_part + {k}, mask=c_mask, other={other})  # {what}")
    combine += _merge(fusion, stat_values)
    for node in fusion.plain + fusion.maxes + [s for _, s in fusion.softmax] + [p for pair in fusion.welford for p in pair]:
        computed.add(node.id)
    after = row_values(graph, em, computed, 2, {})
    if any(space != "full" for space in out_spaces):  # per-row outputs: written by the row's first chunk
        # (the scalar test broadcast to a block first: Triton 3.9's interpreter refuses a scalar in a mask)
        after.append("first_chunk = row_mask[:, None] & (tl.zeros([BLOCK_R, 1], tl.int32) + chunk == 0)")
    row_stores, final = write_pass(graph, em, names, out_spaces, computed, cache=True,
                                   row_mask="first_chunk")
    return SplitKernels(args, pointers, sizes, prologue, stats, partial_stores, combine, after, row_stores, final)


def partial_stats(fusion: Fusion) -> list[tuple[str, str, str]]:
    """(value in stage 1, what it is, the neutral stage 2 loads for a missing chunk) per statistic."""
    out = [(f"v{n.id}", f"{n.op} over the chunk", REDUCTIONS[n.op].fill("tl.float32")) for n in fusion.plain]
    out += [(f"v{m.id}", "the chunk's max", NEG_INF) for m in fusion.maxes]
    out += [(f"v{s.id}", "the chunk's sum of exp(x - its max)", "0.0") for _, s in fusion.softmax]
    for s1 in fusion.means:
        out += [(f"rmean{s1.id}", "the chunk's mean", "0.0"), (f"rm2{s1.id}", "its squared deviations", "0.0")]
    return out


def _merge(fusion: Fusion, stats: list[tuple[str, str, str]]) -> list[str]:
    """Stage 2: the row's statistics from its chunks' (p0, p1, ...: [BLOCK_R, CHUNKS] each)."""
    index = {val: k for k, (val, _, _) in enumerate(stats)}
    lines = []
    for n in fusion.plain:
        partials = f"p{index[f'v{n.id}']}"
        lines.append(f"v{n.id} = {REDUCTIONS[n.op].reduced(partials, 'axis=1')}[:, None]  # {n.op} over the row")
    for m in fusion.maxes:
        pm = f"p{index[f'v{m.id}']}"
        lines.append(f"v{m.id} = tl.max({pm}, axis=1)[:, None]  # max over the row")
        for mm, s in fusion.softmax:
            if mm.id == m.id:
                lines.append(f"v{s.id} = tl.sum(p{index[f'v{s.id}']} * tl.exp({pm} - v{m.id}), axis=1)[:, None]"
                             "  # each chunk's sum rescaled to the row's max")
    if fusion.means:
        lines.append("cnt = tl.minimum(tl.maximum(n_cols - chunk_ids[None, :] * chunk_cols, 0), chunk_cols).to(tl.float32)")
    for s1 in fusion.means:
        pmean, pm2 = f"p{index[f'rmean{s1.id}']}", f"p{index[f'rm2{s1.id}']}"
        lines.append(f"rmean{s1.id} = tl.sum({pmean} * cnt, axis=1)[:, None] / n_cols  # chunks merged (Chan et al.)")
        lines.append(f"dev{s1.id} = {pmean} - rmean{s1.id}")
        lines.append(f"rm2{s1.id} = tl.sum({pm2} + cnt * dev{s1.id} * dev{s1.id}, axis=1)[:, None]")
    for s1, s2 in fusion.welford:
        lines.append(f"v{s1.id} = rmean{s1.id} * n_cols  # sum over the row")
        lines.append(f"v{s2.id} = rm2{s1.id}  # sum of squared deviations from the mean")
    return lines
