"""The peer libraries timed in a process of their own, so one that crashes cannot take the judge down.

FlagGems and Liger-Kernel are trusted code, but not always correct code: on an H100 (2026-11-22) one of
them hit an illegal memory access during `bench` of rms_norm, which poisons the CUDA context of the
process it runs in; the judge's whole measurement was lost with it. Here they run in a child:

    parent: PeerJob(spec, device, cases, lock)  (started early) ... .result() -> PeerRun
    child:  python -m kernelgen.verify.judge.peerproc   (one JSON request on stdin, one JSON line per case out)

The child draws each perf case's inputs with the same seed as the judge (kernelgen.verify.judge.inputs.PERF_SEED,
on the device), runs the spec's reference once plainly for the expected values (under the user's
precision policy, as the judge does), then each peer: kept only where its outputs pass the judge's own
rule (within the spec's tolerance of eager, else by the oracle against the float64 truth, computed once
per case when a peer first needs it), and timed under the device lock held exclusively. When the
child dies, the case it was on is tried once more with each peer alone in a child of its own (so the
one that crashes is named, and the other is still timed), and a new child takes the remaining cases.
A child that does not answer in time is not retried: the cases it left are reported untimed.

A peer's first call at a case compiles (and, for FlagGems, autotunes) its kernels for the shape, and
holds the device lock shared, as a warm-up, while it does: a process waiting to time exclusively waits
behind it (checks go on beside it: kernelgen.verify.judge.devicelock). So that first call has a budget of its own
(PEER_WARMUP_S): the child says when one starts and ends (one JSON line each), and the parent stops a
child whose peer overruns it, then times the other peers, skipping that one for the cases left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelgen.lifetime import child_env, tie_to_parent
from kernelgen.spec import OperatorSpec
from kernelgen.verify.judge import peers as peer_libs
from kernelgen.verify.results import KernelTiming

# for every case of one child: FlagGems compiles (and autotunes) a kernel per op and shape. Not more: the
# kernel's measurement waits for it, and at 600 s, retried per peer after a timeout, KernelBench's depthwise
# convolutions (level 1's 83, 85, 86) never finished a 300 s batch step on an H100 (2026-11-28)
PEER_TIMEOUT_S = 180.0
# for one peer's first call at one case, holding the device lock: FlagGems autotuning level 1's depthwise
# convolution 82 held it over 170 s, and the kernel's own check on that GPU waited all of it (H100,
# 2026-11-28). Elementwise, norm and GEMM peers compile in 1-20 s; past 60 s the peer is reported untimed
# there and skipped for the cases after it (each new shape would autotune again)
PEER_WARMUP_S = 60.0
# the least a peer's truth may take at once (an eighth of the float64 run otherwise): below it, a case's
# truth is made whole (a slice's proof costs more than it saves at that size)
PEER_TRUTH_FLOOR = 64 << 20


class PeerCase(BaseModel):
    """One line of the child's answer: the peers that matched the reference on one case, timed."""

    model_config = ConfigDict(extra="forbid")

    case: int
    dtype: str
    peers: dict[str, KernelTiming]
    notes: list[str] = []


@dataclass
class PeerRun:
    timings: dict[tuple[int, str], dict[str, KernelTiming]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # libraries missing, cases a peer crashed on


class PeerJob:
    """Peer timings under way in a child process, started before the judge times its own kernel: the
    child's start (Python, torch, the libraries' imports, FlagGems' compiles: seconds) then overlaps
    the judge's work. Its device work waits on the device lock like any other; its output goes to
    files, not pipes, so a child holding the lock never blocks on a pipe the judge is not reading."""

    def __init__(self, spec: OperatorSpec, device: str, cases: list[tuple[int, dict[str, list[int]], str]],
                 lock: str | None):
        self.spec, self.device, self.cases, self.lock = spec, device, list(cases), lock
        self.run = PeerRun()
        self._child: _Child | None = None
        if spec.reference is None:
            self.run.notes.append("peers not timed: the spec has no reference to run under FlagGems or to check "
                                  "Liger-Kernel against")
        elif self.cases:
            self._child = _Child(spec, device, self.cases, lock, None)

    def result(self) -> PeerRun:
        """Wait for the child; a case it died on is tried once more with each peer alone (so the one
        that crashes is named and the other still timed), and a new child takes the cases after it."""
        if self._child is None:
            return self.run
        child, self._child = self._child, None
        died, todo = child.collect(self.run), self.cases
        skip: set[str] = set()
        while child.overran is not None:  # a peer's first call ran past its budget: the others are still timed
            name, ci, dtype = child.overran
            skip.add(name)
            todo = [c for c in todo if (c[0], c[2]) not in self.run.timings]
            self.run.notes.append(f"{name} not timed on case {ci} {dtype}" + (" or after it" if len(todo) > 1 else "")
                                  + f": its first call there (compiling and autotuning for the shape) held the device "
                                  f"over {PEER_WARMUP_S:.0f} s")
            child = _Child(self.spec, self.device, todo, self.lock, None, skip=sorted(skip))
            died = child.collect(self.run)
        if child.timed_out:  # slow, not crashed: a retry per peer would wait as long again, twice
            late = [f"{ci} {dtype}" for ci, _, dtype in todo if (ci, dtype) not in self.run.timings]
            self.run.notes.append(f"peers not timed on case(s) {', '.join(late)}: {died} (FlagGems compiles and "
                                  "autotunes its kernels at each new shape)")
            return self.run
        while died is not None:
            todo = [c for c in todo if (c[0], c[2]) not in self.run.timings]
            if not todo:
                break
            crashed, todo = todo[0], todo[1:]
            ci, _, dtype = crashed
            self.run.timings[(ci, dtype)] = {}
            for name in peer_libs.NAMES:
                if name in skip:
                    continue
                alone = PeerRun()
                why = _Child(self.spec, self.device, [crashed], self.lock, name).collect(alone)
                if why is None:
                    self.run.timings[(ci, dtype)].update(alone.timings.get((ci, dtype), {}))
                else:
                    self.run.notes.append(f"{name} crashed on case {ci} {dtype} ({why[:200]}); no {name} timing there")
            died = _Child(self.spec, self.device, todo, self.lock, None, skip=sorted(skip)).collect(self.run) if todo else None
        return self.run

    def cancel(self) -> None:
        """Stop a child whose timings are no longer wanted (the judge's own run failed)."""
        if self._child is not None:
            self._child.kill()
            self._child = None


def peer_timings(spec: OperatorSpec, device: str, cases: list[tuple[int, dict[str, list[int]], str]],
                 lock: str | None) -> PeerRun:
    """Every peer on every (case index, shapes, dtype), timed in child processes."""
    return PeerJob(spec, device, cases, lock).result()


class _Child:
    """One child over `cases` (only the peer `only`, if given; never those in `skip`), started at once."""

    def __init__(self, spec: OperatorSpec, device: str, cases: list[tuple[int, dict[str, list[int]], str]],
                 lock: str | None, only: str | None, skip: list[str] | None = None):
        request = {"spec": spec.model_dump(mode="json"), "device": device, "lock": lock, "only": only,
                   "skip": list(skip or []), "cases": [[ci, shapes, dtype] for ci, shapes, dtype in cases]}
        self._out, self._err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        self.started = time.monotonic()
        self.timed_out = False
        self.overran: tuple[str, int, str] | None = None  # (peer, case, dtype) whose first call ran past its budget
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelgen.verify.judge.peerproc"], stdin=subprocess.PIPE,
                                     stdout=self._out, stderr=self._err, text=True, env=child_env())
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request))
        self.proc.stdin.close()
        # The budgets are kept by a watcher of their own, not by whoever calls collect: a parent that times
        # eager under the device lock before it collects waits behind a child warming under that lock, and
        # only the watcher can end the wait. On an H100 (2026-12-07) level 1's 82, 83 and 85 (depthwise)
        # waited so for over 4 minutes each, twice, and none finished: the baselines' process blocked on the
        # exclusive lock while its peers' child autotuned FlagGems' depthwise convolution under the shared one.
        self._ended: tuple[int, str] = (0, "")
        self._watcher = threading.Thread(target=self._watch, name="peer-budget", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        self._ended = self._wait()

    def _wait(self) -> tuple[int, str]:
        """(exit code, why) once the child ends, or is stopped: past PEER_TIMEOUT_S, or where a peer's
        first call has held the device past PEER_WARMUP_S (its lines are read as they come, with pread:
        the child shares the file's offset, which the parent must not move)."""
        fd, done, warming = self._out.fileno(), 0, None
        while True:
            code = self.proc.poll()
            data = os.pread(fd, 1 << 20, done)
            complete = data[:data.rfind(b"\n") + 1]
            done += len(complete)
            for line in complete.decode(errors="replace").splitlines():
                # "warm" follows every "warming" (the child says it in a finally); a library's own prints change nothing
                event = _event(line)
                if event is not None:
                    warming = (event[1], time.monotonic()) if event[0] == "warming" else None
            if code is not None:
                return code, ""
            if warming is not None and time.monotonic() - warming[1] > PEER_WARMUP_S:
                self.kill()
                self.overran = warming[0]
                return -1, f"{warming[0][0]}'s first call on case {warming[0][1]} ran past {PEER_WARMUP_S:.0f} s"
            if time.monotonic() - self.started > PEER_TIMEOUT_S:
                self.kill()
                self.timed_out = True
                return -1, f"no answer within {PEER_TIMEOUT_S:.0f} s"
            try:  # back at once when it ends (its last lines are read above on the next pass)
                self.proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass

    def collect(self, run: PeerRun) -> str | None:
        """Its lines into `run`; None when it finished, else the last error line it wrote."""
        self._watcher.join()
        code, why = self._ended
        self._out.seek(0)
        self._err.seek(0)
        out, err = self._out.read(), self._err.read()
        self._out.close()
        self._err.close()
        for line in out.splitlines():
            try:
                got = PeerCase.model_validate_json(line)
            except ValidationError:
                continue
            run.timings[(got.case, got.dtype)] = got.peers
            run.notes += [n for n in got.notes if n not in run.notes]
        if code == 0:
            return None
        lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
        # CUDA's advice lines ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1") come after the error
        return why or next((ln for ln in reversed(lines) if "Error" in ln or "error:" in ln),
                           lines[-1] if lines else f"exit {code}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class _Event(BaseModel):
    """A line the child writes around a peer's first call at a case (PeerCase lines are the answers)."""

    model_config = ConfigDict(extra="forbid")

    event: Literal["warming", "warm"]
    peer: str
    case: int
    dtype: str


def _event(line: str) -> tuple[str, tuple[str, int, str]] | None:
    try:
        e = _Event.model_validate_json(line)
    except ValidationError:
        return None
    return e.event, (e.peer, e.case, e.dtype)


def _say(event: str, peer: str, case: int, dtype: str) -> None:
    print(json.dumps({"event": event, "peer": peer, "case": case, "dtype": dtype}), flush=True)


def _serve(request: dict[str, Any]) -> None:
    import torch

    from kernelgen.spec import draw_inputs, load_reference
    from kernelgen.verify.judge.compare import as_tuple
    from kernelgen.verify.judge.devicelock import device_lock
    from kernelgen.verify.judge.inputs import PERF_SEED
    from kernelgen.verify.judge.precision import applied
    from kernelgen.verify.timing import rep_times, summarize

    from kernelgen.verify.judge.judge import exact_reductions

    exact_reductions()  # the expected values as the judge computes them
    spec = OperatorSpec.model_validate(request["spec"])
    device, lock = str(request["device"]), request.get("lock")
    reference = load_reference(spec)
    params = spec.param_defaults
    for ci, shapes, dtype in request["cases"]:
        with device_lock(exclusive=False, path=lock):
            inputs = draw_inputs(spec, shapes, dtype, PERF_SEED + ci, device, on_device=True)
            with torch.no_grad(), applied() as policy:  # eager under the user's precision policy, as the judge's
                expected = as_tuple(reference(*inputs, **params))
        found, notes = peer_libs.candidates(spec, reference, inputs)
        found = [p for p in found if request.get("only") in (None, p.name) and p.name not in request.get("skip", [])]
        timed: dict[str, Any] = {}
        truth: list[Any] = []  # the case's float64 truth, made the first time a peer needs it
        for peer in found:
            try:
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # FlagGems warns once per operator it overrides
                    with device_lock(exclusive=False, path=lock, warmup=True):  # checks may go on beside it
                        _say("warming", peer.name, ci, dtype)  # held from here: the parent keeps its budget
                        try:
                            with peer.context():
                                out = as_tuple(peer.call())
                        finally:
                            _say("warm", peer.name, ci, dtype)
                        # outside the peer's context: the truth is PyTorch's float64, never FlagGems' own ops
                        differs = _differs(out, expected, spec.tolerance_for(dtype), lambda: _truth(
                            truth, reference, inputs, params, expected, policy, spec.tolerance_for(dtype)))
                    del out
                    if differs:  # not the same function here: no peer of this operator, and the note says why
                        notes.append(f"{peer.name} not a peer on case {ci} {dtype}: {differs}")
                        continue
                    with device_lock(exclusive=True, path=lock), peer.context():
                        timed[peer.name] = summarize(rep_times(peer.call, torch.device(device).type)).model_dump()
            except Exception as e:  # noqa: BLE001 - a peer that cannot run this shape is no peer here
                notes.append(f"{peer.name} could not run case {ci} {dtype}: {type(e).__name__}: {str(e)[:160]}")
                continue
        print(json.dumps({"case": ci, "dtype": dtype, "peers": timed, "notes": notes}), flush=True)
        del inputs, expected, truth
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _truth(made: list[Any], reference: Any, inputs: list[Any], params: dict[str, Any], expected: tuple,
           policy: Any, tol: Any) -> Any:
    """The case's truth (kernelgen.verify.judge.bigtruth), computed once per case into `made`: a sample of
    the batch rows where the whole does not fit, as for a timed output."""
    from kernelgen.verify.judge.bigtruth import case_truth
    from kernelgen.verify.judge.truthmemory import float64_need

    if made:
        return made[0]
    # Beside the judge, whose estimate (kernelgen.batch.footprint) gives this process an eighth of the
    # float64 run: the whole truth where that small, else an eighth of the batch rows in slices of that
    # size (or the host's memory), unless the user set the budget (KERNELGEN_TRUTH_MEMORY)
    budget = max(float64_need(inputs, expected) // 8, PEER_TRUTH_FLOOR)
    made.append(case_truth(reference, inputs, params, expected, policy=policy, sample=True, tol=tol, budget=budget))
    return made[0]


def _differs(out: tuple, expected: tuple, tol: Any, truth: Any = None) -> str:
    """Why a peer's outputs are not the reference's, or "" where they are -- by the judge's rule: within
    the spec's tolerance of eager, else (`truth`: a function giving the case's CaseTruth) by the oracle
    against the float64 truth, as a kernel is judged. Until 2026-12-07 a peer was held to eager at the
    fixed tolerance alone and dropped without a word: on an H100 no FlagGems time came back for level 1's
    2-D forward convolutions, whose eager output (cuDNN, one TF32 product) is itself 1e-3 off the truth."""
    from kernelgen.verify.judge.compare import compare_outputs

    if len(out) != len(expected):
        return f"{len(out)} outputs where the reference gives {len(expected)}"
    found = compare_outputs(list(out), expected, tol)
    if all(c.passed for c in found):
        return ""
    if truth is not None:
        found = compare_outputs(list(out), expected, tol, truth=truth())
    for i, c in enumerate(found):
        if not c.passed:
            where = f"output {i} " if len(expected) > 1 else ""
            rule = f"against eager's {where}output" if truth is None else f"{where}by the oracle's rule"
            return f"{rule}, {c.message or 'different'}"[:400]
    return ""


def main() -> int:
    tie_to_parent()
    _serve(json.loads(sys.stdin.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
