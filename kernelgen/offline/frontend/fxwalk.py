"""The one walk over a traced fx graph: each ATen call lowered by its row of the op table
(kernelgen.offline.frontend.optable) into the IR (kernelgen.offline.frontend.ir).

Pointwise ops keep their IR names (kernelgen.offline.frontend.exprs writes them); views stay
explicit; reductions keep their dims (a squeeze follows where the reference drops them); softmax,
log_softmax, logsumexp and the layer, group, batch and instance norms are expanded into reductions
and pointwise ops, because their ATen decompositions reach for `as_strided` on intermediates.
Symbolic sizes used as numbers (a mean's count) become `size` values. Anything outside the IR is
refused with the reason (an LLM is needed).
"""

from __future__ import annotations

import operator
from typing import Any

import sympy
import torch

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Call
from kernelgen.offline.frontend.follow import input_ranks, size_at
from kernelgen.offline.frontend.ir import Graph, Multi, NoValue, Value
from kernelgen.offline.frontend.optable import OPS
from kernelgen.offline.unsupported import unsupported

# calls that assert or constrain sizes: nothing to compute
IGNORED = {"_assert_async", "_assert_scalar", "sym_constrain_range_for_size", "_assert_tensor_metadata"}
SIZE_QUERIES = ("sym_size", "sym_numel", "sym_stride", "sym_storage_offset")


def dtype_name(val: Any) -> str:
    return str(val.dtype).replace("torch.", "") if isinstance(val, torch.Tensor) else "float32"


def lower(gm: Any, sentinels: dict[str, Any], n_inputs: int, cases: tuple = ()) -> Graph:
    """The IR of one traced graph module; `sentinels` maps each param to the value it was traced with;
    `cases`: the inputs' shapes of every case the spec states (each a list of shapes, in input order),
    at which a size the trace's guards pin must hold to be pinned (IRBuilder.pin_sizes)."""
    return IRBuilder(gm, sentinels, n_inputs, cases).run()


class IRBuilder:
    """fx graph -> IR, one trace; the op table's handlers add values through it."""

    def __init__(self, gm: Any, sentinels: dict[str, Any], n_inputs: int, cases: tuple = ()):
        self.gm = gm
        self.cases = cases
        self.sentinels = sentinels
        self.n_inputs = n_inputs
        self.values: list[Value] = []
        self.env: dict[Any, Any] = {}
        self.symbols: dict[str, tuple[int, int]] = {}

    # --- value constructors -----------------------------------------------------------------------
    def add(self, op: str, args: tuple[int, ...] = (), shape: tuple = (), dtype: str = "float32", **attrs: Any) -> int:
        v = Value(len(self.values), op, tuple(args), attrs, tuple(S.expr(d) for d in shape), dtype)
        self.values.append(v)
        return v.id

    def v(self, i: int) -> Value:
        return self.values[i]

    def scalar(self, value: Any) -> int:
        """A Python number (or a symbolic size) in the graph: a param if it is a sentinel."""
        if isinstance(value, (torch.SymInt, torch.SymFloat)):
            expr = value.node.expr
            if expr.is_number:
                return self.scalar(int(expr) if isinstance(value, torch.SymInt) else float(expr))
            return self.add("size", dtype="int64" if isinstance(value, torch.SymInt) else "float32", expr=expr)
        if isinstance(value, bool):
            return self.add("const", dtype="bool", value=value)
        for name, s in self.sentinels.items():
            # fp32 rounding: F.rms_norm hands eps to the graph already rounded to float32.
            if value == s or (isinstance(value, float) and value == float(torch.tensor(s, dtype=torch.float32))):
                return self.add("param", dtype="float32" if isinstance(s, float) else "int64", name=name)
        return self.add("const", dtype="float32" if isinstance(value, float) else "int64", value=value)

    def operand(self, a: Any) -> int:
        if isinstance(a, (int, float, bool, torch.SymInt, torch.SymFloat)):
            return self.scalar(a)
        got = self.env.get(a)
        if isinstance(got, NoValue):
            unsupported(got.what)
        if isinstance(got, int) and not isinstance(got, bool):
            return got
        if isinstance(got, sympy.Expr):
            return self.add("size", dtype="int64", expr=got)
        unsupported(f"an operand the generator cannot read ({type(a).__name__})")

    def shape_of(self, fx_node: Any) -> tuple:
        val = fx_node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            unsupported(f"a value without a tensor shape ({fx_node.name})")
        return tuple(S.expr(d) for d in val.shape)

    # --- the walk ---------------------------------------------------------------------------------
    def run(self) -> Graph:
        outputs: list[int] = []
        returns_tuple = False
        index = 0
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                shape = self.shape_of(n)
                self.env[n] = self.add("input", shape=shape, dtype=dtype_name(n.meta["val"]), index=index)
                for d, e in enumerate(shape):
                    if isinstance(e, sympy.Symbol) and e.name not in self.symbols:
                        self.symbols[e.name] = (index, d)
                index += 1
            elif n.op == "get_attr":
                t = getattr(self.gm, n.target)
                if not isinstance(t, torch.Tensor) or t.numel() != 1:
                    unsupported("a tensor constant inside the reference (only scalars are supported)")
                self.env[n] = self.scalar(t.item())
            elif n.op == "call_function":
                # a result nobody reads (max_pool1d's squeezed indices) is not lowered: it may be one
                # the generator cannot compute, and is not needed
                self.env[n] = self.call(n) if n.users else None
            elif n.op == "output":
                (ret,) = n.args
                returns_tuple = isinstance(ret, (tuple, list))
                for r in (ret if returns_tuple else (ret,)):
                    outputs.append(self.operand(r))
        self.pin_sizes()
        graph = Graph(self.values, outputs, returns_tuple, self.symbols)
        for i in graph.live():
            for e in self.values[i].shape:
                missing = [s.name for s in e.free_symbols if s.name not in self.symbols]
                if missing:
                    unsupported(f"a size ({e}) that no input dimension gives")
        return graph

    def pin_sizes(self) -> None:
        """Sizes the trace's own guards pin to a number, written as that number. A size over several
        symbols that the reference requires to equal a constant -- a transposed convolution's width
        (2*s33 + s71 - 4) that a LayerNorm(64) after it must see as 64 -- stays an expression in the
        traced shapes (PyTorch only replaces single symbols), so a [64] weight would not fit the
        frame it broadcasts over. Inputs keep their own symbols (the wrapper binds them).

        Only a size that holds at every case the spec states is pinned: the guards of one trace also
        record the sizes PyTorch specialises because they are 0 or 1 in the traced case (a tensor's
        contiguity asks whether a dim is 1), which the reference does not require. Level 2's 46
        (Conv2d 3x3 -> AvgPool2d(2)) traced at x 5x5 has a pooled size of 1 there, and pinned it
        for every shape: [128, 128, 1, 1] at KernelBench's x 128x128, where the baseline gives 63x63."""
        ranks = input_ranks(self.values)
        cases = [c for c in self.cases if [len(s) for s in c] == ranks]  # a case of other ranks has other symbols
        pinned = {e: c for e, c in _pinned(self.gm).items() if all(size_at(e, self.symbols, case) == c for case in cases)}
        if not pinned:
            return
        for v in self.values:
            if v.op != "input":
                v.shape = tuple(pinned.get(d, d) for d in v.shape)
            if v.op == "size":
                v.attrs["expr"] = v.attrs["expr"].xreplace(pinned)

    def call(self, n: Any) -> Any:
        if n.target is operator.getitem:
            src, idx = n.args
            got = self.env[src]
            if not isinstance(got, Multi):
                unsupported("indexing into a value")
            return got[idx]
        if not hasattr(n.target, "_schema"):  # SymInt arithmetic (mul, floordiv, sym_float, ...)
            val = n.meta.get("val")
            if isinstance(val, (torch.SymInt, torch.SymFloat, int, float)):
                return val.node.expr if isinstance(val, (torch.SymInt, torch.SymFloat)) else sympy.sympify(val)
            unsupported(f"the Python call {n.target!r}")
        ns, base = n.target._schema.name.split("::")
        if base.endswith("_") and not base.startswith("_") and base not in ("copy_",):
            base = base[:-1]
        if base in SIZE_QUERIES:
            return n.meta["val"].node.expr if isinstance(n.meta["val"], torch.SymInt) else sympy.Integer(n.meta["val"])
        if base in IGNORED:
            return None
        rule = OPS.get(base)
        if rule is None:
            unsupported(f"the op {ns}.{base}.{n.target._overloadname}")
        got = rule(self, Call(n, base, n.target._overloadname, list(n.args), dict(n.kwargs), dtype_name(n.meta.get("val"))))
        return Multi(got) if isinstance(got, list) else got


def _pinned(gm: Any) -> dict[sympy.Expr, sympy.Expr]:
    """expression -> number, for every guard Eq(expression over two or more symbols, number) of the
    trace's shape environment."""
    env = next((d.node.shape_env for n in gm.graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)
                for d in n.meta["val"].shape if isinstance(d, torch.SymInt)), None)
    out: dict[sympy.Expr, sympy.Expr] = {}
    for guard in getattr(env, "guards", []):
        e = guard.expr
        if isinstance(e, sympy.Eq):
            for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                if b.is_Integer and len(a.free_symbols) >= 2:
                    out[a] = b
    return out
