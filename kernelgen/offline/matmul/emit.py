"""The matmul family's file as data for templates/offline/matmul.py.j2: the grouped, K-looped
kernel with its epilogue (matmul/kernel.py), the plan over [M, K] @ [K, N], the host path."""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.offline.dispatch import Route
from kernelgen.offline.frame.classify import Classification
from kernelgen.offline.frame.host import def_line, dtype_expr, launch_forms, host_context
from kernelgen.offline.frame.view import FrameView
from kernelgen.offline.matmul.kernel import matmul_kernel
from kernelgen.offline.matmul.knobs import MatmulKnobs
from kernelgen.offline.naming import Names
from kernelgen.spec import OperatorSpec


def matmul_key(view: FrameView, a_idx: int, b_idx: int, spec: OperatorSpec) -> Callable[[dict[str, list[int]]], tuple[int, int]]:
    """The dispatch key of a case: (M, N) of its output."""
    a_name, b_name = spec.input_names[a_idx], spec.input_names[b_idx]

    def key(shapes: dict[str, list[int]]) -> tuple[int, int]:
        a, b = shapes[a_name], shapes[b_name]
        if len(a) != 2 or len(b) != 2:
            raise ValueError("matmul operands are 2-D")
        m = a[1] if view.inputs[a_idx].transposed else a[0]
        n = b[0] if view.inputs[b_idx].transposed else b[1]
        return max(m, 1), max(n, 1)
    return key


def matmul_indices(view: FrameView) -> tuple[int, int]:
    mm = next(n for n in view.graph.nodes if n.op == "mm")
    a_idx, b_idx = (view.graph.node(i).attrs["index"] for i in mm.args)
    return a_idx, b_idx


def matmul_context(spec: OperatorSpec, view: FrameView, kind: Classification, names: Names, routes_: list[Route]) -> dict[str, Any]:
    g = view.graph
    base = routes_[0].knobs
    assert isinstance(base, MatmulKnobs)
    a_idx, b_idx = matmul_indices(view)
    for n in g.nodes:
        n.space = "full"
    epi_roles = [r if r != "mm" else "full" for r in kind.roles]
    kernel = matmul_kernel(g, epi_roles, names, view.params, a_idx, b_idx)
    a, b = names.inputs[a_idx], names.inputs[b_idx]
    kname = f"_{spec.name}_kernel"
    epilogue = [nm for i, nm in enumerate(names.inputs) if i not in (a_idx, b_idx) and nm in kernel.pointers]
    outputs = [{"name": o, "dtype": dtype_expr(info.dtype_rule, names)} for o, info in zip(names.outputs, view.outputs)]
    plan = {"inputs": names.inputs, "same_dtype": [names.inputs[i] for i in view.same_dtype_inputs],
            "a_transposed": view.inputs[a_idx].transposed, "b_transposed": view.inputs[b_idx].transposed,
            "epilogue": epilogue, "dispatch": len(routes_) > 1, "sizes": kernel.sizes, "outputs": outputs,
            "out_dtypes": [f"{o}_dtype" for o in names.outputs]}
    forms = launch_forms([{"name": kname, "what": "the kernel with the plan's tiles"}], f"{kname}_autotuned" if base.autotune else None)
    host = host_context(spec, names, view, routes_, forms, kernel.pointers, copies=False, split=False, sm=False,
                 key_what="the output [M, N]", pack=[a, b])
    return dict(kernel=kernel, kernel_name=kname, a=a, b=b, autotuned=base.autotune, config={"group": base.GROUP_SIZE_M},
                launch_def=def_line("def _launch_config(", ["M", "N", "K", "fp32", "kmajor", "tf32", "*", *MatmulKnobs.model_fields]),
                plan=plan, host=host)
