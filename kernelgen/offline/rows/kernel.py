"""Kernel text of the row families (row reductions, softmax, layer and RMS norms): one program per
BLOCK_R rows, the whole row in registers when it fits (SINGLE_PASS), else one loop over the row's
column blocks per reduction level, then the write pass (kernelgen.offline.frame.emitter has what it
shares with the pointwise kernels; rows/variants.py the one-read-pass rows)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.frame.emitter import REDUCTIONS, Emitter, accumulator, cone, partial, row_offsets, signature
from kernelgen.offline.frame.graph import FrameGraph
from kernelgen.offline.naming import Names


@dataclass
class RowPass:
    """One loop over the row's column blocks, accumulating the reductions of one level."""

    level: int
    what: str  # "v4 = sum over the row, ..."
    inits: list[str]  # the accumulators, before the loop
    loop: list[str]  # loads, statements and accumulations inside the loop
    after: list[str]  # the reductions of the accumulators, then per-row values now computable


@dataclass
class RowKernel:
    params: list[tuple[str, str]]
    pointers: list[str]
    sizes: list[str]
    prologue: list[str]  # row offsets, per-row loads and values needed before any reduction
    single: list[str]  # SINGLE_PASS: the whole row's statements and stores
    passes: list[RowPass]  # otherwise: one pass per reduction level,
    row_stores: list[str]  # then the per-row outputs,
    final: list[str]  # then a last pass for the per-element outputs (empty: none)


def row_kernel(graph: FrameGraph, roles: list[str], names: Names, params: list[str], out_spaces: list[str],
               eviction: str) -> RowKernel:
    """One program per BLOCK_R rows. SINGLE_PASS: the whole row in registers, read once; otherwise
    one loop over column blocks per reduction level, recomputing the pointwise work from loads."""
    em = Emitter(graph, roles, names, "2d", eviction)
    args, launch, sizes = signature(graph, roles, names, out_spaces, params)
    args += [("BLOCK_R: tl.constexpr", "rows per program"),
             ("BLOCK_C: tl.constexpr", "columns per block (the whole row when SINGLE_PASS)"),
             ("SINGLE_PASS: tl.constexpr", "True: the row fits one block and is read once")]
    prologue, pre_ids = row_prologue(graph, em)
    single = _single_pass(graph, em, names, out_spaces, pre_ids)
    passes, row_stores, final = _looped(graph, em, names, out_spaces, pre_ids)
    return RowKernel(args, launch, sizes, prologue, single, passes, row_stores, final)


def row_prologue(graph: FrameGraph, em: Emitter) -> tuple[list[str], set[int]]:
    """(the lines before any column loop, the ids they compute): row offsets, per-row loads and
    every per-row value computable before any reduction."""
    used = {graph.node(i).attrs["index"] for i in graph.live() if graph.node(i).op == "input"}
    lines = row_offsets(em, used)
    pre = [n for n in graph.nodes if em.emits(n) and n.space in ("row", "scalar") and stage(graph, n.id) == 0]
    lines += [em.load(n) if n.op == "input" else em.statement(n) for n in pre]
    return lines, {n.id for n in pre}


def stage(graph: FrameGraph, i: int, memo: dict | None = None) -> int:
    memo = {} if memo is None else memo
    if i in memo:
        return memo[i]
    n = graph.node(i)
    s = max((stage(graph, a, memo) for a in n.args), default=0)
    if n.op in REDUCTIONS:
        s += 1
    memo[i] = s
    return s


def store(graph: FrameGraph, em: Emitter, names: Names, k: int, oid: int, space: str, cache: str = "",
          row_mask: str = "row_mask[:, None]") -> str:
    """The store of output k; `cache` (".cs") streams a write pass's stores past L2, `row_mask`
    narrows the per-row stores (a split row: its first program only)."""
    name = names.outputs[k]
    n = graph.node(oid)
    val = em.var(n)
    if space == "full":
        if n.space != "full" or partial(graph, oid, em.roles):
            val = f"tl.broadcast_to({val}, [BLOCK_R, BLOCK_C])"
        hint = f', cache_modifier="{cache}"' if cache else ""
        return (f"tl.store({name}_ptr + rows[:, None] * n_cols + cols[None, :], {val}.to({name}_ptr.dtype.element_ty), "
                f"mask=mask{hint})")
    if n.space == "scalar":
        val = f"tl.full([BLOCK_R, 1], {val}, tl.float32)"
    return f"tl.store({name}_ptr + rows[:, None], {val}.to({name}_ptr.dtype.element_ty), mask={row_mask})"


def _single_pass(graph: FrameGraph, em: Emitter, names: Names, out_spaces: list[str], done: set[int]) -> list[str]:
    lines = []
    for n in graph.nodes:
        if em.emits(n) and n.id not in done:
            lines.append(em.load(n) if n.op == "input" else em.statement(n))
    for k, oid in enumerate(graph.outputs):
        lines.append(store(graph, em, names, k, oid, out_spaces[k]))
    return lines


def _looped(graph: FrameGraph, em: Emitter, names: Names, out_spaces: list[str],
            done: set[int]) -> tuple[list[RowPass], list[str], list[str]]:
    """(one pass per reduction level, the per-row stores, the final pass's statements)."""
    memo: dict = {}
    live = graph.live()
    reductions = [n for n in graph.nodes if n.op in REDUCTIONS and n.id in live]
    levels = sorted({stage(graph, n.id, memo) for n in reductions})
    computed = set(done)
    passes: list[RowPass] = []
    for level in levels:
        group = [n for n in reductions if stage(graph, n.id, memo) == level]
        what = ", ".join(f"v{n.id} = {n.op} over the row" for n in group)
        accs = [accumulator(n, em.var(graph.node(n.args[0]))) for n in group]
        inits = [start for start, _, _ in accs]
        loop = full_statements(graph, em, [a for n in group for a in n.args], computed)
        loop += [step for _, step, _ in accs]
        after = [end for _, _, end in accs]
        computed.update(n.id for n in group)
        after += row_values(graph, em, computed, level, memo)
        passes.append(RowPass(level, what, inits, loop, after))
    row_stores, final = write_pass(graph, em, names, out_spaces, computed)
    return passes, row_stores, final


def row_values(graph: FrameGraph, em: Emitter, computed: set[int], level: int, memo: dict) -> list[str]:
    """The per-row values computable once the reductions up to `level` are (added to `computed`)."""
    lines = []
    for n in graph.nodes:
        if em.emits(n) and n.id not in computed and n.space in ("row", "scalar") and stage(graph, n.id, memo) <= level:
            lines.append(em.load(n) if n.op == "input" else em.statement(n))
            computed.add(n.id)
    return lines


def write_pass(graph: FrameGraph, em: Emitter, names: Names, out_spaces: list[str], computed: set[int], cache: bool = False,
               row_mask: str = "row_mask[:, None]") -> tuple[list[str], list[str]]:
    """(the per-row stores, the statements of the last column loop writing the per-element outputs).
    `cache`: that loop's re-read is hinted to stay in L2 (".ca") and its stores to stream (".cs")."""
    full_outs = [(k, oid) for k, oid in enumerate(graph.outputs) if out_spaces[k] == "full"]
    row_stores = [store(graph, em, names, k, oid, "row", row_mask=row_mask)
                  for k, oid in enumerate(graph.outputs) if out_spaces[k] != "full"]
    final = []
    if full_outs:
        final = full_statements(graph, em, [oid for _, oid in full_outs], computed, ".ca" if cache else "")
        final += [store(graph, em, names, k, oid, "full", ".cs" if cache else "") for k, oid in full_outs]
    return row_stores, final


def full_statements(graph: FrameGraph, em: Emitter, roots: list[int], computed: set[int], cache: str = "") -> list[str]:
    """Loads and statements of the per-element values `roots` need, inside a column loop."""
    lines = []
    for i in cone(graph, roots, {"row", "scalar"}):
        n = graph.node(i)
        if em.emits(n) and i not in computed and n.space == "full":
            lines.append(em.load(n, cache) if n.op == "input" else em.statement(n))
    return lines
