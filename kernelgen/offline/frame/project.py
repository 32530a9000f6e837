"""The front end's IR seen over the frame: what the pointwise, row and matmul families read.

Every IR value becomes a frame-graph node (kernelgen.offline.frame.graph) that is one value per
element of the output's [rows, cols] frame, one per row, or a scalar -- or is refused, with the
reason, when something uses it. Views that only add or remove size-1 dims are the value itself; a
reduction must run over the last dim (the frame's columns) and becomes sum/max/min over the row; a
variance is expanded into its mean and sum of squared deviations (the pattern the one-pass rows
fold with Welford's rule, kernelgen.offline.rows.fusion); a symbolic size used as a number must
be the row length (`ncols`). A 2-D input read through a transpose is a matmul operand only.

Refusals are lazy: a value nothing uses (max's indices when only the values are read) costs
nothing. The node order follows the IR's, so the kernels' statements follow the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from torch.utils._sympy.functions import ToFloat

from kernelgen.offline.frame.graph import FrameGraph, Node, per_row
from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend import exprs
from kernelgen.offline.frontend.exprs import BINARY, UNARY
from kernelgen.offline.frontend.ir import Graph as IRGraph
from kernelgen.offline.frontend.ir import Value
from kernelgen.offline.unsupported import NotServed, unsupported

RELABELS = ("reshape", "unsqueeze", "squeeze")  # views checked to add or remove size-1 dims only
POINTWISE = set(UNARY) | set(BINARY) | {"where", "cast"}


@dataclass(frozen=True)
class Transposed:
    """A 2-D input seen through a transpose: usable only as a matmul operand."""

    node: int


@dataclass(frozen=True)
class Refusal:
    """A value the frame cannot hold, refused (with `what`) only if something uses it."""

    what: str


@dataclass(frozen=True)
class RowLength:
    """The row length used as a number: an `ncols` node where it is used (a mean's count)."""


# What an IR value stands for: a node id (the common case) or one of the above.
Projected = Union[int, Transposed, Refusal, RowLength]


@dataclass
class Projection:
    graph: FrameGraph
    mm_operands: dict[int, bool] = field(default_factory=dict)  # input index -> read transposed


def project(ir: IRGraph) -> Projection:
    """The frame graph of `ir`, or NotServed naming what the frame families cannot serve."""
    return _Projector(ir).run()


def _frame_last(ir: IRGraph) -> Any:
    """The frame's last dim (symbolic): the inputs' broadcast shape's; None where they do not
    broadcast (a matmul's operands), where no size may be used as a number."""
    shapes = [v.shape for v in ir.values if v.op == "input"]
    try:
        out = S.broadcast(*shapes)
    except ValueError:
        return None
    return out[-1] if out else None


class _Projector:
    def __init__(self, ir: IRGraph):
        self.ir = ir
        self.nodes: list[Node] = []
        self.got: dict[int, Projected] = {}
        self.mm_operands: dict[int, bool] = {}
        self.sums: dict[int, int] = {}  # node -> the node of its sum over the row (one per value)
        self.means: dict[int, int] = {}  # sum node -> the node of that sum / ncols
        self.last = _frame_last(ir)

    def add(self, op: str, args: tuple[int, ...] = (), dtype: str = "float32", **attrs: Any) -> int:
        self.nodes.append(Node(len(self.nodes), op, tuple(args), attrs, dtype=dtype))
        return len(self.nodes) - 1

    def use(self, i: int) -> int:
        """The node of IR value i as an operand (NotServed where it cannot be one)."""
        got = self.got[i]
        if isinstance(got, RowLength):
            return self.add("ncols")
        if isinstance(got, Transposed):
            unsupported("a transposed input used outside a matmul")
        if isinstance(got, Refusal):
            unsupported(got.what)
        return got

    def run(self) -> Projection:
        for v in self.ir.values:
            self.got[v.id] = self.value(v)
        outputs = [self.use(o) for o in self.ir.outputs]
        return Projection(FrameGraph(self.nodes, outputs), self.mm_operands)

    def value(self, v: Value) -> Projected:
        if v.op in ("input", "param", "const"):
            attrs = {"index": v.attrs["index"]} if v.op == "input" else (
                {"name": v.attrs["name"]} if v.op == "param" else {"value": v.attrs["value"]})
            return self.add(v.op, dtype=v.dtype, **attrs)
        if v.op == "size":
            return self.size(v)
        if v.op == "view":
            return self.view(v)
        if v.op == "reduce":
            return self.reduce(v)
        if v.op == "mm":
            return self.matmul(v)
        if v.op in POINTWISE:
            return self.pointwise(v)
        return Refusal(_OTHER.get(v.op, f"the op {v.op}"))

    def size(self, v: Value) -> Projected:
        expr = v.attrs["expr"].replace(ToFloat, lambda x: x)
        if self.last is not None and S.same(expr, self.last):
            return RowLength()
        return Refusal("a literal in the traced graph changes with the input shape (e.g. x.shape[-1] used as a number)")

    def pointwise(self, v: Value) -> Projected:
        refused = self.refused(v.args)
        if refused is not None:
            return refused
        if v.op == "div" and self._is_mean(v):
            return self.means[self.got[v.args[0]]]  # type: ignore[index]
        try:  # an op with no expression for these operands (a negated bool, a cast to a complex type)
            exprs.pointwise(v, ["a"] * len(v.args), [self.ir[a] for a in v.args])
        except NotServed as e:
            return Refusal(e.what)
        node = self.add(v.op, tuple(self.use(a) for a in v.args), v.dtype)
        if v.op == "div" and self.nodes[node].args and self.nodes[self.nodes[node].args[0]].op == "sum" \
                and isinstance(self.got[v.args[1]], RowLength):
            self.means.setdefault(self.nodes[node].args[0], node)
        return node

    def _is_mean(self, v: Value) -> bool:
        """A second sum / ncols of a value whose mean there is already (var_mean's mean)."""
        s = self.got[v.args[0]]
        return isinstance(s, int) and s in self.means and isinstance(self.got[v.args[1]], RowLength)

    def refused(self, args: tuple[int, ...]) -> Refusal | None:
        for a in args:
            got = self.got[a]
            if isinstance(got, Refusal):
                return got
            if isinstance(got, Transposed):
                return Refusal("a transposed input used outside a matmul")
        return None

    def view(self, v: Value) -> Projected:
        kind, src = v.attrs["kind"], v.args[0]
        got = self.got[src]
        if kind == "permute":
            if isinstance(got, Transposed):
                return got.node
            if isinstance(got, int) and self.nodes[got].op == "input" and self.ir[src].rank == 2:
                return Transposed(got)
            return Refusal("a transpose of an intermediate value (only a 2-D input may be transposed, for a matmul)")
        if kind not in RELABELS + ("expand",):
            return Refusal(f"a {kind} of a tensor (the pointwise, row and matmul families read whole inputs)")
        refused = self.refused((src,))
        if refused is not None or kind == "expand":
            return refused or got
        return self.relabel(self.ir[src].shape, v.shape, got)

    def relabel(self, in_shape: tuple, out_shape: tuple, src: Projected) -> Projected:
        """A reshape that only adds or removes size-1 dims is the value itself; so is a keepdim
        toggle of a per-row value ([..., 1] <-> [...])."""
        i, o = _strip_ones(in_shape), _strip_ones(out_shape)
        if S.same_shape(i, o):
            return src
        if (i and S.is_one(i[-1]) and S.same_shape(_strip_ones(i[:-1] or (S.ONE,)), o)) or (
                o and S.is_one(o[-1]) and S.same_shape(_strip_ones(o[:-1] or (S.ONE,)), i)):
            if not isinstance(src, int) or per_row(self.nodes, src) is not False:
                return src
            # an input keeps its own shape's broadcast: A[N].unsqueeze(1) * B (diag(A) @ B) read as A[col]
            return Refusal(f"a reshape from {_dims(in_shape)} to {_dims(out_shape)} of a value that is not one per row "
                           "(an input turned into a column)")
        return Refusal(f"a reshape from {_dims(in_shape)} to {_dims(out_shape)} (only size-1 dimensions may be added or removed)")

    def reduce(self, v: Value) -> Projected:
        kind, x = v.attrs["kind"], v.args[0]
        if kind in ("argmax", "argmin"):
            return Refusal("an index output (argmax/argmin, max(dim).indices)")
        if kind not in ("sum", "max", "min", "var"):
            return Refusal(f"the reduction {kind}")
        refused = self.refused((x,))
        if refused is not None:
            return refused
        rank, dims = self.ir[x].rank, tuple(v.attrs["dims"])
        if rank > 1 and dims == tuple(range(rank)):
            return Refusal("a reduction over all dimensions (only the last dimension is supported offline)")
        if rank > 1 and dims != (rank - 1,):
            return Refusal(f"a reduction over dims {list(dims)} of a rank-{rank} tensor (only the last dimension is "
                           "supported offline)")
        node = self.use(x)
        if kind == "var":
            return self.variance(node, v.attrs.get("correction", 1.0))
        return self.row_sum(node) if kind == "sum" else self.add(kind, (node,))

    def row_sum(self, x: int) -> int:
        if x not in self.sums:
            self.sums[x] = self.add("sum", (x,))
        return self.sums[x]

    def variance(self, x: int, correction: float) -> int:
        """sum((x - mean)^2) / (n - correction), its mean shared with the reference's own (a layer norm's)."""
        total = self.row_sum(x)
        mean = self.means.get(total)
        if mean is None:
            mean = self.means[total] = self.add("div", (total, self.add("ncols")))
        d = self.add("sub", (x, mean))
        ss = self.add("sum", (self.add("square", (d,)),))
        denom = self.add("ncols")
        if correction:
            denom = self.add("sub", (denom, self.add("const", dtype="float32", value=float(correction))))
        return self.add("div", (ss, denom))

    def matmul(self, v: Value) -> Projected:
        ids = []
        for a in v.args:
            got = self.got[a]
            node = got.node if isinstance(got, Transposed) else got
            if not isinstance(node, int) or self.nodes[node].op != "input":
                return Refusal("a matmul whose operands are computed (a prologue): only inputs (or their transposes) "
                               "may be multiplied")
            index = self.nodes[node].attrs["index"]
            if len(next(u for u in self.ir.values if u.op == "input" and u.attrs["index"] == index).shape) != 2:
                return Refusal("a matmul of inputs that are not 2-D")
            self.mm_operands[index] = isinstance(got, Transposed)
            ids.append(node)
        if any(n.op == "mm" for n in self.nodes):
            return Refusal("more than one matmul in the reference")
        return self.add("mm", tuple(ids))


# IR ops the frame families do not serve, and what a refusal calls them
_OTHER = {"full": "a constant tensor (torch.full, zeros_like, ...)", "iota": "an index ramp (triu, tril, a causal mask)",
          "scan": "a scan (cumsum, cumprod)", "gather": "a gather", "cat": "a concatenation", "pad": "a padded copy"}


def _strip_ones(shape: tuple) -> tuple:
    i = 0
    while i < len(shape) - 1 and S.is_one(shape[i]):
        i += 1
    return tuple(shape[i:])


def _dims(shape: tuple) -> list[str]:
    return [str(d) for d in shape]
