"""The judge's handle on one sandboxed worker: start it, send a request, wait for the reply within a
time limit, read what it printed (capped, in bytes), and end it with everything it started.

A worker that hangs is killed (its PID namespace with it) and reported as a timeout; one that dies
is reported with its exit status and the tail of what it printed, scrubbed of secrets.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from kernelgen import precision
from kernelgen.devices import PIN_VARS, DeviceInfo
from kernelgen.verify.judge import compilecache, confinement
from kernelgen.verify.policy import DEFAULT_CPU_MEMORY
from kernelgen.verify.protocol import Arena, ProtocolError, Reply, parse_reply, recv, send
from kernelgen.verify.judge.scrub import scrub

START_TIMEOUT_S = 180.0  # importing torch and Triton on a loaded 2-core machine, or CUDA's first init
DEFAULT_REQUEST_TIMEOUT_S = 600.0  # one call or one timing under the interpreter; KERNELGEN_TIMEOUT overrides
CAPTURE_BYTES = 16 << 10  # kept from the start and from the end of each stream; the rest is counted, not kept
# What a worker inherits from the judge's environment: nothing secret, nothing that says where our LLM lives.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
             "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES",
             "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
             "TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "TRITON_F32_DEFAULT")
WORKER_ENV_LIMIT = "KERNELGEN_WORKER_MEMORY"


class WorkerFailure(Exception):
    """The worker timed out, crashed or broke the protocol; `status` says which."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status  # timeout | crash | error
        self.message = message


class _Capture:
    """Drains one stream so the worker never blocks on a full pipe; keeps its head and tail."""

    def __init__(self, stream: Any):
        self.head, self.tail, self.total = b"", b"", 0
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):
            self.total += len(chunk)
            if len(self.head) < CAPTURE_BYTES:
                self.head += chunk[: CAPTURE_BYTES - len(self.head)]
            self.tail = (self.tail + chunk)[-CAPTURE_BYTES:]

    def text(self) -> str:
        self._thread.join(timeout=2)
        if self.total <= 2 * CAPTURE_BYTES:
            body = self.head + self.tail[-(self.total - len(self.head)):] if self.total > len(self.head) else self.head
        else:
            body = self.head + f"\n[... {self.total - 2 * CAPTURE_BYTES} bytes not kept ...]\n".encode() + self.tail
        return scrub(body.decode("utf-8", errors="replace"))


def worker_environment(device: DeviceInfo, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW or k.startswith(("LC_", "NCCL_", "TORCH_SYMM", "NVSHMEM_"))}
    env.update(precision.worker_env())  # the user's TF32 setting, for the candidate's tl.dot
    env.update({
        "PYTHONPATH": os.pathsep.join(confinement.worker_python_path()),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1",
        "HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp"), "XDG_CACHE_HOME": str(scratch / "cache"),
        "TRITON_CACHE_DIR": str(scratch / "triton"), "TRITON_HOME": str(scratch / "home"),
        "KERNELGEN_DEVICE": device.kind,
    })
    if device.pin is not None and device.kind in PIN_VARS:
        # The id as the host names it (what the variable takes), not this process's ordinal: a judge
        # itself pinned to GPU 3 can start a worker on GPU 5, which sees only that one, as <kind>:0.
        env[PIN_VARS[device.kind]] = device.pin
    if device.interpreter:  # one thread each: the judge and the worker share a few cores
        env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


@dataclass(frozen=True)
class WorkerLaunch:
    """Everything a worker process is started from; the judge decided all of it."""

    device: str
    policy: dict[str, Any]  # kernelgen.verify.policy.SandboxPolicy's fields
    env: dict[str, str]
    cwd: Path  # the worker's scratch folder
    sock_fd: int  # the worker's end of its request socket
    handoff_fd: int  # and of the socket its arena's fd comes through


def _exec_worker(launch: WorkerLaunch) -> subprocess.Popen:
    """A fresh Python process running the worker's bootstrap: what every worker was before the fork server."""
    cmd = [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m", "kernelgen.verify.worker",
           "--socket", str(launch.sock_fd), "--handoff", str(launch.handoff_fd), "--device", launch.device,
           "--policy", json.dumps(launch.policy), "--parent", str(os.getpid())]
    return subprocess.Popen(cmd, cwd=launch.cwd, env=launch.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, pass_fds=(launch.sock_fd, launch.handoff_fd), start_new_session=True)


_launcher: Callable[[WorkerLaunch], Any] | None = None


def use_launcher(launcher: Callable[[WorkerLaunch], Any] | None) -> None:
    """Where workers come from in this process: a fork server's `launch` (the KernelGen service sets
    one: kernelgen.verify.judge.forkserver), or None for a fresh process each. A launcher that raises
    leaves that worker to a fresh process."""
    global _launcher
    _launcher = launcher


def launch_worker(launch: WorkerLaunch) -> Any:
    if _launcher is not None:
        try:
            return _launcher(launch)
        except Exception:  # noqa: BLE001 - the fork server is a speed-up, never a requirement
            pass
    return _exec_worker(launch)


def spare_worker(device: DeviceInfo, role: str = "record") -> WorkerSession | None:
    """A worker started now, to be given its arena and kernel later: its ~5 s of imports and device
    start run beside the caller's own work (the judge's start, the kernel's generation). None when
    it cannot start: the worker started later says why."""
    try:
        return WorkerSession(device, label="spare", role=role)
    except WorkerFailure:
        return None


@dataclass
class Spares:
    """The two workers a judge needs first, started before it: its first recording worker and its
    replay worker (each may be None: it could not start, and the judge starts its own)."""

    record: "WorkerSession | None"
    replay: "WorkerSession | None"

    @property
    def device(self) -> DeviceInfo | None:
        return next((w.device for w in (self.record, self.replay) if w is not None), None)

    @property
    def closed(self) -> bool:
        return all(w is None or w.closed for w in (self.record, self.replay))

    def close(self) -> None:
        for w in (self.record, self.replay):
            if w is not None:
                w.close()


@contextlib.contextmanager
def early_worker(choice: str) -> Iterator[Spares | None]:
    """The judge's recording and replay workers, started before this process imports torch, on the
    device `choice` most likely resolves to (auto: a GPU where the NVIDIA or ROCm driver's device
    node exists); a judge takes them only if its device turned out the same. Both start now because
    each takes ~5 s to import torch and start the device (6 s of a softmax `bench`'s 22 on an H100
    were spent waiting for a replay worker the judge started later); closed on leaving, if no judge
    took (and closed) them."""
    kind = os.environ.get("KERNELGEN_DEVICE", "auto") if choice == "auto" else choice
    if kind == "auto":
        kind = "cuda" if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd") else "cpu"
    spares = None
    if kind in ("cuda", "npu", "cpu"):
        device = DeviceInfo(kind, kind, interpreter=kind == "cpu")
        spares = Spares(spare_worker(device), spare_worker(device, role="replay"))
    try:
        yield spares
    finally:
        if spares is not None:
            spares.close()


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, found through /proc (those a candidate re-parented included,
    when `pid` is a subreaper)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class WorkerSession:
    """One sandboxed worker. Started without an arena (a spare, warming up while the judge does its
    own start), it takes one with `attach` before its first request; `arena_bytes` attaches at once."""

    def __init__(self, device: DeviceInfo, *, arena_bytes: int | None = None, label: str = "worker",
                 request_timeout_s: float | None = None, role: str = "record"):
        """`role`: record (a candidate's own process: it imports the kernel file) or replay (never imports a
        candidate: it runs the plans the judge validated; kernelgen.verify.worker.server)."""
        self.device = device
        self.label = label
        self.role = role
        self.request_timeout_s = request_timeout_s or float(os.environ.get("KERNELGEN_TIMEOUT", DEFAULT_REQUEST_TIMEOUT_S))
        self.scratch = Path(tempfile.mkdtemp(prefix="kernelgen-worker-"))
        for sub in ("home", "tmp", "cache", "triton"):
            (self.scratch / sub).mkdir()
        self.arena: Arena | None = None
        # The compile-cache folder of the one key this worker's kernels belong to (the judge sets it
        # when it loads the first): seeded into scratch/triton then, harvested back when it ends.
        self.compile_store: Path | None = None
        self.seeded: set[Path] = set()  # cache files another key's folder seeded: not harvested into this one
        self._sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._handoff, child_handoff = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        read, listed = confinement.python_read_paths(confinement.worker_python_path())
        memory = int(os.environ.get(WORKER_ENV_LIMIT, 0)) or (DEFAULT_CPU_MEMORY if device.interpreter else 32 << 30)
        self.cgroups = confinement.make_cgroups(f"kernelgen-{os.getpid()}-{id(self)}", pids_max=256, memory_max=memory)
        policy = {"scratch": str(self.scratch), "read_paths": read, "list_paths": listed, "interpreter": device.interpreter,
                  "cpu_memory": memory, "cgroups": self.cgroups,
                  "namespaces": os.environ.get("KERNELGEN_SANDBOX", "on") != "off",
                  "landlock": os.environ.get("KERNELGEN_SANDBOX", "on") != "off", "role": role}
        self.started = time.monotonic()
        self.proc = launch_worker(WorkerLaunch(device.kind, policy, worker_environment(device, self.scratch), self.scratch,
                                               child.fileno(), child_handoff.fileno()))
        child.close()
        child_handoff.close()
        self._out, self._err = _Capture(self.proc.stdout), _Capture(self.proc.stderr)
        self.closed = False
        hello = self._reply(START_TIMEOUT_S, "start")
        if not hello.ok:
            self.kill()
            raise WorkerFailure("crash", scrub(hello.error) + self._tails())
        self.info = hello.info
        sandbox_report = hello.info.get("sandbox") or {}
        self.sandbox_missing = [scrub(str(m)) for m in sandbox_report.get("missing", [])]
        if arena_bytes:
            self.attach(arena_bytes)

    def attach(self, arena_bytes: int) -> None:
        """A fresh shared-memory arena of `arena_bytes`, its fd passed to the worker (SCM_RIGHTS)."""
        if self.closed:
            raise WorkerFailure("error", "the worker was already stopped")
        arena = Arena.create(arena_bytes)
        try:
            socket.send_fds(self._handoff, [b"a"], [arena.fd])
        except OSError:
            arena.close()
            raise self._died() from None
        old, self.arena = self.arena, arena
        if old is not None:
            old.close()
        # answered once the worker's imports and device start are done: the start's time limit
        reply = self.request({"op": "arena"}, timeout_s=START_TIMEOUT_S)
        if not reply.ok:
            self.kill()
            raise WorkerFailure("crash", f"the worker could not start: {reply.error}")

    def take(self, label: str, arena_bytes: int) -> bool:
        """Put a spare to use: its label and arena. False when it died waiting (start another)."""
        if self.closed or self.proc.poll() is not None:
            self.close()
            return False
        self.label = label
        try:
            self.attach(arena_bytes)
        except WorkerFailure:
            return False
        return True

    # --- requests ------------------------------------------------------------------------------
    def request(self, payload: dict[str, Any], *, timeout_s: float | None = None) -> Reply:
        if self.closed:
            raise WorkerFailure("error", "the worker was already stopped")
        try:
            send(self._sock, payload)
        except OSError:
            raise self._died() from None
        return self._reply(timeout_s or self.request_timeout_s, str(payload.get("op")))

    def _reply(self, timeout_s: float, what: str) -> Reply:
        self._sock.settimeout(timeout_s)
        try:
            data = recv(self._sock)
        except socket.timeout:
            self.kill()
            raise WorkerFailure("timeout", f"the worker did not answer {what!r} within {timeout_s:.0f} s; it was "
                                "killed with every process it started") from None
        except (EOFError, OSError):
            raise self._died() from None
        except ProtocolError as e:
            self.kill()
            raise WorkerFailure("error", f"the worker broke the protocol: {e}") from None
        try:
            reply = parse_reply(data)
        except ProtocolError as e:
            self.kill()
            raise WorkerFailure("error", f"the worker broke the protocol: {e}") from None
        reply.error = scrub(reply.error)
        return reply

    def _died(self) -> WorkerFailure:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is not None and code < 0:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        elif code is not None and code > 128:
            how = f"exit status {code} (signal {code - 128} in the sandbox)"
        else:
            how = f"exit status {code}"
        return WorkerFailure("crash", f"the worker died ({how}) without answering" + self._tails())

    def _tails(self) -> str:
        err, out = self._err.text().strip(), self._out.text().strip()
        tail = "\n".join((err or out).splitlines()[-20:])
        return f"\n{tail}" if tail else ""

    def output(self) -> str:
        """What the worker printed (head and tail of each stream, scrubbed)."""
        return (self._out.text() + self._err.text()).strip()

    # --- ending -----------------------------------------------------------------------------------
    def kill(self) -> None:
        if self.proc.poll() is None or descendants(self.proc.pid):
            for pid in reversed(descendants(self.proc.pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep
            pass
        self._cleanup()

    def close(self) -> None:
        """Say goodbye, then kill: the worker's own interpreter shutdown (torch, Triton, the device
        context) took ~1 s and leaves nothing the judge needs."""
        if self.closed:
            return
        if self.proc.poll() is None:
            try:
                send(self._sock, {"op": "bye"})
                self._sock.settimeout(10)
                recv(self._sock)
            except (OSError, EOFError, ProtocolError, socket.timeout):
                pass
        self.kill()

    def _cleanup(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._sock.close()
        self._handoff.close()
        if self.arena is not None:
            self.arena.close()
        confinement.remove_cgroups(self.cgroups)
        if self.compile_store is not None:
            try:
                compilecache.harvest(self.scratch / "triton", self.compile_store, skip=self.seeded)
            except OSError:  # a full disk or a vanished folder costs the next run a compile, nothing more
                pass
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "WorkerSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
