"""The frame graph: the front end's IR as the pointwise, row and matmul families see it
(kernelgen.offline.frame.project builds it).

The reference is a list of `Node`s in topological order. Every node knows its `space`:
- "full":   one value per element of the broadcast output frame ([..., n_cols]),
- "row":    one value per row (the result of a reduction over the last dimension),
- "scalar": the same value everywhere (a literal, a scalar param, the row length).
The code generators only have to map each node to one Triton expression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPACE_RANK = {"scalar": 0, "row": 1, "full": 2}


@dataclass
class Node:
    id: int
    op: str  # "input", "param", "const", "ncols", a pointwise op, "sum"/"max"/"min", "mm"
    args: tuple[int, ...] = ()  # ids of operand nodes
    attrs: dict[str, Any] = field(default_factory=dict)  # index, name, value, dtype, ...
    space: str = "full"
    dtype: str = "float32"  # the torch dtype the reference gives this value (float math runs in fp32)

    @property
    def is_float(self) -> bool:
        return self.dtype in ("float16", "bfloat16", "float32", "float64")


@dataclass
class FrameGraph:
    nodes: list[Node]
    outputs: list[int]  # node ids, in the order the reference returns them

    def node(self, i: int) -> Node:
        return self.nodes[i]

    def live(self) -> set[int]:
        """Ids the outputs depend on (dead branches of a decomposition are dropped)."""
        seen: set[int] = set()
        stack = list(self.outputs)
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            stack.extend(self.nodes[i].args)
        return seen


def per_row(nodes: list[Node], node_id: int, memo: dict[int, bool | None] | None = None) -> bool | None:
    """True for a reduction's per-row value and what is computed from such values alone, False for
    anything that reads an input or a matmul, None for a scalar (a param, a literal). The memo keeps
    a walk linear where values are shared (x * x * x ... would otherwise be walked 2^depth times)."""
    memo = {} if memo is None else memo
    if node_id not in memo:
        n = nodes[node_id]
        if n.op in ("sum", "max", "min"):
            memo[node_id] = True
        elif n.op in ("input", "mm"):
            memo[node_id] = False
        else:
            kinds = [per_row(nodes, a, memo) for a in n.args]
            memo[node_id] = False if False in kinds else (True if True in kinds else None)
    return memo[node_id]
