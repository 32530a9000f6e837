"""Lower one `make_fx` trace of a reference to the offline IR (kernelgen.offline.frame.graph).

Composite activations arrive already decomposed into primitive pointwise ops (the decomposition
table below); composite reductions (softmax, log_softmax, layer_norm, var, mean) are expanded here
into sum/max/min over the last dimension plus pointwise ops, with the row length as a symbol
(`ncols`) rather than a baked number. A Python number equal to a param's sentinel becomes that
param. Anything outside the families is refused with `unsupported` (an LLM is needed).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Union

import torch

from kernelgen.offline.frame.graph import Graph, Node, per_row
from kernelgen.offline.unsupported import unsupported
from kernelgen.spec import FLOAT_DTYPES

# Composite ops PyTorch already knows how to decompose into pointwise primitives.
DECOMPOSE = [
    torch.ops.aten.gelu, torch.ops.aten.silu, torch.ops.aten.leaky_relu, torch.ops.aten.hardswish,
    torch.ops.aten.hardsigmoid, torch.ops.aten.elu, torch.ops.aten.celu, torch.ops.aten.selu,
    torch.ops.aten.softplus, torch.ops.aten.mish, torch.ops.aten.hardtanh, torch.ops.aten.relu6,
    torch.ops.aten.threshold, torch.ops.aten.addmm, torch.ops.aten.logit, torch.ops.aten.sgn,
    torch.ops.aten.xlogy, torch.ops.aten.hardshrink, torch.ops.aten.softshrink, torch.ops.aten.lerp,
    torch.ops.aten.addcmul, torch.ops.aten.addcdiv, torch.ops.aten.glu, torch.ops.aten.log_sigmoid_forward,
    torch.ops.aten.frac, torch.ops.aten.linear,
]

UNARY = {
    "neg": "neg", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log1p": "log1p",
    "expm1": "expm1", "sqrt": "sqrt", "rsqrt": "rsqrt", "sigmoid": "sigmoid", "tanh": "tanh",
    "erf": "erf", "sin": "sin", "cos": "cos", "abs": "abs", "reciprocal": "reciprocal",
    "relu": "relu", "floor": "floor", "ceil": "ceil", "trunc": "trunc", "sign": "sign",
    "logical_not": "logical_not", "bitwise_not": "bitwise_not", "square": "square",
}
BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div",
    "maximum": "maximum", "minimum": "minimum", "fmax": "maximum", "fmin": "minimum",
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "pow": "pow", "rsub": "rsub",
}
IDENTITY = {"clone", "alias", "detach", "lift_fresh_copy", "contiguous", "expand", "_unsafe_view",
            "view", "reshape", "unsqueeze", "squeeze", "broadcast_in_dim", "view_of"}
RESHAPES = {"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "broadcast_in_dim"}
TRANSPOSES = {"t", "transpose", "permute", "numpy_T"}
CASTS = {"_to_copy", "convert_element_type", "to", "type_as"}
REDUCTION_OPS = {"sum", "amax", "amin", "mean", "max", "min", "var", "var_mean", "std", "_softmax",
                 "_log_softmax", "softmax", "log_softmax", "native_layer_norm", "prod", "logsumexp"}


# --- what an fx value stands for while lowering ----------------------------------------------------
@dataclass(frozen=True)
class Transposed:
    """A 2-D input seen through .t()/.transpose()/.permute(): usable only as a matmul operand."""

    node: int


@dataclass(frozen=True)
class IndexResult:
    """The indices half of max(dim)/min(dim): refused only if the reference actually uses it."""


@dataclass(frozen=True)
class MultiResult:
    """An op with several results (var_mean, native_layer_norm, max.dim), read through getitem."""

    results: tuple[int | IndexResult, ...]


# A node id (the common case) or one of the wrappers above.
Value = Union[int, Transposed, IndexResult, MultiResult]


@dataclass
class Lowered:
    graph: Graph
    input_shapes: list[tuple[int, ...]]
    mm_operands: dict[int, bool] = field(default_factory=dict)  # input index -> transposed


def _key(target: Any) -> tuple[str, str, str]:
    """(namespace, base name without in-place underscore, overload) of an OpOverload."""
    schema = target._schema.name  # e.g. "aten::add_"
    ns, base = schema.split("::")
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]
    return ns, base, target._overloadname


def shape_of(fx_node: Any) -> tuple[int, ...] | None:
    val = fx_node.meta.get("val") if hasattr(fx_node, "meta") else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _dtype(fx_node: Any) -> str:
    val = fx_node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return str(val.dtype).replace("torch.", "")
    return "float32"


def strip_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) - 1 and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def lower(gm: Any, sentinels: dict[str, Any]) -> Lowered:
    """The IR of one traced graph module; `sentinels` maps each param to the value it was traced with."""
    return _GraphBuilder(gm, sentinels).run()


class _GraphBuilder:
    """fx graph -> IR, one trace."""

    def __init__(self, gm: Any, sentinels: dict[str, Any]):
        self.gm = gm
        self.nodes: list[Node] = []
        self.env: dict[Any, Value] = {}
        self.sentinels = sentinels
        self.input_shapes: list[tuple[int, ...]] = []
        self.mm_operands: dict[int, bool] = {}

    # -- node constructors -------------------------------------------------------------
    def add(self, op: str, args: tuple[int, ...] = (), dtype: str = "float32", **attrs: Any) -> int:
        node = Node(id=len(self.nodes), op=op, args=tuple(args), attrs=attrs, dtype=dtype)
        self.nodes.append(node)
        return node.id

    def scalar(self, value: Any) -> int:
        """A Python number in the graph: a param if it is a sentinel, else a literal."""
        if isinstance(value, bool):
            return self.add("const", dtype="bool", value=value)
        for name, s in self.sentinels.items():
            # fp32 rounding: F.rms_norm hands eps to the graph already rounded to float32.
            if value == s or (isinstance(value, float) and value == float(torch.tensor(s, dtype=torch.float32))):
                return self.add("param", dtype="float32" if isinstance(s, float) else "int64", name=name)
        if isinstance(value, float) and not math.isfinite(value):
            return self.add("const", dtype="float32", value=value)
        return self.add("const", dtype="float32" if isinstance(value, float) else "int64", value=value)

    def operand(self, a: Any) -> int:
        if isinstance(a, (int, float, bool)):
            return self.scalar(a)
        got = self.env.get(a)
        if isinstance(got, IndexResult):
            unsupported("an index output (argmax/argmin, max(dim).indices)")
        if got is None:
            unsupported(f"an operand of type {type(a).__name__} that the offline generator cannot read")
        if isinstance(got, Transposed):
            unsupported("a transposed input used outside a matmul")
        if isinstance(got, MultiResult):
            unsupported("a multi-output op used as a value")
        return got

    # -- the walk ----------------------------------------------------------------------
    def run(self) -> Lowered:
        outputs: list[int] = []
        placeholders = 0
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self.env[n] = self.add("input", dtype=_dtype(n), index=placeholders)
                self.input_shapes.append(shape_of(n))
                placeholders += 1
            elif n.op == "get_attr":
                t = getattr(self.gm, n.target)
                if not isinstance(t, torch.Tensor) or t.numel() != 1:
                    unsupported("a tensor constant inside the reference (only scalars are supported)")
                self.env[n] = self.scalar(t.item())
            elif n.op == "call_function":
                self.env[n] = self.call(n)
            elif n.op == "output":
                (ret,) = n.args
                rets = ret if isinstance(ret, (tuple, list)) else (ret,)
                for r in rets:
                    outputs.append(self.operand(r))
        return Lowered(Graph(self.nodes, outputs), self.input_shapes, self.mm_operands)

    def call(self, n: Any) -> Value:
        if n.target is operator.getitem:
            src, idx = n.args
            got = self.env[src]
            if not isinstance(got, MultiResult):
                unsupported("indexing into a value")
            return got.results[idx]
        if not hasattr(n.target, "_schema"):
            unsupported(f"the Python call {n.target!r}")
        ns, base, overload = _key(n.target)
        args, kwargs = list(n.args), dict(n.kwargs)
        dtype = _dtype(n)
        in_shape = shape_of(args[0]) if args and hasattr(args[0], "meta") else None
        out_shape = shape_of(n)

        if base in CASTS:
            got = self.env.get(args[0])
            if isinstance(got, (int, Transposed)) and self._feeds_only_matmuls(n) and self._is_input(got):
                # addmm's 16-bit decomposition upcasts both operands first (nn.Linear in float16); the
                # matmul kernel accumulates in float32 from the inputs as they are
                return got
            src = self.operand(args[0])
            target = kwargs.get("dtype") or (args[1] if len(args) > 1 and isinstance(args[1], torch.dtype) else None)
            if target is None:
                return src
            return self.cast(src, str(target).replace("torch.", ""))
        if base == "scalar_tensor" or base == "full" and not out_shape:
            return self.scalar(args[0])
        if base in IDENTITY:
            src = self.operand(args[0])
            if base in RESHAPES:
                self.check_view(in_shape, out_shape, src)
            return src
        if base in TRANSPOSES:
            src = self.env.get(args[0])
            if isinstance(src, int) and self.nodes[src].op == "input" and in_shape is not None and len(in_shape) == 2:
                return Transposed(src)
            if isinstance(src, Transposed):
                return src.node
            unsupported(f"{base} of an intermediate value (only a 2-D input may be transposed, for a matmul)")
        if base == "mm":
            return self.matmul(args[0], args[1])
        if base in ("bmm", "baddbmm", "matmul", "dot", "mv", "addmv"):
            unsupported(f"{base} (batched or vector matmul): the offline generator serves 2-D a @ b only")
        if base in UNARY:
            return self.add(UNARY[base], (self.operand(args[0]),), dtype=dtype)
        if base in BINARY:
            return self.binary(BINARY[base], args, kwargs, dtype)
        if base == "where":
            c, a, b = (self.operand(x) for x in args[:3])
            return self.add("where", (c, a, b), dtype=dtype)
        if base in ("clamp", "clamp_min", "clamp_max"):
            return self.clamp(base, args, kwargs, dtype)
        if base in REDUCTION_OPS:
            return self.reduction(base, overload, args, kwargs, in_shape, dtype)
        unsupported(f"the op {ns}.{base}.{overload}")

    # -- helpers ---------------------------------------------------------------------------
    def binary(self, op: str, args: list, kwargs: dict, dtype: str) -> int:
        if op == "div" and kwargs.get("rounding_mode") is not None:
            unsupported(f"division with rounding_mode={kwargs['rounding_mode']!r}")
        a, b = self.operand(args[0]), self.operand(args[1])
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 and op in ("add", "sub") else 1)
        if op in ("add", "sub", "rsub") and alpha != 1:
            b = self.add("mul", (b, self.scalar(alpha)), dtype=dtype)
        if op == "rsub":
            a, b, op = b, a, "sub"
        if op == "pow":
            return self.power(a, b, args[1], dtype)
        return self.add(op, (a, b), dtype=dtype)

    def clamp(self, base: str, args: list, kwargs: dict, dtype: str) -> int:
        x = self.operand(args[0])
        lo = args[1] if base != "clamp_max" and len(args) > 1 else kwargs.get("min")
        hi = (args[2] if len(args) > 2 else kwargs.get("max")) if base == "clamp" else (
            args[1] if base == "clamp_max" else None)
        if lo is not None:
            x = self.add("maximum", (x, self.operand(lo)), dtype=dtype)
        if hi is not None:
            x = self.add("minimum", (x, self.operand(hi)), dtype=dtype)
        return x

    def cast(self, src: int, target: str) -> int:
        s = self.nodes[src]
        src_float = s.dtype in FLOAT_DTYPES
        if target in FLOAT_DTYPES and src_float:
            return src  # float -> float: the kernel keeps fp32 and rounds once at the store
        return self.add("cast", (src,), dtype=target)

    def power(self, a: int, b: int, exponent: Any, dtype: str) -> int:
        if isinstance(exponent, (int, float)) and not isinstance(exponent, bool):
            table = {2: "square", 0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal", 3: "cube", 1: None}
            if exponent in table:
                op = table[exponent]
                return a if op is None else self.add(op, (a,), dtype=dtype)
        return self.add("pow", (a, b), dtype=dtype)

    def check_view(self, in_shape: Any, out_shape: Any, src: int) -> None:
        if in_shape is None or out_shape is None:
            return
        i, o = strip_leading_ones(in_shape), strip_leading_ones(out_shape)
        if i == o:
            return
        # keepdim toggles of a per-row value: [..., 1] <-> [...]
        if (len(i) and i[-1] == 1 and strip_leading_ones(i[:-1] or (1,)) == o) or (
            len(o) and o[-1] == 1 and strip_leading_ones(o[:-1] or (1,)) == i
        ):
            if per_row(self.nodes, src) is not False:
                return
            # an input keeps its own shape's broadcast: A[N].unsqueeze(1) * B (diag(A) @ B) read as A[col]
            unsupported(f"a reshape from {list(in_shape)} to {list(out_shape)} of a value that is not one per row "
                        "(an input turned into a column)")
        unsupported(f"a reshape from {list(in_shape)} to {list(out_shape)} (only size-1 dimensions may be added or removed)")

    @staticmethod
    def _feeds_only_matmuls(n: Any) -> bool:
        return bool(n.users) and all(getattr(u.target, "__name__", "").startswith("mm") for u in n.users)

    def _is_input(self, got: Value) -> bool:
        node = got.node if isinstance(got, Transposed) else got
        return isinstance(node, int) and self.nodes[node].op == "input"

    def matmul(self, a_fx: Any, b_fx: Any) -> int:
        ids = []
        for x in (a_fx, b_fx):
            got = self.env.get(x)
            transposed = isinstance(got, Transposed)
            node_id = got.node if isinstance(got, Transposed) else got
            if not isinstance(node_id, int) or self.nodes[node_id].op != "input":
                unsupported("a matmul whose operands are computed (a prologue): only inputs (or their transposes) may be multiplied")
            if len(self.input_shapes[self.nodes[node_id].attrs["index"]]) != 2:
                unsupported("a matmul of inputs that are not 2-D")
            self.mm_operands[self.nodes[node_id].attrs["index"]] = transposed
            ids.append(node_id)
        if any(n.op == "mm" for n in self.nodes):
            unsupported("more than one matmul in the reference")
        return self.add("mm", tuple(ids), dtype="float32")

    def last_dim(self, dims: Any, in_shape: tuple[int, ...]) -> None:
        rank = len(in_shape)
        if dims is None or dims == []:
            if rank <= 1:
                return
            unsupported("a reduction over all dimensions (only the last dimension is supported offline)")
        dl = [dims] if isinstance(dims, int) else list(dims)
        if len(dl) != 1 or dl[0] % max(rank, 1) != max(rank, 1) - 1:
            unsupported(f"a reduction over dims {dl} of a rank-{rank} tensor (only the last dimension is supported offline)")

    def reduce(self, op: str, x: int) -> int:
        return self.add(op, (x,), dtype="float32")

    def mean(self, x: int) -> int:
        return self.add("div", (self.reduce("sum", x), self.add("ncols")), dtype="float32")

    def variance(self, x: int, correction: float) -> tuple[int, int]:
        mean = self.mean(x)
        d = self.add("sub", (x, mean))
        ss = self.reduce("sum", self.add("square", (d,)))
        denom = self.add("ncols")
        if correction:
            denom = self.add("sub", (denom, self.scalar(float(correction))))
        return self.add("div", (ss, denom)), mean

    def reduction(self, base: str, overload: str, args: list, kwargs: dict, in_shape: Any, dtype: str) -> Value:
        x = self.operand(args[0])
        if base in ("_softmax", "_log_softmax", "softmax", "log_softmax"):
            self.last_dim(args[1], in_shape)
            m = self.reduce("max", x)
            shifted = self.add("sub", (x, m))
            e = self.add("exp", (shifted,))
            s = self.reduce("sum", e)
            if "log" in base:
                return self.add("sub", (shifted, self.add("log", (s,))), dtype=dtype)
            return self.add("div", (e, s), dtype=dtype)
        if base == "native_layer_norm":
            return self.layer_norm(x, args)
        if base in ("prod", "logsumexp"):
            unsupported(f"the reduction {base}")
        dims = args[1] if len(args) > 1 else kwargs.get("dim")
        if base in ("max", "min") and overload in ("default",):
            unsupported(f"torch.{base} over all elements (only the last dimension is supported offline)")
        self.last_dim(dims, in_shape)
        if kwargs.get("dtype") is not None and str(kwargs["dtype"]).replace("torch.", "") not in FLOAT_DTYPES:
            unsupported("an integer-typed reduction")
        if base == "sum":
            return self.reduce("sum", x)
        if base == "mean":
            return self.mean(x)
        if base in ("amax", "amin"):
            return self.reduce(base[1:], x)
        if base in ("max", "min"):  # max.dim -> (values, indices)
            return MultiResult((self.reduce(base, x), IndexResult()))
        correction = kwargs.get("correction", 1)
        if correction is None:
            correction = 1
        var, mean = self.variance(x, correction)
        if base == "var":
            return var
        if base == "std":
            return self.add("sqrt", (var,))
        return MultiResult((var, mean))  # var_mean

    def layer_norm(self, x: int, args: list) -> MultiResult:
        if len(args[1]) != 1:
            unsupported("layer_norm over more than the last dimension")
        var, mean = self.variance(x, 0)
        rstd = self.add("rsqrt", (self.add("add", (var, self.scalar(args[4]))),))
        y = self.add("mul", (self.add("sub", (x, mean)), rstd))
        if args[2] is not None:
            y = self.add("mul", (y, self.operand(args[2])))
        if args[3] is not None:
            y = self.add("add", (y, self.operand(args[3])))
        return MultiResult((y, mean, rstd))
