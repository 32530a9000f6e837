"""What a measurement holds on the device, and when: so that the judge, its workers and the peer
libraries' process of one operator fit its GPU together (and the batch's estimate of that,
kernelgen.batch.footprint, can say what they hold).

For a perf case with inputs I and outputs O (level 1's ReLU: one 6.4 GB input, one 6.4 GB output),
while its kernel is timed (kernelgen.verify.judge.timed):

- the judge holds the case's inputs and eager's outputs (I + O) throughout; at the spot check the
  kernel's output read back (O), the truth in float64 and the comparison's float64 slabs; at a read
  of a timed call, the rotated inputs (I), eager's outputs on them (O), the call's output read back
  (O) and a sampled truth. What its allocator keeps after each (`release_cache`) is given back
  before a worker needs the room, and the spot check's truth is let go once the reads use rotated
  inputs with truths of their own;
- the recording worker, I + 2 O (a call's outputs and scratch), released before the replay worker
  takes the inputs: the two never hold them at once (kernelgen.verify.judge.plans);
- the replay worker, I + 3 O: the inputs, the output being made, the kept call's, the kernel's scratch;
- the peer libraries' process, its own inputs, the reference's outputs and a peer's (I + 2 O and the
  reference's intermediates): beside the kernel's timings where a case's inputs are small, after them
  where they take LATE_PEERS_BYTES or more (`peers_after_kernel`).
"""

from __future__ import annotations

from typing import Any

LATE_PEERS_BYTES = 4 << 30  # a case's inputs from which the peers are timed after the kernel, not beside it


def release_cache(judge: Any) -> None:
    """Give what the judge's caching allocator holds but no tensor uses back to the device, before a
    worker needs the room: a read-back output, a rotated case's eager outputs and truth, the spot
    check's truth are freed as tensors but stay reserved in this process until emptied."""
    import torch

    backend = getattr(torch, judge.device.kind, None) if judge.device.kind != "cpu" else None
    if backend is not None and hasattr(backend, "empty_cache"):
        backend.empty_cache()


def case_input_bytes(spec: Any, case: dict[str, list[int]], dtype: str) -> int:
    """Bytes of one case's inputs in `dtype`, from the spec alone (nothing drawn)."""
    from kernelgen.verify.protocol import DTYPE_SIZES

    total = 0
    for inp in spec.inputs:
        n = 1
        for d in case[inp.name]:
            n *= d
        total += n * DTYPE_SIZES.get(spec.input_dtype(inp, dtype), 8)
    return total


def peers_after_kernel(spec: Any, cells: list[tuple[int, dict[str, list[int]], str]]) -> bool:
    """Whether the peer libraries' process starts only after the kernel's timings: where a case's
    inputs take LATE_PEERS_BYTES or more. Started beside them, it holds its own inputs, the reference's
    outputs and the peer's (3 x 6.4 GB for level 1's ReLU) while the judge and the replay worker hold
    theirs: an 80 GB H100 ran out of memory there (2026-11-27). Its start (imports, FlagGems' compiles)
    then no longer overlaps the kernel's timings: seconds, on problems whose timings take longer."""
    return any(case_input_bytes(spec, case, dtype) >= LATE_PEERS_BYTES for _, case, dtype in cells)
