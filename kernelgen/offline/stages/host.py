"""The wrapper's side of an n-dimensional program, as data for templates/offline/stages.py.j2:
how each call's plan binds the dimension symbols, sizes the buffers, lays out every stage's accesses
(kernelgen.offline.stages.frames' groups, merged at run time by the file's `_layout`) and launches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.access import StageKernel
from kernelgen.offline.stages.anchors import AnchorKind
from kernelgen.offline.stages.launch import split_per_sm
from kernelgen.offline.stages.program import Access, Program, Stage

DTYPE = {"float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16", "float64": "torch.float64",
         "int64": "torch.int64", "int32": "torch.int32", "int16": "torch.int16", "int8": "torch.int8",
         "uint8": "torch.uint8", "bool": "torch.bool"}


_RENAME: dict = {}  # the trace's symbols (s75, ...) -> readable names (x_0: x.shape[0]), per file


def py(e: sympy.Expr | int) -> str:
    e = S.expr(e)
    return S.python(e.xreplace(_RENAME) if _RENAME else e)


def rename_symbols(g: Graph, input_names: list[str]) -> None:
    """Name each dimension symbol after the input dim it is first read from (x_0 for x.shape[0])."""
    _RENAME.clear()
    for name, (i, d) in g.symbols.items():
        _RENAME[sympy.Symbol(name, integer=True, positive=True)] = sympy.Symbol(f"{input_names[i]}_{d}", integer=True,
                                                                               positive=True)


def py_shape(shape: tuple) -> str:
    items = [py(d) for d in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def view_literal(step: tuple) -> str:
    kind, attrs, out = step
    if kind == "reshape":
        arg = py_shape(out)
    elif kind == "expand":
        arg = py_shape(out)
    elif kind == "permute":
        arg = repr(tuple(attrs["perm"]))
    elif kind == "unsqueeze":
        arg = repr(attrs["dim"])
    elif kind == "squeeze":
        arg = repr(tuple(attrs["dims"]))
    elif kind == "flip":
        arg = repr(tuple(attrs["dims"]))
    elif kind == "slice":
        arg = f"({attrs['dim']}, {py(attrs['start'])}, {attrs['step']}, {py(out[attrs['dim']])})"
    elif kind == "select":
        arg = f"({attrs['dim']}, {py(attrs['index'])})"
    elif kind == "window":
        arg = repr((attrs["n"], tuple(attrs["kernel"]), tuple(attrs["stride"]), tuple(attrs["dilation"])))
    else:
        raise ValueError(f"no view {kind}")
    return f'("{kind}", {arg})'


def access_literal(acc: Access) -> str:
    views = "(" + "".join(view_literal(s) + ", " for s in acc.views) + ")"
    return f'("{acc.buffer}", {views}, {acc.map!r})'


def symbol_lines(g: Graph, input_names: list[str]) -> tuple[list[str], list[dict]]:
    """(bindings `s0 = x_shape[0]`, checks) for every input dim: a symbol seen first binds it, the
    same symbol again or a number (a size the reference fixed) must agree."""
    lines, checks = [], []
    bound: set[str] = set()
    for v in g.values:
        if v.op != "input":
            continue
        name = input_names[v.attrs["index"]]
        for d, e in enumerate(v.shape):
            src = f"{name}_shape[{d}]"
            if isinstance(e, sympy.Symbol) and e.name not in bound:
                bound.add(e.name)
                lines.append(f"{py(e)} = {src}")
            else:
                checks.append({"cond": f"{src} != {py(e)}", "src": src, "what": f"{name}.shape[{d}]", "want": py(e)})
    return lines, checks


def size_value(g: Graph, u: int) -> str:
    """A `size` value as the number the kernel takes (float for a count a mean divides by)."""
    from torch.utils._sympy.functions import ToFloat

    e = g[u].attrs["expr"].replace(ToFloat, lambda x: x)
    return f"float({py(e)})" if g[u].dtype.startswith("float") else f"int({py(e)})"


def context(g: Graph, prog: Program, input_names: list[str], kernels: list[StageKernel],
            anchors: Mapping[str, AnchorKind]) -> dict[str, Any]:
    rename_symbols(g, input_names)
    binds, checks = symbol_lines(g, input_names)
    temps = [{"name": b.name, "shape": py_shape(b.shape), "dtype": DTYPE[b.dtype or "float32"]}
             for b in prog.buffers.values() if b.kind == "temp"]
    outputs = sorted((b for b in prog.buffers.values() if b.kind == "output"), key=lambda b: b.index)
    stages = []
    for st, k in zip(prog.stages, kernels):
        accesses = [access_literal(p.access) for p in k.ports]
        entry: dict[str, Any] = {
            "id": st.id, "kind": st.kind, "kernel": k.name, "frame": py_shape(st.frame),
            "groups": repr(st.groups), "accesses": accesses,
            "ports": [{"name": p.name, "buffer": p.buffer, "groups": p.groups, "offset": p.offset} for p in k.ports],
            "sizes": [size_value(g, u) for u in k.sizes], "params": k.params_used,
            "what": describe(g, st, anchors), "anchored": st.kind in anchors, "split": getattr(k, "split", None), "one_pass": getattr(k, "one_pass", False),
            "flat": getattr(k, "flat", False),
            "split_sm": split_per_sm(getattr(k, "split", None)),
        }
        if st.kind == "matmul":
            entry["operands"] = [access_literal(Access(a.buffer, a.views, ())) for a in st.operands]
            entry["operand_buffers"] = [a.buffer for a in st.operands]
            entry["operand_dtypes"] = [dtype_of(prog, a.buffer) for a in st.operands]
            entry["batch"] = k.batch
            entry["moves"] = list(k.moves)
            entry["k_size"] = py(g[g[st.anchor].args[0]].shape[-1])
        elif st.kind in anchors:
            entry.update(anchors[st.kind].plan(g, prog, st, k))
        else:
            entry["k_groups"] = k.k_groups
            entry["r_groups"] = k.r_groups
        stages.append(entry)
    return {"binds": binds, "checks": checks, "temps": temps,
            "outputs": [{"name": b.name, "shape": py_shape(b.shape)} for b in outputs],
            "stages": stages, "returns": [_returned(name, views) for name, views in prog.returns]}


def dtype_of(prog: Program, buffer: str) -> str:
    """The dtype of a buffer, as the plan knows it: an input's from the call, a temporary's fixed."""
    b = prog.buffers[buffer]
    if b.kind == "input":
        return f"{buffer}_dtype"
    if b.kind == "output":
        return f"_OUT_DTYPES[ROUTE][{b.index}]"
    return DTYPE[b.dtype or "float32"]


def _returned(name: str, views: list) -> str:
    expr = name
    for kind, attrs, out in views:
        if kind in ("reshape", "expand"):
            expr = f"{expr}.{'view' if kind == 'reshape' else 'expand'}{py_shape(out)}"
        elif kind == "permute":
            expr = f"{expr}.permute{tuple(attrs['perm'])!r}"
        elif kind == "unsqueeze":
            expr = f"{expr}.unsqueeze({attrs['dim']})"
        elif kind == "squeeze":
            expr = f"{expr}.squeeze({tuple(attrs['dims'])!r})"
        elif kind == "slice":
            d = attrs["dim"]
            expr = f"{expr}.narrow({d}, {py(attrs['start'])}, {py(out[d])})"
        elif kind == "select":
            expr = f"{expr}.select({attrs['dim']}, {py(attrs['index'])})"
        else:
            raise ValueError(f"cannot return a {kind} view")
    return expr


def describe(g: Graph, st: Stage, anchors: Mapping[str, AnchorKind]) -> str:
    if st.kind in anchors:
        return anchors[st.kind].describe(g, st)
    frame = ", ".join(py(d) for d in st.frame)
    if st.kind == "matmul":
        return f"matmul [{frame}] with its epilogue"
    if st.kind == "reduce":
        kinds = sorted({g[u].attrs.get("kind", "gather") for u in st.values if g[u].op in ("reduce", "gather")})
        return f"{', '.join(kinds)} over dims {list(st.reduced)} of [{frame}]"
    if st.kind == "scan":
        return f"{g[st.anchor].attrs['kind']} scan along dim {st.reduced[0]} of [{frame}]"
    return f"pointwise over [{frame}]"
