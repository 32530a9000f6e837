"""The local engine's worker process, one per device, pinned by the environment it was started with
(`CUDA_VISIBLE_DEVICES=3`). It reads one `JobRequest` per line on stdin, runs it, and answers on
stdout with JSON lines: `{"step": "..."}` while the job runs, then `{"result": {...}}`. It runs one
job at a time, so nothing else of the batch runs on its device while it times a kernel.

    python -m kernelgen.batch.worker --target cuda:3

It dies with the batch that started it (kernelgen.lifetime), and its steps and its KernelGen service
(kernelgen.batch.services.WorkerService) with it. Told to stop (SIGTERM, or SIGINT), it interrupts the
step it runs and waits for it (kernelgen.batch.step), then stops its service, before it exits, so an
interrupted batch leaves no step and no service running.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from typing import IO

from kernelgen.batch.ahead import reap_background
from kernelgen.batch.job import JobRequest, run_job
from kernelgen.batch.resume import JobResult
from kernelgen.batch.services import WorkerService
from kernelgen.batch.step import WRAPPER_ENV, stop_running_steps, when_started
from kernelgen.batch.stepfork import preload
from kernelgen.lifetime import tie_to_parent


def _send(channel: IO[str], message: dict) -> None:
    channel.write(json.dumps(message) + "\n")
    channel.flush()


def serve(requests: IO[str], channel: IO[str], target: str) -> None:
    for line in requests:
        if not line.strip():
            continue
        req = JobRequest.model_validate_json(line)
        try:
            result = run_job(req, target, on_step=lambda msg: _send(channel, {"step": msg}))
        except Exception as e:  # noqa: BLE001 - the worker outlives one job's failure
            traceback.print_exc()
            result = JobResult(name=req.name, spec=req.spec_label, status="error", rounds=req.rounds, target=target,
                               reason=f"worker: {type(e).__name__}: {e}")
        _send(channel, {"result": result.model_dump(mode="json")})


_service: WorkerService | None = None  # the service its steps judge in, started by main
_PID = os.getpid()  # a step forked from this worker runs this module's handlers until it sets its own


def _stop(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
    if os.getpid() != _PID:  # a step just forked: it ends as the signal's default action would end it
        os._exit(128 + signum)
    when_started(lambda: _stop_now(signum))  # a step being started is stopped too, once it is tracked


def _stop_now(signum: int) -> None:
    """Every step stopped first, then the service: a step still running would start another service
    where it found none."""
    stop_running_steps()
    if _service is not None:
        _service.stop()
    os._exit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    tie_to_parent()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop)
    ap = argparse.ArgumentParser(prog="python -m kernelgen.batch.worker")
    ap.add_argument("--target", required=True, help="the device label this worker is pinned to, e.g. cuda:3")
    args = ap.parse_args(argv)
    global _service
    device = os.environ.get("KERNELGEN_DEVICE", "cpu")
    _service = WorkerService(device)  # its imports overlap this worker's own
    # its steps are forked from here, without their imports (a wrapper needs a command to run: exec'd)
    why = "" if os.environ.get(WRAPPER_ENV) else preload(device)
    if why:
        print(f"kernelgen batch worker {args.target}: steps start as fresh processes: {why}", file=sys.stderr, flush=True)
    why = _service.wait()  # before the first step: one finding it still starting would start another
    if why:
        print(f"kernelgen batch worker {args.target}: steps judge without the KernelGen service: {why}", file=sys.stderr,
              flush=True)
    # The protocol gets a private copy of stdout; anything else printed lands on stderr.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin, channel, args.target)
    reap_background(wait=True)  # the next operator's baselines, timed ahead: it may be waiting for them elsewhere
    _service.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
