"""How a stage's kernel names and addresses what it reads and writes.

Each access (a load or a store of a buffer through views) gets a pointer argument, an element
offset when its views slice or flip, and one stride per frame *group* it walks along (the wrapper
merges frame dims into groups at run time: kernelgen.offline.stages.frames.groups). A stride the access
never walks (a broadcast) is not an argument at all: it is 0, so its term is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.program import Access, Buffer, Stage

MOVES = ("slice", "select", "flip")


@dataclass
class Port:
    """One access of a stage, as the kernel sees it."""

    name: str  # prefix of its arguments: `{name}_ptr`, `{name}_off`, `{name}_s{g}`
    buffer: str
    access: Access
    value: int  # the IR value loaded or stored
    store: bool
    groups: list[int]  # the frame groups it walks along (others: stride 0)
    offset: bool  # its views may move the start (slice, select, flip)

    def stride(self, g: int) -> str:
        return f"{self.name}_s{g}"

    def term(self, g: int, index: str) -> str | None:
        return f"{index} * {self.stride(g)}" if g in self.groups else None


def walked_groups(stage: Stage, access: Access, buffer: Buffer) -> list[int]:
    """The groups whose frame dims the access runs along (a dim of size > 1 mapped to them)."""
    from kernelgen.offline.stages.frames import contiguous_view_strides

    got = contiguous_view_strides(buffer.shape, access.views)
    shape = got[0] if got is not None else None
    dims = {f for d, f in enumerate(access.map) if f is not None and (shape is None or not S.is_one(shape[d]))}
    return [gi for gi, grp in enumerate(stage.groups) if dims & set(grp)]


def ports(g: Graph, stage: Stage, buffers: dict[str, Buffer]) -> list[Port]:
    out: list[Port] = []
    taken: dict[str, int] = {}

    def name_for(buffer: str) -> str:
        n = taken.get(buffer, 0)
        taken[buffer] = n + 1
        return buffer if n == 0 else f"{buffer}_{n}"

    for u, acc in sorted(stage.loads.items()):
        out.append(Port(name_for(acc.buffer), acc.buffer, acc, u, False, walked_groups(stage, acc, buffers[acc.buffer]),
                        any(step[0] in MOVES for step in acc.views)))
    for u, acc in stage.stores:
        out.append(Port(name_for(acc.buffer), acc.buffer, acc, u, True, walked_groups(stage, acc, buffers[acc.buffer]),
                        any(step[0] in MOVES for step in acc.views)))
    return out


class StageKernel(Protocol):
    """What the file needs of any stage's kernel (the engine's TileKernel and MatmulKernel, a family's
    own: kernelgen.offline.stages.anchors): its name and text, and how it is called."""

    name: str
    kind: str
    params: list[tuple[str, str]]  # (argument, comment)
    body: list[str]
    ports: list[Port]
    sizes: list[int]  # `size` values passed as c<id>
    params_used: list[str]
