"""The data the scheduler hands the code generators: buffers, how a stage reads and writes them, and
the stages themselves, in launch order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from kernelgen.offline.launch import ConvTiles, Launch

Map = tuple  # per dim of a value: the frame dim it runs along, or None (a size-1 dim)
ViewStep = tuple  # (kind, attrs dict, shape after the step)


@dataclass
class Buffer:
    """A tensor the wrapper holds: a spec input, an output, or a temporary between stages."""

    name: str
    kind: str  # input | output | temp
    shape: tuple  # sympy exprs
    index: int = -1  # input index, or output index
    dtype: Optional[str] = None  # temps: fixed; outputs: None (the output dtype table decides)
    value: int = -1  # the IR value it holds (outputs and temps)
    parts: list[tuple[int, Any]] = field(default_factory=list)  # a cat: (dim offset expr, part value)


@dataclass
class Access:
    """How a stage reaches a buffer: the buffer seen through view steps, each of its dims mapped to a
    frame dim (strides along frame dims come out of that in the wrapper, 0 where it broadcasts)."""

    buffer: str
    views: list[ViewStep]
    map: Map


@dataclass
class Stage:
    id: int
    kind: str  # pointwise | reduce | matmul | scan | conv
    frame: tuple  # sympy exprs: the iteration space
    reduced: tuple[int, ...] = ()  # frame dims reduced over (reduce), or the scanned dim (scan)
    values: list[int] = field(default_factory=list)  # IR values computed here, in order (leaves included)
    loads: dict[int, Access] = field(default_factory=dict)  # leaf value -> its buffer access
    maps: dict[int, Map] = field(default_factory=dict)  # every value here -> its frame map
    stores: list[tuple[int, Access]] = field(default_factory=list)  # value -> where it is written
    anchor: int = -1  # the mm, conv or scan value
    unmergeable: set[int] = field(default_factory=set)  # frame dims whose own index the kernel needs
    spaces: dict[int, str] = field(default_factory=dict)  # value -> full | row | scalar (kernelgen.offline.stages.frames)
    groups: list[list[int]] = field(default_factory=list)  # frame dims merged into one loop dim, in order
    operands: list[Access] = field(default_factory=list)  # a matmul's a and b; a convolution's input and weight


@dataclass
class Program:
    """A reference as launches: the buffers, the stages in order, and what the wrapper returns."""

    buffers: dict[str, Buffer]
    stages: list[Stage]
    returns: list[tuple[str, list[ViewStep]]]  # per output: a buffer, and the views of it returned


class StageKnobs(Protocol):
    """The knobs a program's file reads (the nd and conv families' models both have them): the tile
    stages' path and tiles, the matmul stages' tiles, and the split of reductions with few kept blocks."""

    MAX_SINGLE_PASS: Optional[int]
    ROW_TILE: Optional[int]
    num_warps: Optional[int]
    num_stages: Optional[int]
    BLOCK_M: Optional[int]
    BLOCK_N: Optional[int]
    BLOCK_K: Optional[int]
    GROUP_SIZE_M: int
    pack: Optional[bool]
    split: Optional[bool]
    SPLIT_PER_SM: Optional[int]


@dataclass(frozen=True)
class StageLaunch:
    """One stage's launch at a case: a tile stage's Launch, or a matmul stage's tiles at M x N x K."""

    stage: int
    kind: str  # pointwise | reduce | scan | matmul | conv
    launch: Optional[Launch] = None  # tile stages: block_r = BLOCK_K (kept), block_c = BLOCK_R (reduced)
    tiles: Optional[tuple[int, int, int, int, int, int]] = None  # matmul, conv: BLOCK_M, N, K, GROUP_SIZE_M, warps, stages
    mnk: Optional[tuple[int, int, int]] = None
    conv: Optional[ConvTiles] = None  # a convolution stage's launch
