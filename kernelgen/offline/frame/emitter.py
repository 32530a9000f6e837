"""What the pointwise and row kernels share: the Emitter that names and loads values, the kernels'
arguments, and the spaces every value of the frame graph lives in.

Both work on the same frame: the broadcast output shape collapsed by the wrapper to
[n_outer, n_inner, n_cols]; a program owns a [BLOCK_R, BLOCK_C] tile of (row, column) where
row = outer * n_inner + inner, so broadcast inputs are addressed through their strides (0 where
broadcast) with one div/mod per row, never per element. Inputs whose shape is a column vector
(`col`, e.g. a bias) or a row vector (`row`, e.g. a per-row gate) load a 1-D slice once per tile.
"""

from __future__ import annotations

from kernelgen.offline.frame.graph import SPACE_RANK, FrameGraph, Node
from kernelgen.offline.frontend import exprs
from kernelgen.offline.frontend.reductions import Reduction, reductions_of
from kernelgen.offline.naming import Names
from kernelgen.offline.unsupported import unsupported

# the reductions of a frame graph (its node op is the kind: kernelgen.offline.frame.project lowers a
# var into sums), rows of the one reduction table
REDUCTIONS: dict[str, Reduction] = reductions_of("sum", "max", "min")


def assign_spaces(graph: FrameGraph, roles: list[str]) -> None:
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
    def __init__(self, graph: FrameGraph, roles: list[str], names: Names, mode: str, eviction: str, erf: str = "libdevice"):
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
            row = REDUCTIONS[n.op]
            src = self.var(self.g.node(n.args[0]))
            masked = f"tl.where(mask, {src}, {row.fill('tl.float32')})"
            return f"v{n.id} = {row.reduced(masked, 'axis=1')}[:, None]  # {n.op} over the row"
        args = [self.g.node(a) for a in n.args]
        if n.op == "erf" and self.erf == "poly":
            return f"v{n.id} = _erf_poly({self.var(args[0])})  # |error| <= 1.5e-7 (Abramowitz-Stegun 7.1.26)"
        return f"v{n.id} = {exprs.pointwise(n, [self.var(a) for a in args], args)}"

    def emits(self, n: Node) -> bool:
        return n.id in self.live and n.op not in ("param", "const", "ncols")


def cone(graph: FrameGraph, roots: list[int], stop: set[str]) -> list[int]:
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


def signature(graph: FrameGraph, roles: list[str], names: Names, outputs_space: list[str], params: list[str],
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


def partial(graph: FrameGraph, oid: int, roles: list[str]) -> bool:
    """True when a full-space value is built only from col/row inputs, so is not yet a whole tile."""
    ids = cone(graph, [oid], set())
    kinds = {roles[graph.node(i).attrs["index"]] for i in ids if graph.node(i).op == "input"}
    return not ("full" in kinds or {"col", "row"} <= kinds)


def accumulator(n: Node, src: str) -> tuple[str, str, str]:
    """A row reduction looped over column blocks: (its fp32 [BLOCK_R, BLOCK_C] accumulator's start,
    one step over the block's masked `src`, the row's value at the end)."""
    row = REDUCTIONS[n.op]
    neutral = row.fill("tl.float32")
    start = "tl.zeros([BLOCK_R, BLOCK_C], tl.float32)" if row.identity == 0 else \
        f"tl.full([BLOCK_R, BLOCK_C], {neutral}, tl.float32)"
    masked = f"tl.where(mask, {src}, {neutral})"
    infix = row.pairwise.split()  # "{a} + {b}": accumulated in place
    step = f"acc{n.id} {infix[1]}= {masked}" if infix[0] == "{a}" else f"acc{n.id} = {row.pairwise.format(a=f'acc{n.id}', b=masked)}"
    return f"acc{n.id} = {start}", step, f"v{n.id} = {row.reduced(f'acc{n.id}', 'axis=1')}[:, None]  # {n.op} over the row"
