"""The epilogue of a tile stage (a matmul's or a convolution's): the stage's values computed on the
fp32 accumulator tile `acc` [BLOCK_M, BLOCK_N], then one rounding store per output. The stages differ
only in how a port's address and an index dim are written, which they pass in."""

from __future__ import annotations

from typing import Callable

from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.access import Port
from kernelgen.offline.stages.emit_values import is_scalar_leaf, pointwise, var
from kernelgen.offline.stages.program import Buffer, Stage


def tile_epilogue(g: Graph, st: Stage, ps: list[Port], buffers: dict[str, Buffer], address: Callable[[Port], str],
                  index: Callable[[int], str]) -> list[str]:
    load_port = {p.value: p for p in ps if not p.store}
    L: list[str] = []
    for u in st.values:
        v = g[u]
        if u == st.anchor:
            L.append(f"v{u} = acc")
        elif u in load_port:
            up = ".to(tl.float32)" if v.is_float else ""
            L.append(f"v{u} = tl.load({address(load_port[u])}, mask=mask, other=0){up}")
        elif is_scalar_leaf(v):
            continue
        elif v.op == "iota":
            L.append(f"v{u} = {index(next(f for f in st.maps[u] if f is not None))}")
        elif v.op == "view":
            L.append(f"v{u} = {var(g, v.args[0])}")
        else:
            L.append(f"v{u} = {pointwise(g, v)}")
    for p in ps:
        if not p.store:
            continue
        val = var(g, p.value)
        if st.spaces.get(p.value) != "full" or is_scalar_leaf(g[p.value]):
            val = f"tl.broadcast_to({val}, [BLOCK_M, BLOCK_N])"
        if buffers[p.buffer].kind == "temp":
            # an fp32 buffer for a later stage, rounded as the reference materialises the tile's result
            # in the call's 16-bit dtype (a group norm of it divides that rounding by the group's
            # deviation: kept in fp32, KernelBench level2/30 differed from eager by 2e-3)
            L.append(f"{p.name}_val = {val}")
            L.append(f"if ROUND == 1:\n        {p.name}_val = {p.name}_val.to(tl.float16).to(tl.float32)")
            L.append(f"if ROUND == 2:\n        {p.name}_val = {p.name}_val.to(tl.bfloat16).to(tl.float32)")
            val = f"{p.name}_val"
        L.append(f"tl.store({address(p)}, {val}.to({p.name}_ptr.dtype.element_ty), mask=mask)")
    return L


def computes(g: Graph, st: Stage) -> bool:
    """Whether the epilogue computes on the accumulator (a bias, an activation), not only stores it: its
    values beside the accumulator's raise a tile's registers (kernelgen.offline.launch.conv_tiles)."""
    return any(u != st.anchor and u not in st.loads and g[u].op not in ("view", "iota") and not is_scalar_leaf(g[u])
               for u in st.values)
