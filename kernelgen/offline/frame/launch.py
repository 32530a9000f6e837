"""What the pointwise and row families' launch models share besides kernelgen.offline.launch:
persistent grids, the device facts a generated file assumes where it cannot ask, and the frame the
wrapper collapses contiguous inputs to (tests/offline/test_offline_pruning.py holds the models to
the generated files' own answers)."""

from __future__ import annotations

import math

# Persistent grids: about 32 resident warps per SM (half of Hopper's 64), i.e. 32 // num_warps
# programs per SM, each looping over tiles; under the CPU interpreter 4 "SMs" (no device to ask).
PERSISTENT_WARPS_PER_SM = 32
INTERPRETER_SMS = 4
# An online row's write pass re-reads what its statistics pass read; a persistent online grid keeps
# the rows in flight within half the device's L2 (this much where the device reports none: an H100's).
DEFAULT_L2_BYTES = 50 * 2**20


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
