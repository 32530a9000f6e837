"""Kernel text for the matmul family: out = epilogue(a @ b), a [M, K], b [K, N] (or b.T).

Grouped program ordering as in Triton's matmul tutorial (03): GROUP_SIZE_M row-blocks share the
same columns of b while they are hot in L2. Accumulation is fp32; fp32 inputs use IEEE products
because TF32's 10-bit mantissa gives ~1e-3 relative error against the 1e-4 tolerance.
The epilogue (bias, activation, scale, ...) runs on the fp32 accumulator before the single store.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.frontend import exprs
from kernelgen.offline.frame.graph import FrameGraph, Node
from kernelgen.offline.naming import Names
from kernelgen.offline.unsupported import unsupported


@dataclass
class MatmulKernel:
    params: list[tuple[str, str]]  # (argument, comment)
    pointers: list[str]  # the launch's first arguments: the wrapper's tensors and scalar params
    sizes: list[str]  # the rest, from the wrapper's plan: M, N, K and strides
    epilogue: list[str]  # after the K loop: loads of the other inputs, statements on acc, stores


def matmul_kernel(graph: FrameGraph, roles: list[str], names: Names, params: list[str],
                  a_idx: int, b_idx: int) -> MatmulKernel:
    """The epilogue after the grouped, K-looped tl.dot (which the template writes)."""
    refusal = epilogue_refusal(graph, a_idx, b_idx)
    if refusal is not None:
        unsupported(refusal)
    epi_inputs = sorted({graph.node(i).attrs["index"] for i in graph.live() if graph.node(i).op == "input"} - {a_idx, b_idx})
    args, launch, sizes = _arguments(roles, names, params, a_idx, b_idx, epi_inputs)
    return MatmulKernel(args, launch, sizes, _epilogue(graph, roles, names, a_idx, b_idx))


def epilogue_refusal(graph: FrameGraph, a_idx: int, b_idx: int) -> str | None:
    """Why the epilogue cannot run on the accumulator tile, or None: it may only compute per element
    of the output from the accumulator and other inputs."""
    live = graph.live()
    for n in graph.nodes:
        if n.id not in live or n.op in ("param", "const", "mm"):
            continue
        if n.op == "ncols" or n.op in ("sum", "max", "min"):
            return "a reduction after a matmul"
        if n.op == "input" and n.attrs["index"] in (a_idx, b_idx) and \
                n.id in {u for m in graph.nodes if m.op != "mm" and m.id in live for u in m.args}:
            return "a matmul operand also used in the epilogue"
    for oid in graph.outputs:
        if graph.node(oid).op != "mm" and not _depends_on_mm(graph, oid):
            return "an output that does not depend on the matmul"
    return None


def _arguments(roles: list[str], names: Names, params: list[str], a_idx: int, b_idx: int,
               epi_inputs: list[int]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """(the kernel's arguments with comments, the launch's tensors and params, its sizes)."""
    a, b = names.inputs[a_idx], names.inputs[b_idx]
    args = [(f"{a}_ptr", f"input {a}: [M, K]"), (f"{b}_ptr", f"input {b}: [K, N] (strided)")]
    launch = [a, b]
    what = {"full": "[M, N] (strided, 0 where broadcast)", "col": "one value per column n",
            "row": "one value per row m", "scalar": "a single value"}
    for i in epi_inputs:
        nm = names.inputs[i]
        args.append((f"{nm}_ptr", f"epilogue input {nm}: {what[roles[i]]}"))
        launch.append(nm)
    for name in names.outputs:
        args.append((f"{name}_ptr", f"output {name}: [M, N], contiguous"))
        launch.append(name)
    for p in params:
        args.append((p, f"scalar param {p}"))
        launch.append(p)
    args += [("M", "rows of a and of the output"), ("N", "columns of b and of the output"),
             ("K", "the reduction dimension")]
    sizes = ["M", "N", "K"]
    args += [("stride_am", f"{a}: element strides"), ("stride_ak", ""),
             ("stride_bk", f"{b}: element strides (a transposed view when the reference uses {b}.T)"),
             ("stride_bn", "")]
    sizes += ["stride_am", "stride_ak", "stride_bk", "stride_bn"]
    for i in epi_inputs:
        nm = names.inputs[i]
        if roles[i] in ("full", "row"):
            args.append((f"stride_{nm}_m", f"{nm}: element stride along M"))
            sizes.append(f"{nm}_strides[0]")
        if roles[i] in ("full", "col"):
            args.append((f"stride_{nm}_n", f"{nm}: element stride along N"))
            sizes.append(f"{nm}_strides[1]")
    args += [("BLOCK_M: tl.constexpr", "output tile rows"), ("BLOCK_N: tl.constexpr", "output tile columns"),
             ("BLOCK_K: tl.constexpr", "reduction step"),
             ("GROUP_SIZE_M: tl.constexpr", "row-blocks per group (L2 reuse of b)"),
             ("INPUT_PRECISION: tl.constexpr", 'fp32 products: "tf32x3" on NVIDIA GPUs (or "tf32" where allowed), "ieee" elsewhere'),
             ("UPCAST: tl.constexpr", "multiply in fp32 (bf16 under the CPU interpreter only)")]
    return args, launch, sizes


def _epilogue(graph: FrameGraph, roles: list[str], names: Names, a_idx: int, b_idx: int) -> list[str]:
    """Loads of the other inputs, one statement per node on the accumulator `acc`, the stores."""
    live = graph.live()
    epilogue: list[str] = []

    def var(n: Node) -> str:
        if n.op == "mm":
            return "acc"
        if n.op == "input":
            return names.values[n.attrs["index"]]
        if n.op == "param":
            return n.attrs["name"]
        if n.op == "const":
            return exprs.literal(n.attrs["value"])
        return f"v{n.id}"

    for n in graph.nodes:
        if n.id not in live or n.op in ("param", "const", "mm"):
            continue
        if n.op == "input":
            i = n.attrs["index"]
            if i in (a_idx, b_idx):
                continue
            nm = names.inputs[i]
            up = ".to(tl.float32)" if n.is_float else ""
            load = {
                "col": f"tl.load({nm}_ptr + offs_n * stride_{nm}_n, mask=n_mask)[None, :]",
                "row": f"tl.load({nm}_ptr + offs_m * stride_{nm}_m, mask=m_mask)[:, None]",
                "full": f"tl.load({nm}_ptr + offs_m[:, None] * stride_{nm}_m + offs_n[None, :] * stride_{nm}_n, mask=mask)",
                "scalar": f"tl.load({nm}_ptr)",
            }[roles[i]]
            epilogue.append(f"{names.values[i]} = {load}{up}")
            continue
        arg_nodes = [graph.node(x) for x in n.args]
        epilogue.append(f"v{n.id} = {exprs.pointwise(n, [var(x) for x in arg_nodes], arg_nodes)}")
    for k, oid in enumerate(graph.outputs):
        name = names.outputs[k]
        val = var(graph.node(oid))
        epilogue.append(f"tl.store({name}_ptr + offs_m[:, None] * N + offs_n[None, :], "
                    f"{val}.to({name}_ptr.dtype.element_ty), mask=mask)")
    return epilogue


def _depends_on_mm(graph: FrameGraph, oid: int) -> bool:
    stack, seen = [oid], set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        if graph.node(i).op == "mm":
            return True
        stack.extend(graph.node(i).args)
    return False
