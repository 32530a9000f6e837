"""A tensor's fingerprint: how the judge and a worker agree that they hold the same inputs without
sending them again (a worker draws a timed case's inputs on its own device from the judge's seed, and
the judge checks the digest it returns against its own draw). Both sides import this.
"""

from __future__ import annotations

from typing import Any


def digest(tensors: list[Any]) -> list[list[Any]]:
    """Per tensor: dtype, shape, strides and two float64 sums (plain and L2 norm; an integer sum for
    integer tensors). Equal draws give equal digests; a different generator's numbers do not."""
    import torch

    out: list[list[Any]] = []
    for t in tensors:
        if t.dtype.is_floating_point:
            sums = [float(torch.sum(t, dtype=torch.float64)), float(torch.linalg.vector_norm(t, 2, dtype=torch.float64))]
        else:
            sums = [float(torch.sum(t, dtype=torch.int64))]
        out.append([str(t.dtype), list(t.shape), list(t.stride()), sums])
    return out


def same_digest(claimed: Any, ours: list[list[Any]]) -> bool:
    """Whether a worker's digest (untrusted: any shape at all) describes the judge's own tensors. The
    sums agree to 1e-9: the same numbers, reduced on another GPU, may round differently."""
    try:
        if len(claimed) != len(ours):
            return False
        for c, o in zip(claimed, ours):
            if c[:3] != o[:3] or len(c[3]) != len(o[3]):
                return False
            if any(abs(float(a) - b) > 1e-9 * max(1.0, abs(b)) for a, b in zip(c[3], o[3])):
                return False
    except (TypeError, ValueError, IndexError, KeyError):
        return False
    return True
