"""Shape classes: which perf cases count as alike when one operator's measurements advise another's.

A case is read as its first input seen as [rows, cols] (the product of the leading dims, the last
dim): what the row families' algorithm, tile and grid depend on. Classes are powers of two of both,
rounded; a remembered effect applies to a case within RECALL_DISTANCE of it (a factor of 4 in rows
times cols, e.g. 4096x50257 recalls 2048x32768 but not 32x32000).
"""

from __future__ import annotations

import math

RECALL_DISTANCE = 2.0  # |log2 rows ratio| + |log2 cols ratio|


def frame(shapes: dict[str, list[int]]) -> tuple[int, int]:
    first = next(iter(shapes.values()), []) or [1]
    cols = max(first[-1], 1)
    return max(math.prod(first[:-1]), 1), cols


def shape_class(shapes: dict[str, list[int]]) -> str:
    rows, cols = frame(shapes)
    return f"rows~2^{round(math.log2(rows))} cols~2^{round(math.log2(cols))}"


def distance(a: dict[str, list[int]], b: dict[str, list[int]]) -> float:
    (ra, ca), (rb, cb) = frame(a), frame(b)
    return abs(math.log2(ra / rb)) + abs(math.log2(ca / cb))
