"""The judge's handle on a fork server (kernelgen.verify.worker.zygote): start it once, then get each
worker from it in ~35 ms of fork instead of ~3 s of a fresh Python importing torch and Triton.

It plugs into kernelgen.verify.judge.session as the way workers are launched (`session.use_launcher`):
the judge still makes every worker's scratch folder, cgroups, sockets, sandbox policy and environment
itself, exactly as for an exec'd worker; the fork server only turns them into a process. What the
judge gets back behaves as the `subprocess.Popen` it replaces: a pid (the worker's own session, so
its process group can be killed), `poll`, `wait`, and its stdout and stderr as pipes the judge drains.
A candidate never shares a process with another or with the judge: every request is a new child.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import shutil
import threading
from pathlib import Path
from typing import Any

from kernelgen.devices import DeviceInfo
from kernelgen.lifetime import ENV as LIFETIME_ENV
from kernelgen.verify.spawn import Exited, Ready, SpawnError, SpawnRequest, Spawned, recv, send

READY_TIMEOUT_S = 300.0  # importing torch, Triton and torch._dynamo on a loaded 2-core machine took 8-40 s
SPAWN_TIMEOUT_S = 30.0  # a fork; a loaded machine's scheduler is the only delay


class ForkServerError(Exception):
    """The fork server could not start, or stopped answering."""


class ForkedProcess:
    """A worker the fork server started, as much of `subprocess.Popen` as the judge uses."""

    def __init__(self, pid: int, stdout: Any, stderr: Any):
        self.pid = pid
        self.stdout, self.stderr = stdout, stderr
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return self.returncode  # type: ignore[return-value]


class ForkServer:
    """One fork server for one device kind; `launch` is session.use_launcher's launcher."""

    def __init__(self, device: DeviceInfo, *, stderr: Any = None):
        self.device = device
        self._home = tempfile.mkdtemp(prefix="kernelgen-zygote-")
        self._lock = threading.Lock()
        self._tag = 0
        self._waiting: dict[int, tuple[threading.Event, list[Spawned]]] = {}
        self._procs: dict[int, ForkedProcess] = {}
        self._early: dict[int, int] = {}  # exits reported before the spawn's answer was read
        self._ready = threading.Event()
        self.ready_info: Ready | None = None
        self.failed = ""
        self._sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        from kernelgen.verify.judge.session import worker_environment

        scratch = Path(self._home)
        for sub in ("home", "tmp", "cache", "triton"):
            (scratch / sub).mkdir()
        env = worker_environment(DeviceInfo(device.kind, device.torch_device, device.interpreter), scratch)
        env[LIFETIME_ENV] = str(os.getpid())  # it dies with this process, even one killed with SIGKILL (kernelgen.lifetime)
        cmd = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "kernelgen.verify.worker.zygote",
               "--control", str(child.fileno()), "--device", device.kind]
        self.proc = subprocess.Popen(cmd, cwd=scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=stderr if stderr is not None else subprocess.DEVNULL,
                                     pass_fds=(child.fileno(),), start_new_session=True)
        child.close()
        self._reader = threading.Thread(target=self._read, name="fork-server reader", daemon=True)
        self._reader.start()

    # --- the reader ------------------------------------------------------------------------------
    def _read(self) -> None:
        try:
            while True:
                msg, _ = recv(self._sock)
                if isinstance(msg, Ready):
                    self.ready_info = msg
                    self.failed = f"the fork server cannot fork workers: {msg.error}" if msg.error else ""
                    self._ready.set()
                elif isinstance(msg, Spawned):
                    with self._lock:
                        waiter = self._waiting.pop(msg.tag, None)
                    if waiter is not None:
                        waiter[1].append(msg)
                        waiter[0].set()
                elif isinstance(msg, Exited):
                    with self._lock:
                        proc = self._procs.pop(msg.pid, None)
                        if proc is None:
                            self._early[msg.pid] = msg.code
                    if proc is not None:
                        proc._exited(msg.code)
        except SpawnError as e:
            self.failed = self.failed or f"the fork server stopped: {e}"
        finally:
            self._ready.set()
            with self._lock:
                procs, self._procs = list(self._procs.values()), {}
                waiting, self._waiting = list(self._waiting.values()), {}
            for proc in procs:  # its children die with it (PR_SET_PDEATHSIG)
                proc._exited(-9)
            for event, _ in waiting:
                event.set()

    # --- launching -------------------------------------------------------------------------------
    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        return self._ready.wait(timeout_s) and self.ready_info is not None and not self.failed

    def launch(self, launch: Any) -> ForkedProcess:
        """A worker for session.WorkerSession (`launch`: a session.WorkerLaunch); ForkServerError when
        this server cannot give one (the session then starts the worker as a fresh process)."""
        if launch.device != self.device.kind:
            raise ForkServerError(f"this fork server forks {self.device.kind} workers, not {launch.device}")
        if not self.wait_ready():
            raise ForkServerError(self.failed or "the fork server did not start")
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        event, answer = threading.Event(), []
        with self._lock:
            self._tag += 1
            tag = self._tag
            self._waiting[tag] = (event, answer)
        try:
            send(self._sock, SpawnRequest(tag=tag, device=launch.device, policy=launch.policy, env=launch.env,
                                          cwd=str(launch.cwd)), [launch.sock_fd, launch.handoff_fd, out_w, err_w])
        except SpawnError as e:
            for fd in (out_r, err_r):
                os.close(fd)
            raise ForkServerError(str(e)) from None
        finally:
            os.close(out_w)
            os.close(err_w)
        if not event.wait(SPAWN_TIMEOUT_S) or not answer or not answer[0].pid:
            os.close(out_r)
            os.close(err_r)
            raise ForkServerError(answer[0].error if answer else self.failed or "the fork server did not answer")
        proc = ForkedProcess(answer[0].pid, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))
        with self._lock:
            early = self._early.pop(proc.pid, None)
            if early is None:
                self._procs[proc.pid] = proc
        if early is not None:
            proc._exited(early)
        return proc

    def live_pids(self) -> list[int]:
        with self._lock:
            return list(self._procs)

    def close(self) -> None:
        """End the fork server; every worker it forked dies with it."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:  # it kills its children and exits when it reads the end; still importing, it cannot read
            self.proc.wait(timeout=2 if self._ready.is_set() else 0.1)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # its children die with it (PR_SET_PDEATHSIG)
            self.proc.wait()
        self._reader.join(timeout=5)
        shutil.rmtree(self._home, ignore_errors=True)

