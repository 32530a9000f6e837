"""Trace a spec's PyTorch reference into the offline IR.

`make_fx` records the ATen ops the reference runs on small real inputs (the spec's own test
shapes); composite activations (gelu, silu, hardswish, mish, ...) are decomposed into primitive
pointwise ops so that the generator needs no table of activations, and a few composite reductions
(softmax, log_softmax, layer_norm, var, mean) are expanded here into sum/max/min over the last
dimension plus pointwise ops, with the row length as a symbol rather than a baked number.

Scalar params are found by tracing with sentinel values: a literal equal to a sentinel becomes the
param. Every test case is traced and the structures must agree, which catches shape-dependent
Python in the reference. Nothing here guesses from the operator's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelgen.offline.ir import Graph, Node
from kernelgen.offline.unsupported import unsupported
from kernelgen.spec import FLOAT_DTYPES, OperatorSpec, draw_inputs, load_reference

aten = torch.ops.aten
prims = torch.ops.prims

# Composite ops PyTorch already knows how to decompose into pointwise primitives.
_DECOMPOSE = [
    aten.gelu, aten.silu, aten.leaky_relu, aten.hardswish, aten.hardsigmoid, aten.elu, aten.celu,
    aten.selu, aten.softplus, aten.mish, aten.hardtanh, aten.relu6, aten.threshold, aten.addmm,
    aten.logit, aten.sgn, aten.xlogy, aten.hardshrink, aten.softshrink, aten.lerp, aten.addcmul,
    aten.addcdiv, aten.glu, aten.log_sigmoid_forward, aten.frac, aten.linear,
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
TRANSPOSES = {"t", "transpose", "permute", "numpy_T"}
CASTS = {"_to_copy", "convert_element_type", "to", "type_as"}


@dataclass
class InputInfo:
    name: str
    roles: set[str]  # which of full/col/row/scalar this input's shape allows in every traced case
    is_mm_operand: bool = False
    transposed: bool = False


@dataclass
class OutputInfo:
    space: str  # "full" or "row"
    keepdim: bool  # row outputs: [..., 1] (True) or [...] (False)
    dtype_rule: tuple[str, Any]  # ("like", input index) or ("fixed", dtype name) or ("map", {in: out})


@dataclass
class Traced:
    graph: Graph
    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    returns_tuple: bool
    params: list[str]
    has_matmul: bool
    frame_ranks: set[int] = field(default_factory=set)


def _key(target: Any) -> tuple[str, str, str]:
    """(namespace, base name without in-place underscore, overload) of an OpOverload."""
    schema = target._schema.name  # e.g. "aten::add_"
    ns, base = schema.split("::")
    if base.endswith("_") and not base.startswith("_"):
        base = base[:-1]
    return ns, base, target._overloadname


def _shape(fx_node: Any) -> tuple[int, ...] | None:
    val = fx_node.meta.get("val") if hasattr(fx_node, "meta") else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _dtype(fx_node: Any) -> str:
    val = fx_node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return str(val.dtype).replace("torch.", "")
    return "float32"


def _strip_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) - 1 and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


class _Builder:
    """fx graph -> IR, one trace."""

    def __init__(self, gm: Any, n_inputs: int, sentinels: dict[str, float]):
        self.gm = gm
        self.nodes: list[Node] = []
        self.env: dict[Any, Any] = {}
        self.n_inputs = n_inputs
        self.sentinels = sentinels
        self.input_shapes: list[tuple[int, ...]] = []
        self.mm_operands: dict[int, bool] = {}  # input index -> transposed
        self.frame: tuple[int, ...] | None = None

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
        if got == "INDICES":
            unsupported("an index output (argmax/argmin, max(dim).indices)")
        if got is None:
            unsupported(f"an operand of type {type(a).__name__} that the offline generator cannot read")
        if isinstance(got, tuple) and got[0] == "T":
            unsupported("a transposed input used outside a matmul")
        if isinstance(got, list):
            unsupported("a multi-output op used as a value")
        return got

    # -- the walk ----------------------------------------------------------------------
    def run(self) -> Graph:
        outputs: list[int] = []
        placeholders = 0
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self.env[n] = self.add("input", dtype=_dtype(n), index=placeholders)
                self.input_shapes.append(_shape(n))
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
        return Graph(self.nodes, outputs)

    def call(self, n: Any) -> Any:
        import operator

        if n.target is operator.getitem:
            src, idx = n.args
            got = self.env[src]
            if not isinstance(got, list):
                unsupported("indexing into a value")
            return "INDICES" if got[idx] is None else got[idx]  # refused only if actually used
        if not hasattr(n.target, "_schema"):
            unsupported(f"the Python call {n.target!r}")
        ns, base, overload = _key(n.target)
        args, kwargs = list(n.args), dict(n.kwargs)
        dtype = _dtype(n)
        in_shape = _shape(args[0]) if args and hasattr(args[0], "meta") else None
        out_shape = _shape(n)

        if base in CASTS:
            src = self.operand(args[0])
            target = kwargs.get("dtype") or (args[1] if len(args) > 1 and isinstance(args[1], torch.dtype) else None)
            if target is None:
                return src
            return self.cast(src, str(target).replace("torch.", ""))
        if base == "scalar_tensor" or base == "full" and not out_shape:
            return self.scalar(args[0])
        if base in IDENTITY:
            if base in ("view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "broadcast_in_dim"):
                self.check_view(in_shape, out_shape, self.env.get(args[0]))
            return self.operand(args[0])
        if base in TRANSPOSES:
            src = self.env.get(args[0])
            if isinstance(src, int) and self.nodes[src].op == "input" and in_shape is not None and len(in_shape) == 2:
                return ("T", src)
            if isinstance(src, tuple) and src[0] == "T":
                return src[1]
            unsupported(f"{base} of an intermediate value (only a 2-D input may be transposed, for a matmul)")
        if base == "mm":
            return self.matmul(args[0], args[1])
        if base in ("bmm", "baddbmm", "matmul", "dot", "mv", "addmv"):
            unsupported(f"{base} (batched or vector matmul): the offline generator serves 2-D a @ b only")
        if base in UNARY:
            return self.add(UNARY[base], (self.operand(args[0]),), dtype=dtype)
        if base in BINARY:
            op = BINARY[base]
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
        if base == "where":
            c, a, b = (self.operand(x) for x in args[:3])
            return self.add("where", (c, a, b), dtype=dtype)
        if base in ("clamp", "clamp_min", "clamp_max"):
            x = self.operand(args[0])
            lo = args[1] if base != "clamp_max" and len(args) > 1 else kwargs.get("min")
            hi = (args[2] if len(args) > 2 else kwargs.get("max")) if base == "clamp" else (
                args[1] if base == "clamp_max" else None)
            if lo is not None:
                x = self.add("maximum", (x, self.operand(lo)), dtype=dtype)
            if hi is not None:
                x = self.add("minimum", (x, self.operand(hi)), dtype=dtype)
            return x
        if base in ("sum", "amax", "amin", "mean", "max", "min", "var", "var_mean", "std", "_softmax",
                    "_log_softmax", "softmax", "log_softmax", "native_layer_norm", "prod", "logsumexp"):
            return self.reduction(n, base, overload, args, kwargs, in_shape, out_shape, dtype)
        unsupported(f"the op {ns}.{base}.{overload}")

    # -- helpers ---------------------------------------------------------------------------
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

    def check_view(self, in_shape: Any, out_shape: Any, src: Any) -> None:
        if in_shape is None or out_shape is None:
            return
        i, o = _strip_leading_ones(in_shape), _strip_leading_ones(out_shape)
        if i == o:
            return
        # keepdim toggles of a per-row value: [..., 1] <-> [...]
        if (len(i) and i[-1] == 1 and _strip_leading_ones(i[:-1] or (1,)) == o) or (
            len(o) and o[-1] == 1 and _strip_leading_ones(o[:-1] or (1,)) == i
        ):
            return
        unsupported(f"a reshape from {list(in_shape)} to {list(out_shape)} (only size-1 dimensions may be added or removed)")

    def matmul(self, a_fx: Any, b_fx: Any) -> int:
        ids = []
        for pos, x in enumerate((a_fx, b_fx)):
            got = self.env.get(x)
            transposed = isinstance(got, tuple) and got[0] == "T"
            node_id = got[1] if transposed else got
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

    def reduction(self, n, base, overload, args, kwargs, in_shape, out_shape, dtype) -> Any:
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
            if len(args[1]) != 1:
                unsupported("layer_norm over more than the last dimension")
            var, mean = self.variance(x, 0)
            rstd = self.add("rsqrt", (self.add("add", (var, self.scalar(args[4]))),))
            y = self.add("mul", (self.add("sub", (x, mean)), rstd))
            if args[2] is not None:
                y = self.add("mul", (y, self.operand(args[2])))
            if args[3] is not None:
                y = self.add("add", (y, self.operand(args[3])))
            return [y, mean, rstd]
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
            return [self.reduce(base, x), None]
        correction = kwargs.get("correction", 1)
        if correction is None:
            correction = 1
        var, mean = self.variance(x, correction)
        if base == "var":
            return var
        if base == "std":
            return self.add("sqrt", (var,))
        return [var, mean]  # var_mean


def _decompositions() -> dict:
    from torch._decomp import get_decompositions

    return get_decompositions(_DECOMPOSE)


def _sample_inputs(spec: OperatorSpec, case: dict, dtype: str) -> list[torch.Tensor]:
    """Inputs drawn the way the harness draws them (each input's `init`), on the CPU: the trace
    must see the values the kernel will be checked on (integer ranges, masks)."""
    return draw_inputs(spec, case, dtype, 0, "cpu")


def _sentinels(spec: OperatorSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, p in enumerate(spec.params):
        if p.type == "float":
            out[p.name] = 0.4142135 + 0.0173 * i  # unlikely to collide with a literal in user code
        elif p.type == "int":
            out[p.name] = 7919 + 13 * i
    return out


def _trace_once(fn: Callable, spec: OperatorSpec, inputs: list[torch.Tensor], params: dict[str, Any],
                sentinels: dict[str, Any]) -> tuple[_Builder, Graph, Any]:
    def call(*xs: torch.Tensor) -> Any:
        return fn(*xs, **params)

    try:
        gm = make_fx(call, decomposition_table=_decompositions())(*inputs)
    except Exception as e:  # noqa: BLE001 - the reference is user code; any failure means "cannot trace"
        unsupported(f"tracing the reference failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
    builder = _Builder(gm, len(inputs), sentinels)
    graph = builder.run()
    ret = call(*inputs)
    return builder, graph, ret


def _roles(shape: tuple[int, ...], frame: tuple[int, ...]) -> set[str]:
    s = _strip_leading_ones(shape)
    f = _strip_leading_ones(frame)
    roles = set()
    if s == f:
        roles.add("full")
    if len(f) >= 1 and s == (f[-1],):
        roles.add("col")
    if len(f) >= 1 and s == _strip_leading_ones(tuple(f[:-1]) + (1,)):
        roles.add("row")
    if math.prod(s) == 1:
        roles.add("scalar")
    return roles


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(torch.broadcast_shapes(*shapes)) if shapes else ()


def trace_reference(spec: OperatorSpec) -> Traced:
    """Trace every test case (and every float dtype of the first) and check they agree."""
    if spec.reference is None:
        unsupported("a spec without a `reference`")
    for p in spec.params:
        if p.type == "bool":
            unsupported(f"the bool param {p.name!r}")
    fn = load_reference(spec)
    sentinels = _sentinels(spec)
    float_dtypes = [d for d in spec.dtypes if d in FLOAT_DTYPES]
    dtype0 = float_dtypes[0] if float_dtypes else spec.dtypes[0]

    first: _Builder | None = None
    graph: Graph | None = None
    roles: list[set[str]] | None = None
    out_infos: list[dict] = []
    frame_ranks: set[int] = set()
    returns_tuple = False
    for ci, case in enumerate(spec.test_cases[:6]):
        inputs = _sample_inputs(spec, case, dtype0)
        b, g, ret = _trace_once(fn, spec, inputs, sentinels, sentinels)
        returns_tuple = isinstance(ret, (tuple, list))
        rets = list(ret) if returns_tuple else [ret]
        if graph is None:
            first, graph = b, g
        elif g.signature() != graph.signature():
            unsupported("the traced graph changes with the input shape (shape-dependent Python in the reference)")
        elif [n.attrs.get("value") for n in g.nodes] != [n.attrs.get("value") for n in graph.nodes]:
            unsupported("a literal in the traced graph changes with the input shape (e.g. x.shape[-1] used as a number)")
        has_mm = any(n.op == "mm" for n in g.nodes)
        if has_mm:
            mm = next(n for n in g.nodes if n.op == "mm")
            ia, ib = (g.nodes[i].attrs["index"] for i in mm.args)
            a_shape, b_shape = b.input_shapes[ia], b.input_shapes[ib]
            m = a_shape[1] if b.mm_operands[ia] else a_shape[0]
            nn = b_shape[0] if b.mm_operands[ib] else b_shape[1]
            frame = (m, nn)
        else:
            frame = _broadcast([s for s in b.input_shapes])
        frame_ranks.add(len(frame))
        case_roles = [_roles(s, frame) for s in b.input_shapes]
        roles = case_roles if roles is None else [r & c for r, c in zip(roles, case_roles)]
        infos = []
        for r in rets:
            shape = tuple(r.shape)
            if _strip_leading_ones(shape) == _strip_leading_ones(frame):
                infos.append(("full", len(shape) > len(frame)))
            elif len(frame) >= 1 and _strip_leading_ones(shape) == _strip_leading_ones(tuple(frame[:-1]) + (1,)) and len(shape) == len(frame):
                infos.append(("row", True))
            elif len(frame) >= 1 and shape == tuple(frame[:-1]):
                infos.append(("row", False))
            else:
                unsupported(f"an output of shape {list(shape)} that is neither the broadcast shape {list(frame)} nor one value per row")
            if len(shape) > len(frame):
                unsupported("an output of higher rank than its inputs")
        out_infos.append(infos)

    assert graph is not None and first is not None and roles is not None
    if any(o != out_infos[0] for o in out_infos):
        unsupported("outputs whose kind (per element or per row) changes with the input shape")

    # Params: a trace with the default values must differ from the sentinel trace exactly at the
    # param positions; a difference elsewhere means Python computed with the param before tracing.
    case0 = spec.test_cases[0]
    if spec.params:
        inputs = _sample_inputs(spec, case0, dtype0)
        _, g_def, _ = _trace_once(fn, spec, inputs, spec.param_defaults, {})
        if g_def.signature() != _strip_params(graph).signature():
            unsupported("the traced graph depends on a param's value (control flow on a param)")
        for n_def, n_sen in zip(g_def.nodes, graph.nodes):
            if n_sen.op == "const" and n_def.attrs.get("value") != n_sen.attrs.get("value"):
                unsupported("a param used in arithmetic that Python evaluates before tracing "
                            "(write it as a tensor expression, e.g. x * scale, not x * (1 - scale))")

    # Output dtypes per case dtype.
    per_dtype: dict[str, list[str]] = {}
    for d in spec.dtypes:
        inputs = _sample_inputs(spec, case0, d)
        _, g_d, ret = _trace_once(fn, spec, inputs, sentinels, sentinels)
        if g_d.signature() != graph.signature():
            unsupported(f"the traced graph differs between dtypes ({dtype0} vs {d})")
        rets = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        per_dtype[d] = [str(r.dtype).replace("torch.", "") for r in rets]

    outputs = []
    for k, (space, keepdim) in enumerate(out_infos[0]):
        outputs.append(OutputInfo(space, keepdim, _dtype_rule(spec, per_dtype, k)))
    inputs_info = [
        InputInfo(name=inp.name, roles=roles[i], is_mm_operand=i in first.mm_operands,
                  transposed=first.mm_operands.get(i, False))
        for i, inp in enumerate(spec.inputs)
    ]
    return Traced(graph=graph, inputs=inputs_info, outputs=outputs, returns_tuple=returns_tuple,
                  params=[p.name for p in spec.params if p.type != "bool"],
                  has_matmul=any(n.op == "mm" for n in graph.nodes), frame_ranks=frame_ranks)


def _strip_params(graph: Graph) -> Graph:
    nodes = []
    for n in graph.nodes:
        if n.op == "param":
            nodes.append(Node(n.id, "const", n.args, {"value": None}, n.space, n.dtype))
        else:
            nodes.append(n)
    return Graph(nodes, graph.outputs)


def _dtype_rule(spec: OperatorSpec, per_dtype: dict[str, list[str]], k: int) -> tuple[str, Any]:
    outs = {d: v[k] for d, v in per_dtype.items()}
    for i, inp in enumerate(spec.inputs):
        if all(outs[d] == spec.input_dtype(inp, d) for d in outs):
            return ("like", i)
    if len(set(outs.values())) == 1:
        return ("fixed", next(iter(outs.values())))
    return ("map", outs)
