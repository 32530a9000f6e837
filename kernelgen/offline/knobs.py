"""Knob spaces per family and the default values baked into a generated file.

"auto" means: the generated file keeps its shape-aware heuristic for that knob. Every other value
is baked in as a constant. The optimize loop changes one knob at a time from `knob_space`.
"""

from __future__ import annotations

from typing import Any

# Pointwise: ~4096 elements (16 KB of fp32) per program gives each H100 SM enough loads in flight
# to approach copy bandwidth; the Triton 2-D broadcast kernel measured 87-100% of a 3.0 TB/s copy.
POINTWISE_TILE = 4096
# Row programs: a row of up to 8192 elements stays in registers (8192 fp32 over 8-16 warps is
# 16-32 registers per value); longer rows loop over 4096-column blocks, one pass per reduction.
ROW_MAX_SINGLE = 8192
ROW_LOOP_BLOCK = 4096
# Small rows: pack rows into one program until the tile holds ~2048 elements (a 64-wide softmax
# with one row per program would leave 15/16 of every warp idle).
ROW_TILE = 2048

SPACES: dict[str, dict[str, list[Any]]] = {
    "pointwise": {
        "BLOCK_SIZE": ["auto", 512, 1024, 2048, 4096, 8192],
        "num_warps": ["auto", 2, 4, 8, 16],
        "num_stages": ["auto", 1, 2, 3],
        "grid": ["2d", "1d"],
        "eviction": ["none", "evict_first"],
        "autotune": [False, True],
    },
    "rows": {
        "MAX_SINGLE_PASS": ["auto", 2048, 4096, 8192, 16384, 32768],
        "LOOP_BLOCK": ["auto", 1024, 2048, 4096, 8192],
        "ROW_TILE": ["auto", 512, 1024, 2048, 4096, 8192],
        "num_warps": ["auto", 1, 2, 4, 8, 16, 32],
        "num_stages": ["auto", 1, 2, 3, 4],
        "eviction": ["none", "evict_first"],
        "autotune": [False, True],
    },
    "matmul": {
        "BLOCK_M": ["auto", 64, 128, 256],
        "BLOCK_N": ["auto", 64, 128, 256],
        "BLOCK_K": ["auto", 32, 64, 128],
        "GROUP_SIZE_M": [8, 1, 4, 16],
        "num_warps": ["auto", 4, 8],
        "num_stages": ["auto", 2, 3, 4, 5],
        "autotune": [False, True],
    },
}

DEFAULTS: dict[str, dict[str, Any]] = {kind: {k: v[0] for k, v in space.items()} for kind, space in SPACES.items()}


def space_kind(family: str) -> str:
    if family == "pointwise":
        return "pointwise"
    if family == "matmul":
        return "matmul"
    return "rows"


def resolve(family: str, knobs: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults overridden by `knobs`; unknown knobs or values outside the space are an error."""
    kind = space_kind(family)
    out = dict(DEFAULTS[kind])
    for k, v in (knobs or {}).items():
        if k not in SPACES[kind]:
            raise ValueError(f"unknown knob {k!r} for the {family} family; known: {', '.join(SPACES[kind])}")
        allowed = SPACES[kind][k]
        ok = v in allowed or (isinstance(v, int) and not isinstance(v, bool) and any(isinstance(a, int) and not isinstance(a, bool) for a in allowed) and v > 0)
        if not ok:
            raise ValueError(f"knob {k}={v!r} is not one of {allowed}")
        out[k] = v
    return out
