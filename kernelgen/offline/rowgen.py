"""Kernel text for the pointwise and row-program families (everything but matmul).

Both work on the same frame: the broadcast output shape collapsed by the wrapper to
[n_outer, n_inner, n_cols]; a program owns a [BLOCK_R, BLOCK_C] tile of (row, column) where
row = outer * n_inner + inner, so broadcast inputs are addressed through their strides (0 where
broadcast) with one div/mod per row, never per element. Inputs whose shape is a column vector
(`col`, e.g. a bias) or a row vector (`row`, e.g. a per-row gate) load a 1-D slice once per tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline import exprs
from kernelgen.offline.knobs import PointwiseKnobs
from kernelgen.offline.ir import SPACE_RANK, Graph, Node
from kernelgen.offline.naming import Names
from kernelgen.offline.unsupported import unsupported

REDUCTIONS = {"sum": ("tl.sum", "0.0"), "max": ("tl.max", '-float("inf")'), "min": ("tl.min", 'float("inf")')}


@dataclass
class PointwiseKernel:
    params: list[tuple[str, str]]  # (argument, comment)
    pointers: list[str]  # the launch's first arguments: the wrapper's tensors and scalar params
    sizes: list[str]  # the rest, from the wrapper's plan: the frame's sizes and strides
    body: list[str]  # after the program's index arithmetic: row offsets, loads, statements, stores


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


def assign_spaces(graph: Graph, roles: list[str]) -> None:
    for n in graph.nodes:
        if n.op == "input":
            role = roles[n.attrs["index"]]
            n.space = {"full": "full", "col": "full", "row": "row", "scalar": "scalar"}[role]
        elif n.op in ("param", "const", "ncols"):
            n.space = "scalar"
        elif n.op in REDUCTIONS:
            if graph.node(n.args[0]).space != "full":
                unsupported("a reduction of a value that is already one per row")
            n.space = "row"
        else:
            n.space = max((graph.node(a).space for a in n.args), key=SPACE_RANK.__getitem__, default="scalar")


class Emitter:
    def __init__(self, graph: Graph, roles: list[str], names: Names, mode: str, eviction: str, erf: str = "libdevice"):
        self.g = graph
        self.roles = roles
        self.names = names
        self.mode = mode  # "2d" tiles or "1d" flat
        self.evict = f', eviction_policy="{eviction}"' if eviction != "none" else ""
        self.erf = erf  # "poly": erf through the file's _erf_poly helper
        self.live = graph.live()

    def var(self, n: Node) -> str:
        if n.op == "input":
            return self.names.values[n.attrs["index"]]
        if n.op == "param":
            return n.attrs["name"]
        if n.op == "const":
            return exprs.literal(n.attrs["value"])
        if n.op == "ncols":
            return "n_cols"
        return f"v{n.id}"

    def _suffix(self, kind: str) -> str:
        if self.mode == "1d":
            return ""
        return {"col": "[None, :]", "row": "[:, None]"}[kind]

    def load(self, n: Node, cache: str = "") -> str:
        """The load of an input; `cache` (".ca") hints the full-size loads of a re-read row."""
        i = n.attrs["index"]
        name = self.names.inputs[i]
        val = self.names.values[i]
        role = self.roles[i]
        up = ".to(tl.float32)" if n.is_float else ""
        if role == "scalar":
            return f"{val} = tl.load({name}_ptr){up}"
        if role == "col":
            m = "col_mask" if self.mode == "2d" else "mask"
            return f"{val} = tl.load({name}_ptr + cols * stride_{name}_col, mask={m}){self._suffix('col')}{up}"
        if role == "row":
            m = "row_mask" if self.mode == "2d" else "mask"
            return f"{val} = tl.load({name}_ptr + {name}_row, mask={m}){self._suffix('row')}{up}"
        offs = f"{name}_row[:, None] + cols[None, :] * stride_{name}_col" if self.mode == "2d" else \
            f"{name}_row + cols * stride_{name}_col"
        hint = f', cache_modifier="{cache}"' if cache else self.evict
        return f"{val} = tl.load({name}_ptr + {offs}, mask=mask{hint}){up}"

    def statement(self, n: Node) -> str:
        if n.op in REDUCTIONS:
            fn, neutral = REDUCTIONS[n.op]
            src = self.var(self.g.node(n.args[0]))
            return f"v{n.id} = {fn}(tl.where(mask, {src}, {neutral}), axis=1)[:, None]  # {n.op} over the row"
        args = [self.g.node(a) for a in n.args]
        if n.op == "erf" and self.erf == "poly":
            return f"v{n.id} = _erf_poly({self.var(args[0])})  # |error| <= 1.5e-7 (Abramowitz-Stegun 7.1.26)"
        return f"v{n.id} = {exprs.pointwise(n, [self.var(a) for a in args], args)}"

    def emits(self, n: Node) -> bool:
        return n.id in self.live and n.op not in ("param", "const", "ncols")


def cone(graph: Graph, roots: list[int], stop: set[str]) -> list[int]:
    """Ids needed to compute `roots`, stopping at nodes whose space is in `stop` (already computed)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        n = graph.node(i)
        if n.space in stop and i not in roots:
            continue
        seen.add(i)
        stack.extend(n.args)
    return sorted(seen)


def signature(graph: Graph, roles: list[str], names: Names, outputs_space: list[str], params: list[str],
              scratch: bool = False) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(the kernel's arguments with comments, the launch's tensor and param arguments, the launch's
    size arguments as the wrapper's plan computes them). `scratch`: a split row's partials buffer."""
    args: list[tuple[str, str]] = []
    launch: list[str] = []
    used_inputs = {graph.node(i).attrs["index"] for i in graph.live() if graph.node(i).op == "input"}
    for i, name in enumerate(names.inputs):
        role = roles[i]
        if i not in used_inputs:
            continue
        what = {"full": "one value per element (strided, 0 where broadcast)", "col": "one value per column",
                "row": "one value per row", "scalar": "a single value"}[role]
        args.append((f"{name}_ptr", f"input {name}: {what}"))
        launch.append(name)
    for k, name in enumerate(names.outputs):
        what = "one value per element, contiguous" if outputs_space[k] == "full" else "one value per row, contiguous"
        args.append((f"{name}_ptr", f"output {name}: {what}"))
        launch.append(name)
    if scratch:
        args.append(("partials_ptr", "fp32 scratch: each program's partial statistics of its part of a row"))
        launch.append("partials")
    for p in params:
        args.append((p, f"scalar param {p}"))
        launch.append(p)
    args += [("n_rows", "rows of the frame: the product of all leading dims"),
             ("n_inner", "rows split as outer * n_inner + inner, for the strides below"),
             ("n_cols", "length of the last (contiguous-most) dim of the frame")]
    sizes = ["n_rows", "n_inner", "n_cols"]
    for i, name in enumerate(names.inputs):
        if i not in used_inputs:
            continue
        role = roles[i]
        if role in ("full", "row"):
            args.append((f"stride_{name}_outer", f"{name}: element strides over outer, inner"))
            args.append((f"stride_{name}_inner", ""))
            sizes += [f"strides[{i}][0]", f"strides[{i}][1]"]
        if role in ("full", "col"):
            args.append((f"stride_{name}_col", f"{name}: element stride along the columns"))
            sizes.append(f"strides[{i}][2]")
    return args, launch, sizes


def row_offsets(emitter: Emitter, used: set[int]) -> list[str]:
    lines = []
    needs = [i for i in sorted(used) if emitter.roles[i] in ("full", "row")]
    if needs:
        lines.append("outer = rows // n_inner  # one div/mod per row, not per element")
        lines.append("inner = rows % n_inner")
        for i in needs:
            name = emitter.names.inputs[i]
            lines.append(f"{name}_row = outer * stride_{name}_outer + inner * stride_{name}_inner")
    return lines


def pointwise_kernel(graph: Graph, roles: list[str], names: Names, params: list[str],
                     knobs: PointwiseKnobs) -> PointwiseKernel:
    """The per-tile statements after the program's index arithmetic (which the template writes)."""
    mode = knobs.grid
    em = Emitter(graph, roles, names, mode, knobs.eviction, knobs.erf)
    args, launch, sizes = signature(graph, roles, names, ["full"] * len(graph.outputs), params)
    size_knobs = [("BLOCK_R", "rows per program"), ("BLOCK_C", "columns per program")] if mode == "2d" \
        else [("BLOCK_SIZE", "elements per program")]
    args += [(f"{k}: tl.constexpr", c) for k, c in size_knobs]
    used = {graph.node(i).attrs["index"] for i in graph.live() if graph.node(i).op == "input"}
    body = row_offsets(em, used)
    for n in graph.nodes:
        if not em.emits(n):
            continue
        if n.op == "input":
            body.append(em.load(n))
        else:
            if n.op in REDUCTIONS:
                unsupported("a reduction in a pointwise kernel")
            body.append(em.statement(n))
    offs = "rows[:, None] * n_cols + cols[None, :]" if mode == "2d" else "offs"
    full = "[BLOCK_R, BLOCK_C]" if mode == "2d" else "[BLOCK_SIZE]"
    for k, oid in enumerate(graph.outputs):
        n = graph.node(oid)
        val = em.var(n)
        if n.space == "scalar":
            val = f"(tl.zeros({full}, tl.float32) + {val})"
        elif mode == "2d" and _partial(graph, oid, roles):
            val = f"tl.broadcast_to({val}, {full})"
        name = names.outputs[k]
        body.append(f"tl.store({name}_ptr + {offs}, {val}.to({name}_ptr.dtype.element_ty), mask=mask)")
    return PointwiseKernel(args, launch, sizes, body)


def _partial(graph: Graph, oid: int, roles: list[str]) -> bool:
    """True when a full-space value is built only from col/row inputs, so is not yet a whole tile."""
    ids = cone(graph, [oid], set())
    kinds = {roles[graph.node(i).attrs["index"]] for i in ids if graph.node(i).op == "input"}
    return not ("full" in kinds or {"col", "row"} <= kinds)


def row_kernel(graph: Graph, roles: list[str], names: Names, params: list[str], out_spaces: list[str],
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


def row_prologue(graph: Graph, em: Emitter) -> tuple[list[str], set[int]]:
    """(the lines before any column loop, the ids they compute): row offsets, per-row loads and
    every per-row value computable before any reduction."""
    used = {graph.node(i).attrs["index"] for i in graph.live() if graph.node(i).op == "input"}
    lines = row_offsets(em, used)
    pre = [n for n in graph.nodes if em.emits(n) and n.space in ("row", "scalar") and stage(graph, n.id) == 0]
    lines += [em.load(n) if n.op == "input" else em.statement(n) for n in pre]
    return lines, {n.id for n in pre}


def stage(graph: Graph, i: int, memo: dict | None = None) -> int:
    memo = {} if memo is None else memo
    if i in memo:
        return memo[i]
    n = graph.node(i)
    s = max((stage(graph, a, memo) for a in n.args), default=0)
    if n.op in REDUCTIONS:
        s += 1
    memo[i] = s
    return s


def store(graph: Graph, em: Emitter, names: Names, k: int, oid: int, space: str, cache: str = "",
          row_mask: str = "row_mask[:, None]") -> str:
    """The store of output k; `cache` (".cs") streams a write pass's stores past L2, `row_mask`
    narrows the per-row stores (a split row: its first program only)."""
    name = names.outputs[k]
    n = graph.node(oid)
    val = em.var(n)
    if space == "full":
        if n.space != "full" or _partial(graph, oid, em.roles):
            val = f"tl.broadcast_to({val}, [BLOCK_R, BLOCK_C])"
        hint = f', cache_modifier="{cache}"' if cache else ""
        return (f"tl.store({name}_ptr + rows[:, None] * n_cols + cols[None, :], {val}.to({name}_ptr.dtype.element_ty), "
                f"mask=mask{hint})")
    if n.space == "scalar":
        val = f"tl.full([BLOCK_R, 1], {val}, tl.float32)"
    return f"tl.store({name}_ptr + rows[:, None], {val}.to({name}_ptr.dtype.element_ty), mask={row_mask})"


def _single_pass(graph: Graph, em: Emitter, names: Names, out_spaces: list[str], done: set[int]) -> list[str]:
    lines = []
    for n in graph.nodes:
        if em.emits(n) and n.id not in done:
            lines.append(em.load(n) if n.op == "input" else em.statement(n))
    for k, oid in enumerate(graph.outputs):
        lines.append(store(graph, em, names, k, oid, out_spaces[k]))
    return lines


def _looped(graph: Graph, em: Emitter, names: Names, out_spaces: list[str],
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
        inits = []
        for n in group:
            neutral = REDUCTIONS[n.op][1]
            inits.append(f"acc{n.id} = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)" if n.op == "sum" else
                         f"acc{n.id} = tl.full([BLOCK_R, BLOCK_C], {neutral}, tl.float32)")
        loop = full_statements(graph, em, [a for n in group for a in n.args], computed)
        for n in group:
            src = em.var(graph.node(n.args[0]))
            neutral = REDUCTIONS[n.op][1]
            if n.op == "sum":
                loop.append(f"acc{n.id} += tl.where(mask, {src}, 0.0)")
            else:
                fn = "tl.maximum" if n.op == "max" else "tl.minimum"
                loop.append(f"acc{n.id} = {fn}(acc{n.id}, tl.where(mask, {src}, {neutral}))")
        after = []
        for n in group:
            after.append(f"v{n.id} = {REDUCTIONS[n.op][0]}(acc{n.id}, axis=1)[:, None]  # {n.op} over the row")
            computed.add(n.id)
        after += row_values(graph, em, computed, level, memo)
        passes.append(RowPass(level, what, inits, loop, after))
    row_stores, final = write_pass(graph, em, names, out_spaces, computed)
    return passes, row_stores, final


def row_values(graph: Graph, em: Emitter, computed: set[int], level: int, memo: dict) -> list[str]:
    """The per-row values computable once the reductions up to `level` are (added to `computed`)."""
    lines = []
    for n in graph.nodes:
        if em.emits(n) and n.id not in computed and n.space in ("row", "scalar") and stage(graph, n.id, memo) <= level:
            lines.append(em.load(n) if n.op == "input" else em.statement(n))
            computed.add(n.id)
    return lines


def write_pass(graph: Graph, em: Emitter, names: Names, out_spaces: list[str], computed: set[int], cache: bool = False,
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


def full_statements(graph: Graph, em: Emitter, roots: list[int], computed: set[int], cache: str = "") -> list[str]:
    """Loads and statements of the per-element values `roots` need, inside a column loop."""
    lines = []
    for i in cone(graph, roots, {"row", "scalar"}):
        n = graph.node(i)
        if em.emits(n) and i not in computed and n.space == "full":
            lines.append(em.load(n, cache) if n.op == "input" else em.statement(n))
    return lines
