"""The fork server: a process that has imported torch, Triton and the worker's own modules — and has
touched no device, no kernel, no candidate — and forks one fresh worker per request.

`python -P -m kernelgen.verify.worker.zygote --control FD --device KIND` (the judge starts it:
kernelgen.verify.judge.forkserver). A fresh Python process spends ~3 s importing torch and Triton
before a worker can start its device (H200, 2026-11-25; 4-8 s on a loaded 2-core CPU machine); a
fork of this one takes ~35 ms. Nothing here initialises CUDA: a CUDA context does not survive a
fork, so each child starts its own after the fork, as an exec'd worker does.

A child is exactly what `python -m kernelgen.verify.worker` would be: a new session, stdin from
/dev/null, stdout and stderr into the judge's pipes, its sockets as fds 3 and 4, every other
descriptor closed (this server's socket included: a candidate cannot ask for more workers or read
another's request), the environment the judge computed for it, its scratch folder as working
folder — and then the same bootstrap (kernelgen.verify.worker.server.main), which applies the
sandbox before any candidate is imported. It dies with this server (PR_SET_PDEATHSIG), which dies
with the judge. One child serves one judge's worker: it never returns here.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import signal
import socket
import sys
import tempfile
import traceback

from kernelgen.verify.spawn import SPAWN_FDS, Exited, Ready, SpawnError, SpawnRequest, Spawned, recv, send

_FIRST_FREE_FD = 5  # 0-2 standard streams, 3 the worker's socket, 4 its handoff socket


def preload(device: str) -> None:
    """Everything a worker imports before its first candidate, so no child imports it again."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton: its standard library is jitted at import
    import torch  # noqa: F401
    import triton  # noqa: F401

    try:  # the worker's tamper snapshot imports it (kernelgen.verify.worker.tamper): 3 s of a child's start
        import torch._dynamo  # noqa: F401
    except Exception:  # noqa: BLE001 - pragma: no cover - the child imports it itself then
        pass
    from kernelgen.verify import poison, protocol, timing  # noqa: F401
    from kernelgen.verify.worker import guard, sandbox, server, tamper  # noqa: F401


def _become_worker(req: SpawnRequest, fds: list[int], control: socket.socket, wakeup: tuple[int, int],
                   parent: int) -> None:
    """In the child: turn into the worker the request describes; never returns. `parent`: this fork
    server's pid (the worker dies with it, or exits at once if it is gone already)."""
    code = 3
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.detach()  # the fd is closed below with the rest; no object may close a reused number later
        os.setsid()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]  # out of the way of the targets
        null = os.open(os.devnull, os.O_RDONLY)
        for src, target in ((null, 0), (high[2], 1), (high[3], 2), (high[0], 3), (high[1], 4)):
            os.dup2(src, target)
        os.closerange(_FIRST_FREE_FD, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
        del wakeup
        os.environ.clear()
        os.environ.update(req.env)
        # tempfile caches the folder it chose: here, the fork server's own TMPDIR, which this worker's
        # sandbox may not write; on a GPU Triton compiles through a temporary .ptx there, and every
        # check of a served command failed with EACCES (H200, 2026-11-26). Choose again from req.env.
        tempfile.tempdir = None
        os.chdir(req.cwd)
        from kernelgen.verify.worker import server

        code = server.main(["--socket", "3", "--handoff", "4", "--device", req.device,
                            "--policy", json.dumps(req.policy), "--parent", str(parent)])
    except BaseException:  # noqa: BLE001 - the judge reads why from the worker's stderr
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - pragma: no cover
            pass
    finally:
        os._exit(code if isinstance(code, int) else 3)


def forkable(device: str) -> str:
    """Why a child forked from here could not use the device ("" when it can). A device context made
    before a fork is unusable in every child, and an import may have started the driver without torch
    knowing (cuInit through a device count): a child is forked now and must start CUDA and compute on
    it. Better no child at all (the judge starts fresh workers) than workers failing at their first
    tensor. The probe runs no candidate code; its context dies with it."""
    import torch

    if device == "cpu":
        return ""
    if device != "cuda":
        return f"forked {device} workers are not supported"
    if torch.cuda.is_initialized():
        return "CUDA was started while importing"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if float(torch.ones(4, device="cuda").sum()) == 4.0 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return "" if os.waitstatus_to_exitcode(status) == 0 else "a forked child could not start CUDA"


class Zygote:
    def __init__(self, control: socket.socket, device: str):
        self.control = control
        self.device = device
        self.children: set[int] = set()
        self.wakeup = os.pipe()
        for fd in self.wakeup:
            os.set_blocking(fd, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select through the wakeup fd
        signal.set_wakeup_fd(self.wakeup[1])

    def serve(self) -> None:
        import torch
        import triton

        problem = forkable(self.device)
        send(self.control, Ready(pid=os.getpid(), torch=torch.__version__, triton=triton.__version__, error=problem))
        if problem:
            return
        while True:
            ready, _, _ = select.select([self.control, self.wakeup[0]], [], [])
            if self.wakeup[0] in ready:
                try:
                    os.read(self.wakeup[0], 4096)
                except BlockingIOError:
                    pass
            self._reap()
            if self.control in ready and not self._request():
                return

    def _request(self) -> bool:
        """One request; False when the judge is gone (every child is then killed)."""
        try:
            msg, fds = recv(self.control, max_fds=SPAWN_FDS)
        except SpawnError:
            self._kill_all()
            return False
        if not isinstance(msg, SpawnRequest):
            return True
        try:
            if len(fds) != SPAWN_FDS or msg.device != self.device:
                send(self.control, Spawned(tag=msg.tag, error=f"a request with {len(fds)} descriptors for "
                                           f"{msg.device} (this server forks {SPAWN_FDS} for {self.device})"))
                return True
            parent = os.getpid()
            pid = os.fork()
            if pid == 0:
                _become_worker(msg, fds, self.control, self.wakeup, parent)
            self.children.add(pid)
            send(self.control, Spawned(tag=msg.tag, pid=pid))
        except SpawnError:
            self._kill_all()
            return False
        except OSError as e:  # fork refused: out of processes or memory
            send(self.control, Spawned(tag=msg.tag, error=f"fork failed: {e.strerror}"))
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)
            try:
                send(self.control, Exited(pid=pid, code=os.waitstatus_to_exitcode(status)))
            except SpawnError:
                pass  # the judge is gone; the next select sees it

    def _kill_all(self) -> None:
        for pid in list(self.children):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="KernelGen's worker fork server (started by the judge, not by hand)")
    p.add_argument("--control", type=int, required=True, help="a SOCK_SEQPACKET socket to the judge")
    p.add_argument("--device", required=True, choices=["cpu", "cuda", "npu"])
    args = p.parse_args(argv)
    from kernelgen.lifetime import tie_to_parent
    from kernelgen.verify.worker.sandbox import die_with_parent
    from kernelgen.verify.policy import SandboxReport

    if not tie_to_parent():  # this server, and through it every worker, dies with the judge (or exits if it is gone)
        die_with_parent(SandboxReport())
    control = socket.socket(fileno=args.control)
    preload(args.device)
    Zygote(control, args.device).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
