"""What the pointwise and row families' launch models share (each family's launch.py mirrors its
generated `_launch_config` in Python, for the pruning rules, which reason about a value before
anything is compiled; tests/offline/test_offline_pruning.py holds the two to the same answers)."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Persistent grids: about 32 resident warps per SM (half of Hopper's 64), i.e. 32 // num_warps
# programs per SM, each looping over tiles; under the CPU interpreter 4 "SMs" (no device to ask).
PERSISTENT_WARPS_PER_SM = 32
INTERPRETER_SMS = 4
# An online row's write pass re-reads what its statistics pass read; a persistent online grid keeps
# the rows in flight within half the device's L2 (this much where the device reports none: an H100's).
DEFAULT_L2_BYTES = 50 * 2**20


def next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Launch:
    """One launch of a row or pointwise kernel."""

    path: str  # rows: single | looped | online | split; pointwise: 2d | 1d
    block_r: int  # rows per program (1 for a flat 1-D tile)
    block_c: int  # columns per block (the 1-D tile's elements)
    num_warps: int
    tiles: int  # row blocks or tiles of work
    programs: int  # the grid: tiles, capped by a persistent grid; split: rows x chunks
    chunks: int = 1  # split rows: programs per row
    num_stages: int | None = None

    @property
    def tile(self) -> int:
        return self.block_r * self.block_c

    @property
    def per_thread(self) -> int:
        """Elements of a tile each thread holds (fp32 registers per live value)."""
        return max(1, self.tile // (32 * self.num_warps))


def default_warps(tile: int) -> int:
    """Warps for a tile of this many elements: Liger-Kernel's calculate_settings steps."""
    return 4 if tile <= 2048 else (8 if tile <= 8192 else 16)


def persistent_cap(num_warps: int, sm_count: int) -> int:
    return max(1, PERSISTENT_WARPS_PER_SM // num_warps) * sm_count


def collapsed_frame(shapes: list[list[int]], keep_last: bool) -> tuple[int, int]:
    """(rows, cols) of the frame the generated wrapper makes of contiguous inputs of these shapes
    (its `_frame`: size-1 dims dropped, dims every input walks as one merged)."""
    import torch  # ~1 s: only when a launch is modelled, not when kernelgen.offline is imported

    out = tuple(torch.broadcast_shapes(*[tuple(s) for s in shapes]))
    strides = []
    for s in shapes:
        contiguous = [math.prod(s[i + 1:]) for i in range(len(s))]
        lead = len(out) - len(s)
        strides.append([0] * lead + [0 if d == 1 and t != 1 else st for d, t, st in zip(s, out[lead:], contiguous)])
    dims = [(size, tuple(st[d] for st in strides)) for d, size in enumerate(out)]
    last = dims.pop() if keep_last and dims else None
    merged: list[tuple[int, tuple]] = []
    for size, st in dims:
        if size == 1:
            continue
        if merged and all(p == q * size for p, q in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * size, st)
        else:
            merged.append((size, st))
    if last is not None:
        merged.append(last)
    sizes = [size for size, _ in merged] or [1]
    return max(math.prod(sizes[:-1]), 1), max(sizes[-1], 1)
