"""The service process: `python -m kernelgen.verify.judge.service --socket PATH --device CHOICE [--idle S]`,
started by a command (kernelgen.serve) or by `kernelgen serve`, never by hand; a batch worker starts
the one its steps judge in as its own child, and that one dies with the worker (kernelgen.lifetime).

It listens on a Unix socket in the user's 0700 runtime folder (bound under a temporary name, mode
0600, then renamed into place: a stale socket is replaced in one step), answers only its own user
(SO_PEERCRED), speaks first with its key, and serves one command at a time — a second one meanwhile
is told `Busy` and runs in its own process, as it would without a service. Before each command it
hashes the tool's files again: if they changed since it started, it refuses and stops (it runs the
old code). It stops after `idle` seconds without a command, on `kernelgen serve --stop`, on SIGTERM,
or when its socket is no longer the one at its path (another service replaced it); its fork server
and every worker die with it.

Idle, it holds as little of the device as it can: after each command the judge's tensors are gone
(gc) and PyTorch's caching allocator is emptied, so what is left is its CUDA context; kept workers
are released after WARM_IDLE_S (pool.py; KERNELGEN_SERVICE_WARM_IDLE seconds), and all of them at once when the device's free memory runs
low (under LOW_FREE_SHARE of its total), since a kept worker only saves a start for the next command.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path

from kernelgen.errors import KernelGenError
from kernelgen.verify.judge.scrub import scrub
from kernelgen.verify.judge.service.jobs import describe, run_job
from kernelgen.verify.judge.service.place import device_kind, installation, service_env, service_key, tool_digest
from kernelgen.verify.judge.service.pool import WARM_IDLE_S, WarmPool
from kernelgen.verify.judge.service.wire import (Busy, Failed, Hello, JobRequest, Refused, Status, StatusRequest, Step,
                                                 Stopping, recv_request, send_msg)
from kernelgen.verify.protocol import ProtocolError

IDLE_S = 600.0  # ten minutes without a command; KERNELGEN_SERVICE_IDLE or `kernelgen serve --idle` changes it
TICK_S = 0.5  # how often the accept loop looks at the clock, its socket and the stop flag
REQUEST_TIMEOUT_S = 30.0  # a client sends its request as soon as it has read the hello
# Under a tenth of the device free: another command of ours, or the user's own work, needs the memory
# more than a kept worker (~500 MiB of context each) saves a start.
LOW_FREE_SHARE = 0.1


def peer_uid(conn: socket.socket) -> int:
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


class Service:
    def __init__(self, path: Path, choice: str, idle_s: float, *, workers: int | None = None,
                 warm_idle_s: float = WARM_IDLE_S):
        self.path, self.choice, self.idle_s, self.warm_idle_s = path, choice, idle_s, warm_idle_s
        self.digest = tool_digest()
        self.key = service_key(choice, digest=self.digest)  # from this process's own files and environment
        self.kind = device_kind(choice)
        self.started = self.last = time.monotonic()
        self.jobs, self.running = 0, ""
        self.job_lock, self.stop, self.warm = threading.Lock(), threading.Event(), threading.Event()
        self.pool = WarmPool(workers)
        self.forks = None
        self.listener, self.inode = self._listen()

    def _listen(self) -> tuple[socket.socket, int]:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        umask = os.umask(0o177)
        try:
            sock.bind(str(tmp))
        finally:
            os.umask(umask)
        sock.listen(16)
        os.replace(tmp, self.path)
        sock.settimeout(TICK_S)
        return sock, os.stat(self.path).st_ino

    def _start_fork_server(self) -> None:
        """From the main thread: a child's PR_SET_PDEATHSIG fires when the *thread* that started it
        ends, and the fork server must live as long as this process. It needs only the device's kind
        (its imports run in it, beside this process's own)."""
        from kernelgen.devices import DeviceInfo
        from kernelgen.verify.judge import session
        from kernelgen.verify.judge.forkserver import ForkServer

        if self.kind not in ("cpu", "cuda"):
            return  # forked workers are known to work on these two; elsewhere each starts fresh
        try:
            self.forks = ForkServer(DeviceInfo(self.kind, self.kind, interpreter=self.kind == "cpu"), stderr=sys.stderr)
        except OSError:
            traceback.print_exc()  # each command then starts its workers as fresh processes
            return
        session.use_launcher(self.forks.launch)

    def _warm_up(self) -> None:
        """torch, the device and the judge's own context, before the first command needs them (a
        command arriving meanwhile waits for this, not for a second start)."""
        try:
            from kernelgen.devices import resolve_device
            from kernelgen.verify.judge.judge import exact_reductions

            device = resolve_device(self.choice)
            exact_reductions()
            if device.kind == "cuda":
                import torch

                torch.ones(1, device=device.torch_device)  # the judge's CUDA context, kept for every command
        except Exception:  # noqa: BLE001 - a command then meets the same failure and reports it
            traceback.print_exc()
        finally:
            self.warm.set()

    # --- the loop ----------------------------------------------------------------------------------
    def serve(self) -> None:
        self._start_fork_server()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
        print(f"kernelgen service {os.getpid()}: {self.kind}, socket {self.path}, idles out after {self.idle_s:.0f} s",
              file=sys.stderr, flush=True)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                if self._should_end():
                    break
                if not self.job_lock.locked():
                    self.pool.expire(self.warm_idle_s)
                continue
            threading.Thread(target=self._handle, args=(conn,), name="connection", daemon=True).start()
        self.shutdown()

    def _should_end(self) -> bool:
        try:
            replaced = os.stat(self.path).st_ino != self.inode
        except FileNotFoundError:
            replaced = True
        idle = not self.job_lock.locked() and time.monotonic() - self.last > self.idle_s
        return replaced or idle

    def shutdown(self) -> None:
        try:
            if os.stat(self.path).st_ino == self.inode:
                self.path.unlink()
        except FileNotFoundError:
            pass
        self.listener.close()
        self.pool.close()
        if self.forks is not None:
            self.forks.close()  # every worker it forked dies with it
        print(f"kernelgen service {os.getpid()}: stopped after {self.jobs} command(s)", file=sys.stderr, flush=True)

    # --- one connection ----------------------------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        try:
            if peer_uid(conn) != os.getuid():
                return  # the 0700 folder keeps other users out; this is the second lock
            conn.settimeout(REQUEST_TIMEOUT_S)
            root, prefix = installation()
            send_msg(conn, Hello(key=self.key, pid=os.getpid(), uid=os.getuid(), device=self.kind, idle_s=self.idle_s,
                                 root=root, prefix=prefix))
            req = recv_request(conn)
            if isinstance(req, StatusRequest):
                send_msg(conn, self.status())
            elif isinstance(req, JobRequest):
                self._job(conn, req)
            else:
                send_msg(conn, Stopping())
                self.stop.set()
        except (OSError, EOFError, ProtocolError):
            pass  # the client went away or broke the protocol: nothing of ours depends on it
        finally:
            conn.close()

    def status(self) -> Status:
        from kernelgen.verify.judge.session import descendants

        now = time.monotonic()
        root, prefix = installation()
        return Status(pid=os.getpid(), device=self.kind, key=self.key, uptime_s=now - self.started, idle_s=self.idle_s,
                      idle_for_s=0.0 if self.running else now - self.last, running=self.running, jobs=self.jobs,
                      fork_server=self.forks is not None and not self.forks.failed,
                      warm=[{"pid": p, "operator": o, "kernel_sha256": s, "idle_for_s": t} for p, o, s, t in self.pool.describe()],
                      root=root, prefix=prefix, tool=self.digest, env=service_env(), gpu_reserved=_reserved(),
                      pids=descendants(os.getpid()))

    def _job(self, conn: socket.socket, req: JobRequest) -> None:
        if not self.job_lock.acquire(blocking=False):
            send_msg(conn, Busy(running=self.running))
            return
        finished, gone = threading.Event(), threading.Event()
        try:
            self.running = describe(req)
            conn.settimeout(None)
            threading.Thread(target=self._watch, args=(conn, finished, gone), name="watch", daemon=True).start()
            self.warm.wait()
            if gone.is_set():
                return  # given up while this service was still starting
            if tool_digest() != self.digest:
                send_msg(conn, Refused(reason="KernelGen's files changed since this service started; it stops"))
                self.stop.set()
                return
            started = time.monotonic()
            send_msg(conn, self._answer(req, conn))
            print(f"kernelgen service {os.getpid()}: {self.running} in {time.monotonic() - started:.1f} s",
                  file=sys.stderr, flush=True)
        finally:
            finished.set()
            self.jobs += 1  # counted as soon as its answer is sent: the client may ask for the status next
            self._free_device_memory()
            self.running, self.last = "", time.monotonic()
            self.job_lock.release()

    def _free_device_memory(self) -> None:
        """Between commands: no tensor of the judge's left, the allocator's cache handed back, and
        every kept worker released when the device runs low."""
        gc.collect()
        torch = _cuda_torch()
        if torch is None:
            return
        torch.cuda.empty_cache()
        try:
            free, total = torch.cuda.mem_get_info()
        except RuntimeError:
            return
        if free < LOW_FREE_SHARE * total:
            self.pool.close()

    def _answer(self, req: JobRequest, conn: socket.socket) -> object:
        def emit(step: Step) -> None:
            try:
                send_msg(conn, step)
            except OSError:
                pass  # the watcher cancels the job

        try:
            return run_job(req, self.pool, emit)
        except KernelGenError as e:
            return Failed(error_type=type(e).__name__, message=e.message, hint=e.hint, exit_code=e.exit_code)
        except Exception as e:  # noqa: BLE001 - the command reports it; the service carries on
            traceback.print_exc()
            return Failed(error_type=type(e).__name__, message=scrub(str(e)) or type(e).__name__, exit_code=1)

    def _watch(self, conn: socket.socket, finished: threading.Event, gone: threading.Event) -> None:
        """A client that goes away mid-command (Ctrl-C) takes its work with it: every worker in use is
        killed — and every one the judge starts after, until the command ends — so the judge's next
        request fails at once instead of running to the end."""
        try:
            left = conn.recv(1) == b""
        except OSError:
            left = True
        if not left or finished.is_set():
            return
        gone.set()
        while not finished.wait(0.2):
            if self.forks is None:
                continue
            keep = self.pool.pids()
            for pid in self.forks.live_pids():
                if pid not in keep:
                    for kill in (os.killpg, os.kill):
                        try:
                            kill(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass


def _cuda_torch():  # noqa: ANN202 - the torch module, or None
    """torch, where this process has started CUDA (never imported or started here for this)."""
    torch = sys.modules.get("torch")
    try:
        return torch if torch is not None and torch.cuda.is_initialized() else None
    except AttributeError:  # a torch still importing
        return None


def _reserved() -> int | None:
    torch = _cuda_torch()
    return int(torch.cuda.memory_reserved()) if torch is not None else None


def main(argv: list[str] | None = None) -> int:
    from kernelgen.lifetime import tie_to_parent

    tie_to_parent()  # a batch worker's service dies with the worker (kernelgen.batch.services); any other outlives its command
    p = argparse.ArgumentParser(description="The KernelGen service (started by kernelgen, not by hand)")
    p.add_argument("--socket", type=Path, required=True)
    p.add_argument("--device", required=True, choices=["auto", "cuda", "npu", "cpu"])
    p.add_argument("--idle", type=float, default=IDLE_S, help="seconds without a command before it stops")
    p.add_argument("--workers", type=int, default=None, help="warm workers kept between commands (default 4)")
    p.add_argument("--warm-idle", type=float, default=WARM_IDLE_S, help="seconds a kept worker waits for its next command")
    args = p.parse_args(argv)
    service = Service(args.socket, args.device, args.idle, workers=args.workers, warm_idle_s=args.warm_idle)
    signal.signal(signal.SIGTERM, lambda *_: service.stop.set())
    signal.signal(signal.SIGINT, lambda *_: service.stop.set())
    service.serve()
    return 0
