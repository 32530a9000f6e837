"""The judge's replay worker: one per judge (started beside its first recording worker, so the two
start together), in the same sandbox, that never imports a candidate's module. It defines each kernel
file's @triton.jit functions from the judge's extraction of the file (kernelgen.verify.replay.extract),
and holds the plans the judge validated, by id. Every accuracy check, timed output and timing comes
from here; the candidate's own worker only records.

One replay worker serves every kernel of the judge (the candidate and the best are then replayed by one
loop in one process, and a perf case's inputs are held once): nothing of a candidate runs in it but its
device code, which Triton compiled from functions its front end accepted.

A kernel KernelGen's offline generator wrote is compiled once: its recording (the shared worker of
KernelGen's own kernels) compiles it, and the replay worker is seeded with that worker's Triton cache
before it replays the plan (Triton's key is the jit function's source, the same in the extracted
module). An untrusted kernel's recording worker's cache is never seeded here: what a candidate's Python
leaves there could stand for another kernel's binary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelgen.verify.judge.compilecache import seed, store_folder
from kernelgen.verify.judge.session import WorkerFailure, WorkerSession, spare_worker
from kernelgen.verify.plan import Plan
from kernelgen.verify.replay.extract import ExtractError, Extracted, extract


@dataclass
class KeptReplay:
    """A replay worker between two commands on one kernel (kernelgen.verify.judge.service.pool): no
    inputs, the kernels it defined (slots) and the plans it holds (ids), with their binaries loaded."""

    worker: WorkerSession
    sent: set[str]
    plans: set[str]

    def close(self) -> None:
        self.worker.close()


class Replayer:
    def __init__(self, judge: Any, *, prestart: bool = False, spare: WorkerSession | None = None):
        self.judge = judge
        self._spare = spare if spare is not None else (spare_worker(judge.device, role="replay") if prestart else None)
        self._worker: WorkerSession | None = None
        self._extracted: dict[str, Extracted | ExtractError] = {}  # kernel sha256 -> its replay module, or why none
        self._sent: set[str] = set()  # kernel slots defined in the current worker
        self._plans: set[str] = set()  # plan ids held by the current worker

    def worker(self) -> WorkerSession:
        """The live replay worker (a new one, its kernels and plans sent again, if the last one died)."""
        w = self._worker
        if w is not None and not w.closed:
            return w
        self._sent, self._plans = set(), set()
        spare, self._spare = self._spare, None
        if spare is not None and spare.take("replays", self.judge.arena_bytes):
            w = spare
        else:
            w = WorkerSession(self.judge.device, arena_bytes=self.judge.arena_bytes, label="replays", role="replay")
        w.compile_store = store_folder(self.judge.spec.name, "replay")
        seed(w.compile_store, w.scratch / "triton")
        self._worker = w
        return w

    def prestart(self) -> None:
        """Start the replay worker now, beside whatever the judge does first (a judge given a warm
        recording worker has no spare of either kind; started on first use, this one's start -- a
        CUDA context, ~1 s on an H100 -- came after the recording instead of beside it)."""
        if self._spare is None and not self.live():
            self._spare = spare_worker(self.judge.device, role="replay")

    def release(self) -> KeptReplay | None:
        """The live replay worker taken out of this judge, its inputs dropped, with what it holds;
        None when there is none or it cannot be emptied. The service keeps it beside the kernel's
        recording worker: the next `bench` or `test` of that kernel then starts no replay worker and
        loads no binary again (a second one started per command made `bench` 0.7-1.1 s slower than
        before record and replay on an H100, 2026-12-08)."""
        w, self._worker = self._worker, None
        if w is None or w.closed or w.proc.poll() is not None:
            return None
        try:
            emptied = w.request({"op": "clear"}).ok
        except WorkerFailure:
            emptied = False
        if not emptied:
            w.close()
            return None
        kept = KeptReplay(w, self._sent, self._plans)
        self._sent, self._plans = set(), set()
        return kept

    def adopt(self, kept: KeptReplay) -> bool:
        """Take a kept replay worker (`release`); False, and it is closed, when it died meanwhile or
        this judge already has one."""
        w = kept.worker
        if self.live() or not w.take("replays", self.judge.arena_bytes):  # take: alive, with this judge's arena
            w.close()
            return False
        if self._spare is not None:
            self._spare.close()
            self._spare = None
        self._worker, self._sent, self._plans = w, set(kept.sent), set(kept.plans)
        return True

    def live(self) -> bool:
        """Whether a replay worker is running (nothing to tidy in one that is not)."""
        return self._worker is not None and not self._worker.closed

    def extracted(self, kernel: Any) -> Extracted:
        """The replay module of `kernel` (ExtractError when a replay cannot define it)."""
        found = self._extracted.get(kernel.sha256)
        if found is None:
            try:
                found = extract(kernel.source)
            except ExtractError as e:
                found = e
            self._extracted[kernel.sha256] = found
        if isinstance(found, ExtractError):
            raise found
        return found

    def define(self, kernel: Any) -> str:
        """`kernel`'s @triton.jit functions defined in the replay worker; their slot."""
        slot = f"r{kernel.sha256[:16]}"
        w = self.worker()
        if slot not in self._sent:
            reply = w.request({"op": "kernels", "slot": slot, "filename": kernel.name,
                               "source": self.extracted(kernel).source})
            if not reply.ok:
                raise WorkerFailure("error", f"the replay worker could not define {kernel.name}'s kernels: {reply.error}")
            self._sent.add(slot)
        return slot

    def hold(self, kernel: Any, plan: Plan) -> str:
        """`plan` (validated) held by the replay worker; its id."""
        slot = self.define(kernel)
        plan_id = f"{slot}-{plan.digest()}"
        if plan_id not in self._plans:
            compiled = self.judge.trusted_compiles(kernel)
            if compiled is not None:  # what recording it just compiled: the replay then loads it, not compiles it again
                seed(compiled, self.worker().scratch / "triton")
            reply = self.worker().request({"op": "plan", "plan": plan_id, "slot": slot, "body": plan.model_dump(mode="json")})
            if not reply.ok:
                raise WorkerFailure("error", f"the replay worker refused a plan of {kernel.name}: {reply.error}")
            self._plans.add(plan_id)
        return plan_id

    def close(self) -> None:
        for w in (self._spare, self._worker):
            if w is not None:
                w.close()
        self._spare = self._worker = None
