"""The judge: one operator's trusted process-side state — its spec, its baseline, the inputs it drew —
and the sandboxed workers its candidates are recorded and replayed in.

The candidate never runs here. Its own worker (the recording role) imports it and records what a call
does on the device as a plan (kernelgen.verify.judge.recorded); the judge's replay worker
(kernelgen.verify.judge.replayer), which never imports a candidate, runs that plan on the inputs the
judge drew, and the judge runs the baseline, compares, counts the checks it planned and writes the
verdict (kernelgen.verify.judge.accuracy, kernelgen.verify.judge.performance). Kernels KernelGen's own
offline generator wrote share one long-lived recording worker (compile once, time many); every other
kernel gets a recording worker of its own.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from kernelgen.devices import DeviceInfo
from kernelgen.nodynamo import without_dynamo
from kernelgen.spec import OperatorSpec, torch_dtype
from kernelgen.verify.judge import compilecache
from kernelgen.verify.judge.kernelkey import kernel_key, runtime_digests
from kernelgen.verify.digest import digest, same_digest
from kernelgen.verify.poison import Fill
from kernelgen.verify.protocol import DTYPE_SIZES, OtherValue, Reply, TensorRef
from kernelgen.verify.judge.scrub import scrub
from kernelgen.verify.judge.session import Spares, WorkerFailure, WorkerSession, spare_worker
from kernelgen.verify.judge.staticcheck import check_source

Origin = Literal["offline", "llm", "file"]
ALIGN = 64
MIN_ARENA = 64 << 20
# Perf inputs (and the baseline's outputs on them) kept on the device between timings, in the judge
# and in each worker that timed them: an optimizing judge re-times the same cases every round, and
# moving them through the host arena each time cost ~1.6 s per GiB of inputs and outputs (H100,
# 2026-11-22). Only judges that time repeatedly keep them (`Judge.resident_bytes`, 0 by default),
# and at most this many bytes, since four operators may share one 80 GB GPU (`batch --per-gpu 4`)
# and each keeps them twice (judge and worker); beyond it, cases are drawn and sent per timing.
RESIDENT_BYTES = 3 << 30


@dataclass(frozen=True)
class KernelSource:
    """The exact bytes of a kernel file to judge, and where they came from."""

    source: str
    name: str  # the file name it is known by (<op>_triton.py)
    origin: Origin = "file"

    @property
    def sha256(self) -> str:
        """The key of every verdict and cache on this kernel: its bytes, and the bytes of each KernelGen host
        runtime module it imports (kernelgen.runtime.v1), so that the same file under another runtime is
        judged again. A file that imports none is keyed on its bytes alone, as before."""
        return kernel_key(self.source)

    @property
    def runtime(self) -> list[str]:
        """`<module> <sha256>` of each host runtime module the file imports (the judge records it)."""
        return [f"{m} {d}" for m, d in runtime_digests(self.source)]



def exact_reductions() -> None:
    """The baseline is the oracle: no reduced-precision split-K in its 16-bit matmuls. PyTorch lets
    cuBLAS keep split-K partial sums in bf16/fp16 by default; for a[3, 1071] @ b[1071, 4] in bf16 on
    an H100 that put the reference 0.11 (7 bf16 ulps) off, and an honest fp32-accumulating kernel
    was called wrong. Set in the judge's process only (the perf shapes do not split K)."""
    import torch

    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False


def _nbytes(shape: list[int], dtype: str) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * DTYPE_SIZES.get(dtype, 8)


class Judge:
    def __init__(self, spec: OperatorSpec, device: DeviceInfo, baseline: Callable[..., Any], *,
                 extra_cases: list[dict[str, list[int]]] | None = None, arena_bytes: int | None = None,
                 owns_baseline: bool = True, spare: Spares | None = None, prestart: bool = False,
                 baseline_sha256: str | None = None):
        """`spare` (or `prestart`: started here, before the arena is sized) are the first workers this
        judge needs, its recording and replay workers, already importing torch and starting the device
        while the judge starts.
        `baseline_sha256`: the baseline file's bytes, which key its cached timings (none without)."""
        given = spare.device if spare is not None else None
        if spare is not None and (given is None or (given.kind, given.interpreter, given.pin) !=
                                  (device.kind, device.interpreter, device.pin)):
            spare.close()  # started on a guess of the device that did not hold
            spare = None
        self._spare = spare.record if spare is not None and spare.record is not None else \
            (spare_worker(device) if prestart or spare is not None else None)
        exact_reductions()
        self.spec = spec
        self.device = device
        self.baseline = baseline
        self.baseline_sha256 = baseline_sha256
        self._owns_baseline = owns_baseline
        self.arena_bytes = arena_bytes or self._arena_size(extra_cases or [])
        self._shared: WorkerSession | None = None
        self._own: dict[str, WorkerSession] = {}
        self._slots: dict[str, tuple[WorkerSession, str]] = {}
        self.load_violations: dict[str, list[tuple[str, str]]] = {}  # kernel sha -> what importing it did
        self.sandbox_notes: list[str] = []
        self.resident_bytes = 0  # how much of the perf cases to keep on the device (RESIDENT_BYTES to keep them)
        # Keep a warm spare worker for the next untrusted kernel (each gets a worker of its own): a
        # judge that checks many (an LLM's candidates) then pays ~5 s of worker start only once.
        self.keep_spare = False
        self._kept: dict[str, tuple[list[Any], tuple]] = {}  # resident perf cases: key -> (inputs, expected)
        self._kept_bytes = 0
        self._placed: dict[int, tuple[WorkerSession, set[str]]] = {}  # id(worker) -> it, and the keys it holds
        from kernelgen.verify.judge.replayer import Replayer

        # started beside the first recording worker (or before the judge, with it)
        self.replayer = Replayer(self, prestart=prestart or spare is not None, spare=spare.replay if spare is not None else None)
        self.notes: dict[str, list[str]] = {}  # kernel sha -> what its recordings noted (autotune's first config on the CPU)
        self.perf_plans: dict[tuple, tuple[Any, float | None]] = {}  # (kernel sha, layout) -> its recording, host time

    def _arena_size(self, extra: list[dict[str, list[int]]]) -> int:
        """Room for one case's inputs, their copies after the call, and its outputs, at the largest
        case this judge may see (outputs estimated by running the reference on meta tensors)."""
        import torch

        cases = list(self.spec.test_cases) + list(extra)
        if not self.device.interpreter:
            cases += list(self.spec.effective_perf_cases)
        biggest = 0
        for case in cases:
            dt = max(self.spec.dtypes, key=lambda d: DTYPE_SIZES.get(d, 8))
            ins = sum(_nbytes(case[i.name], self.spec.input_dtype(i, dt)) for i in self.spec.inputs)
            try:
                args = [torch.empty(case[i.name], dtype=torch_dtype(self.spec.input_dtype(i, dt)), device="meta")
                        for i in self.spec.inputs]
                outs = without_dynamo(lambda: self.baseline(*args, **self.spec.param_defaults))  # noqa: B023 - called at once
                outs = outs if isinstance(outs, (tuple, list)) else (outs,)
                out_bytes = sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))
            except Exception:  # noqa: BLE001 - no meta kernel: assume outputs as large as the inputs
                out_bytes = ins
            biggest = max(biggest, ins, out_bytes)
        # inputs (strided variants take twice their size) + inputs after + outputs, generously
        return max(MIN_ARENA, 6 * biggest + (16 << 20))

    # --- workers -----------------------------------------------------------------------------------
    def load(self, kernel: KernelSource) -> tuple[WorkerSession, str]:
        """The worker and slot running `kernel` (loaded once per judge); WorkerFailure or
        LoadError when it cannot be imported."""
        key = kernel.sha256
        if key in self._slots:
            worker, slot = self._slots[key]
            if not worker.closed:
                return worker, slot
            # its worker died (a crash, a timeout): every slot it held is gone, and is loaded again
            self._slots = {k: v for k, v in self._slots.items() if v[0] is not worker}
        if kernel.origin == "offline":
            if self._shared is None or self._shared.closed:
                self._shared = self._start("offline kernels")
            worker = self._shared
        else:
            worker = self._own.get(key)
            if worker is None or worker.closed:
                worker = self._own[key] = self._start(kernel.name)
                if self.keep_spare and self._spare is None:  # the next untrusted kernel's worker starts warming now
                    self._spare = spare_worker(self.device)
        self._seed(worker, kernel)
        slot = f"k{key[:16]}"  # the same module name in every run: nothing in Triton's cache keys differs
        reply = worker.request({"op": "load", "slot": slot, "entry": self.spec.name, "filename": kernel.name,
                                "source": kernel.source})
        if not reply.ok:
            raise LoadError(reply.error)
        self.load_violations[key] = [(v["code"], f"on import: {v['message']}") for v in
                                     (reply.report.violations if reply.report else [])]
        self._slots[key] = (worker, slot)
        return worker, slot

    def _seed(self, worker: WorkerSession, kernel: KernelSource) -> None:
        """The worker's Triton cache from the compile store (kernelgen.verify.judge.compilecache): its own
        key's folder when it takes its first kernel, and the trusted "offline" folder; a kernel
        KernelGen generated also brings what a worker of its own compiled for it into the shared one."""
        triton, offline = worker.scratch / "triton", compilecache.store_folder(self.spec.name, "offline")
        if worker.compile_store is None:
            worker.compile_store = offline if kernel.origin == "offline" else \
                compilecache.store_folder(self.spec.name, kernel.sha256)
            compilecache.seed(worker.compile_store, triton)
            if worker.compile_store != offline:
                worker.seeded |= compilecache.seed(offline, triton)
        if kernel.origin == "offline":
            compilecache.seed(compilecache.store_folder(self.spec.name, kernel.sha256), triton)

    def trusted_compiles(self, kernel: KernelSource) -> Path | None:
        """The Triton cache a trusted recording of `kernel` compiled into (the shared worker of KernelGen's
        own kernels), for the replay worker to start from; None for any other kernel (kernelgen.verify.judge.replayer)."""
        shared = self._shared
        if kernel.origin != "offline" or shared is None or shared.closed or kernel.sha256 not in self._slots:
            return None
        return shared.scratch / "triton"

    def _start(self, label: str) -> WorkerSession:
        spare, self._spare = self._spare, None
        if spare is not None and spare.take(label, self.arena_bytes):
            worker = spare
        else:
            worker = WorkerSession(self.device, arena_bytes=self.arena_bytes, label=label)
        for note in worker.sandbox_missing:
            if note not in self.sandbox_notes:
                self.sandbox_notes.append(note)
        return worker

    def adopt(self, kernel_sha: str, worker: WorkerSession, slot: str, violations: list[tuple[str, str]]) -> bool:
        """Take a warm worker that already holds this kernel (the service keeps the workers of kernels
        that passed, kernelgen.verify.judge.service.pool): it gets this judge's arena, and no second
        import. False when it died meanwhile (it is closed; `load` starts a fresh one)."""
        if worker.closed or worker.proc.poll() is not None or kernel_sha in self._slots:
            worker.close()
            return False
        try:
            worker.attach(self.arena_bytes)
        except WorkerFailure:
            worker.close()
            return False
        self._own[kernel_sha], self._slots[kernel_sha] = worker, (worker, slot)
        self.load_violations[kernel_sha] = list(violations)
        self.sandbox_notes += [n for n in worker.sandbox_missing if n not in self.sandbox_notes]
        return True

    def release(self, kernel_sha: str) -> tuple[WorkerSession, str, list[tuple[str, str]]] | None:
        """Take this kernel's own live worker out of the judge (`close` then leaves it running), with
        its slot and what importing the kernel did; None for the shared or a dead one."""
        entry = self._slots.get(kernel_sha)
        if entry is None or entry[0] is self._shared or entry[0].closed or entry[0].proc.poll() is not None:
            return None
        del self._slots[kernel_sha]
        self._own.pop(kernel_sha, None)
        self._placed.pop(id(entry[0]), None)
        return entry[0], entry[1], list(self.load_violations.get(kernel_sha, []))

    def forget(self, kernel: KernelSource) -> None:
        """Stop the worker of a kernel that is no longer needed (an untrusted one has its own)."""
        entry = self._slots.pop(kernel.sha256, None)
        if entry and entry[0] is not self._shared:
            entry[0].close()
            self._own.pop(kernel.sha256, None)

    def retain(self, keep: set[str]) -> None:
        """Forget every loaded kernel whose sha256 is not in `keep` (a round's losing candidates and
        repair attempts: each untrusted one holds a worker process and its GPU context, ~500 MiB)."""
        for key in [k for k in self._slots if k not in keep]:
            entry = self._slots.pop(key)
            if entry[0] is not self._shared:
                entry[0].close()
                self._own.pop(key, None)

    def close(self) -> None:
        for w in [self._spare, self._shared, *self._own.values()]:
            if w is not None:
                w.close()
        self._spare, self._shared, self._own, self._slots, self._placed = None, None, {}, {}, {}
        self._kept, self._kept_bytes = {}, 0
        self.replayer.close()
        closer = getattr(self.baseline, "close", None) if self._owns_baseline else None
        if closer is not None:
            closer()

    def elsewhere(self, device: DeviceInfo) -> "Judge":
        """A judge of the same operator whose workers run on another device of this host
        (`device.pin`, under `device.lock`): the same spec and baseline (this judge's, which the new
        one leaves open when it closes), its own workers. Inputs and outputs still live on this
        process's device; they reach the other GPU's workers through the host-memory arena."""
        return Judge(self.spec, device, self.baseline, arena_bytes=self.arena_bytes, owns_baseline=False,
                     baseline_sha256=self.baseline_sha256)

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- perf cases kept on the device ------------------------------------------------------------
    def kept(self, key: str) -> tuple[list[Any], tuple] | None:
        """A perf case's inputs and the baseline's outputs, if kept (see `keep`)."""
        return self._kept.get(key)

    def keep(self, key: str, inputs: list[Any], expected: tuple) -> None:
        """Keep a perf case resident under `key`, unless that would pass `resident_bytes`. Kept
        inputs are never written by the judge; a worker's copy is its own (a kernel that wrote into
        its inputs fails the accuracy check's input comparison before it is ever kept)."""
        size = sum(t.numel() * t.element_size() for t in [*inputs, *expected] if hasattr(t, "numel"))
        if key not in self._kept and self._kept_bytes + size <= self.resident_bytes:
            self._kept[key] = (inputs, expected)
            self._kept_bytes += size

    def place(self, worker: WorkerSession, key: str, inputs: list[Any], *, resident: bool) -> None:
        """`inputs` into the worker under `key`: once per worker when resident, else every time."""
        # Closed workers go first: a live one in this map holds its id, so ids do not collide.
        self._placed = {k: v for k, v in self._placed.items() if not v[0].closed}
        held = self._placed.setdefault(id(worker), (worker, set()))[1]
        if resident and key in held:
            return
        if not self._draw(worker, key, inputs):
            self.put(worker, key, inputs)
        if resident:
            held.add(key)

    def redraw(self, worker: WorkerSession, key: str, inputs: list[Any]) -> None:
        """New values, `inputs`', into the buffers `worker` holds under `key` (the same tensors, addresses
        and version counters): drawn there from their recipe when the digests agree, else sent."""
        if not self._draw(worker, key, inputs, refill=True):
            self.put(worker, key, inputs, refill=True)

    def _draw(self, worker: WorkerSession, key: str, inputs: list[Any], *, refill: bool = False) -> bool:
        """Have the worker draw `inputs` itself when they say how they were drawn (perf inputs: a fixed
        seed, on the device) — copying them through host memory cost ~1.6 s per GiB (H100) — and
        check its digest of them against the judge's own. False: send them instead. A worker that
        draws other numbers and claims these only times itself on other inputs, and its outputs are
        still compared with the baseline's on the judge's."""
        recipe = getattr(inputs, "recipe", None)
        if recipe is None:
            return False
        case, dtype, seed = recipe
        recipe_spec = self.spec.model_copy(update={"reference": None})  # the inputs' recipe; not the reference's code
        reply = worker.request({"op": "draw", "key": key, "spec": recipe_spec.model_dump(mode="json"), "case": case,
                                "dtype": dtype, "seed": seed, "refill": refill})
        return reply.ok and same_digest(reply.info.get("digest"), digest(inputs))

    # --- moving tensors ----------------------------------------------------------------------------
    @staticmethod
    def stage(worker: WorkerSession, key: str, inputs: list[Any], *, refill: bool = False) -> dict[str, Any]:
        """`inputs` written into the worker's arena; the request that stores them."""
        refs, offset = [], 0
        for t in inputs:
            ref = worker.arena.write(t, offset)
            refs.append(ref.model_dump())
            offset += -(-ref.nbytes // ALIGN) * ALIGN
        return {"op": "refill" if refill else "put", "key": key, "tensors": refs}

    @staticmethod
    def put(worker: WorkerSession, key: str, inputs: list[Any], *, refill: bool = False) -> None:
        reply = worker.request(Judge.stage(worker, key, inputs, refill=refill))
        if not reply.ok:
            raise WorkerFailure("error", f"the worker could not take the inputs: {reply.error}")

    @staticmethod
    def drop(worker: WorkerSession, key: str) -> None:
        worker.request({"op": "drop", "key": key})

    @staticmethod
    def replay_request(plan_id: str, key: str, *, fill: Fill | None, order: str = "forward", seed: int = 0,
                       ablate: bool = False, return_inputs: bool = False, out_offset: int = 0, out_limit: int = 0) -> dict[str, Any]:
        """One replay of a held plan on the inputs under `key` (kernelgen.verify.replay.ops.op_replay)."""
        return {"op": "replay", "plan": plan_id, "key": key, "fill": fill.model_dump() if fill is not None else None,
                "order": order, "seed": seed, "ablate": ablate, "return_inputs": return_inputs, "out_offset": out_offset,
                "out_limit": out_limit}

    def note(self, kernel: KernelSource, notes: list[str]) -> None:
        """What a recording of `kernel` noted, each once."""
        held = self.notes.setdefault(kernel.sha256, [])
        held += [n for n in notes if n not in held]

    @staticmethod
    def batch(worker: WorkerSession, requests: list[dict[str, Any]]) -> list[Reply]:
        """Several requests in one round trip; their replies in order, up to the first that failed."""
        reply = worker.request({"op": "batch", "requests": requests})
        if not reply.ok or len(reply.replies) > len(requests):
            raise WorkerFailure("error", f"the worker broke the protocol answering a batch: {reply.error or 'too many replies'}")
        for r in reply.replies:
            r.error = scrub(r.error)
        return reply.replies

    def read(self, worker: WorkerSession, value: TensorRef | OtherValue, *, max_bytes: int) -> Any:
        """A private copy of one returned value, on the judge's device; a description for a non-tensor."""
        if isinstance(value, OtherValue):
            return value
        return worker.arena.read(value, self.device.torch_device, max_bytes=max_bytes)


class LoadError(Exception):
    """The kernel file could not be imported, or defines no entry function: its own failure."""


def static_problems(spec: OperatorSpec, kernel: KernelSource) -> list[tuple[str, str]]:
    """(code, message) for every static rule the file breaks, before any of it runs."""
    return [(v.code, v.message) for v in check_source(kernel.source, spec.name, baseline_module=f"{spec.name}_baseline")]
