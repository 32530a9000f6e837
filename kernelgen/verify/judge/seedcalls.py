"""The replays of one accuracy seed (guarded, second fill, plain, ablated) and the inputs before them, sent
to the replay worker: in one batch (one round trip) when its arena holds every replay's outputs side by
side, else one by one as their replies are asked for. Each answer is the same either way: the same
requests, the worker handling each as if it came alone.

A case larger than the worker's arena gets a larger arena first (the worker reads every value out of
it into memory of its own, so replacing the arena loses nothing): the arena is sized from the spec's
cases when the judge starts, and level 1's 36 (RMSNorm) and 42 (max pooling) stopped with
`ProtocolError: 159089840 bytes at offset 0 do not fit the 67108864-byte arena` on a generated case.
"""

from __future__ import annotations

from typing import Any

from kernelgen.verify.judge.judge import ALIGN, Judge
from kernelgen.verify.judge.session import WorkerFailure
from kernelgen.verify.protocol import ProtocolError, Reply, storage_span

SLACK = 16 << 20  # arena room beyond what one case's values take


def aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def out_bytes(expected: tuple) -> int:
    """What the judge reads back of one call: twice each output (a padded layout is allowed), aligned."""
    return sum(aligned(2 * e.numel() * e.element_size() + 4096) for e in expected)


def in_bytes(inputs: list[Any]) -> int:
    return sum(aligned(storage_span(t) * t.element_size()) for t in inputs)


def make_room(worker: Any, inputs: list[Any], expected: tuple) -> None:
    """A larger arena for this worker where one call of this case would not fit its own: inputs, their
    copies after the call, and the outputs (a call one by one gets half the arena for its outputs)."""
    need = 2 * (in_bytes(inputs) + out_bytes(expected)) + SLACK
    if worker.arena.size < need:
        worker.attach(need)


class SeedCalls:
    def __init__(self, judge: Judge, worker: Any, key: str, inputs: list[Any], expected: tuple,
                 calls: list[dict[str, Any]], where: str):
        """`calls`: the requests (kernelgen.verify.judge.judge.Judge.replay_request), their output room
        filled in here."""
        self.judge, self.worker, self.key, self.calls, self.where = judge, worker, key, calls, where
        outs, ins = out_bytes(expected), in_bytes(inputs)
        self.replies: list[Reply] | None = None
        try:
            make_room(worker, inputs, expected)
            if len(calls) * outs + ins > worker.arena.size:
                judge.put(worker, key, inputs)
                return
            requests, offset = [judge.stage(worker, key, inputs)], 0
            for call in calls:
                limit = outs + (ins if call.get("return_inputs") else 0)
                requests.append({**call, "out_offset": offset, "out_limit": outs})
                offset += limit
        except ProtocolError as e:  # the judge's own side of the transfer: never the candidate's doing
            raise WorkerFailure("error", f"{where}: the inputs could not be sent to the worker: {e}") from None
        replies = judge.batch(worker, requests)
        if not replies[0].ok:
            raise WorkerFailure("error", f"{where}: the worker could not take the inputs: {replies[0].error}")
        self.replies = replies[1:]

    def reply(self, i: int) -> Reply | None:
        """Call i's reply; None when an earlier call of the batch failed and it was not made."""
        if self.replies is not None:
            return self.replies[i] if i < len(self.replies) else None
        return self.worker.request({**self.calls[i], "out_offset": 0, "out_limit": self.worker.arena.size // 2})
