"""A command's side of the KernelGen service: find it, start it if there is none, check that it is the
one this command would be, hand it the judging, and fall back to doing the work in this process
whenever anything about it is not right. The service is never required.

Trust: a socket is used only if it sits in the user's private runtime folder, is a socket owned by
the user, and its peer (SO_PEERCRED) is a process of the user that speaks first with this command's
own key (the installed tool's hash, the Python, the device, the environment that matters:
kernelgen.verify.judge.service.place). A socket nobody listens on is stale and removed; a service
with another key (an older installation, another environment) is asked to stop and its socket
removed; it is never sent a job. What comes back is validated (pydantic) and scrubbed of this
process's secrets again before anything prints it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from kernelgen.verify.judge.service.place import (PlaceError, installation, runtime_dir, service_env, service_key,
                                                  socket_path)
from kernelgen.verify.judge.service.wire import (Answer, Busy, Done, Failed, Hello, JobRequest, Refused, Status,
                                                 StatusRequest, Step, Stopping, StopRequest, recv_answer, send_msg)
from kernelgen.verify.protocol import ProtocolError

Say = Callable[[str], None]
HELLO_TIMEOUT_S = 15.0  # the service's accept loop answers at once; a loaded 2-core machine needs slack
START_TIMEOUT_S = 300.0  # a new service imports torch (and its fork server torch and Triton) first
# Started as `-c` with the tool's own folder first on the path, so the service imports the very
# kernelgen this command runs (it hashes it into its key), whatever the working folder holds.
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from kernelgen.verify.judge.service.daemon import main; sys.exit(main(sys.argv[2:]))"


class Unusable(Exception):
    """This service cannot be used for this command; the message says why (a note for the user)."""


def disabled() -> bool:
    return os.environ.get("KERNELGEN_NO_SERVICE", "").strip().lower() not in ("", "0", "no", "false")


@dataclass
class Handle:
    """A service this command intends to use: where it is, and the process this command started for it."""

    path: Path
    key: str
    choice: str
    started: subprocess.Popen | None = None


def _peer(sock: socket.socket) -> tuple[int, int]:
    pid, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid


def connect(path: Path, key: str, *, timeout_s: float = HELLO_TIMEOUT_S) -> tuple[socket.socket, Hello] | None:
    """A connection to the service at `path` that has proven it is ours and has `key`; None when none
    listens there (a stale socket is removed); Unusable when one does but must not be trusted."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if st.st_uid != os.getuid():
        raise Unusable(f"{path} belongs to uid {st.st_uid}, not this user: not used")
    if not stat.S_ISSOCK(st.st_mode):
        _remove(path, st)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        _remove(path, st)  # a service that died left it behind
        return None
    except OSError as e:
        sock.close()
        raise Unusable(f"cannot connect to {path}: {e.strerror}") from None
    try:
        pid, uid = _peer(sock)
        if uid != os.getuid():
            raise Unusable(f"the process behind {path} runs as uid {uid}, not this user: not used")
        hello = recv_answer(sock)
        if not isinstance(hello, Hello) or hello.pid != pid or hello.uid != uid:
            raise Unusable(f"the process behind {path} did not introduce itself as a KernelGen service")
        if hello.key != key:
            _retire(sock, path, st)
            return None
    except (OSError, EOFError, ProtocolError) as e:
        sock.close()
        raise Unusable(f"the service at {path} did not answer properly ({e})") from None
    except Unusable:
        sock.close()
        raise
    return sock, hello


def _remove(path: Path, st: os.stat_result) -> None:
    """Unlink `path` if it is still the file we looked at (not one a new service just put there)."""
    try:
        if os.lstat(path).st_ino == st.st_ino:
            path.unlink()
    except FileNotFoundError:
        pass


def _retire(sock: socket.socket, path: Path, st: os.stat_result) -> None:
    """A service of ours with another key (KernelGen's files or the environment changed since it
    started): never given a job; asked to stop, its socket removed so a new one takes its place."""
    try:
        send_msg(sock, StopRequest())
    except OSError:
        pass
    sock.close()
    _remove(path, st)


def prepare(choice: str, *, idle_s: float | None = None, tied: bool = False) -> Handle | None:
    """The service for this command's device, started now (not waited for) if none answers; None when
    disabled (KERNELGEN_NO_SERVICE). Unusable (with its reason) when the runtime folder is not private.
    `tied`: one started here dies with this process (kernelgen.lifetime), as a batch worker's does;
    otherwise it outlives this command, for the next one."""
    if disabled():
        return None
    try:
        key = service_key(choice)
        path = socket_path(choice, key)
    except PlaceError as e:
        raise Unusable(str(e)) from None
    handle = Handle(path, key, choice)
    with _start_lock(path):
        found = connect(path, key)
        if found is not None:
            found[0].close()
            return handle
        handle.started = _spawn(path, choice, idle_s, tied)
    return handle


@contextlib.contextmanager
def _start_lock(path: Path) -> Iterator[None]:
    """Held while looking for and starting a service: two commands starting at once start one."""
    fd = os.open(str(path.with_suffix(".lock")), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _spawn(path: Path, choice: str, idle_s: float | None = None, tied: bool = False) -> subprocess.Popen:
    import kernelgen
    from kernelgen.lifetime import ENV as PARENT_ENV
    from kernelgen.lifetime import child_env

    # the service's stderr, kept for a post-mortem (only the user can read it)
    log = os.fdopen(os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
    # The service's own settings are not part of its environment (nor of its key): passed as options.
    idle = idle_s if idle_s is not None else os.environ.get("KERNELGEN_SERVICE_IDLE")
    workers = os.environ.get("KERNELGEN_SERVICE_WORKERS")
    warm_idle = os.environ.get("KERNELGEN_SERVICE_WARM_IDLE")
    options = [*(["--idle", str(idle)] if idle is not None else []), *(["--workers", workers] if workers else []),
               *(["--warm-idle", warm_idle] if warm_idle else [])]
    # The parent it ties itself to is named only when asked: never one a stray variable names.
    env = {k: v for k, v in service_env().items() if k != PARENT_ENV}
    if tied:
        env[PARENT_ENV] = child_env()[PARENT_ENV]
    try:
        return subprocess.Popen([sys.executable, "-P", "-c", _BOOT, str(Path(kernelgen.__file__).resolve().parent.parent),
                                 "--socket", str(path), "--device", choice, *options],
                                env=env, cwd=str(path.parent), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, start_new_session=True, close_fds=True)
    finally:
        log.close()


def wait_ready(handle: Handle, timeout_s: float = START_TIMEOUT_S) -> tuple[socket.socket, Hello]:
    """A verified connection to the service, waiting for one this command started; Unusable if none."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = connect(handle.path, handle.key)
        if found is not None:
            return found
        if handle.started is None or time.monotonic() > deadline:
            raise Unusable("no service answers" if handle.started is None else f"the service did not start within {timeout_s:.0f} s")
        if handle.started.poll() is not None:
            raise Unusable(f"the service exited at start ({_log_tail(handle.path)})")
        time.sleep(0.05)


def _log_tail(path: Path) -> str:
    try:
        lines = path.with_suffix(".log").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "nothing logged"


def run(handle: Handle, request: JobRequest, on_step: Say, warn: Say, note: Say) -> Done | None:
    """The job's answer from the service; None (after a note saying why) when this command must do
    the work itself. Domain errors the service met are raised here as the command would raise them."""
    try:
        sock, hello = wait_ready(handle)
    except Unusable as e:
        note(f"the KernelGen service could not be used ({e}); running in this process")
        return None
    if handle.started is not None:
        note(f"started the KernelGen service for {hello.device} (pid {hello.pid}): later commands reuse it; it stops "
             f"after {idle_words(hello.idle_s)} without one (`kernelgen serve --stop` stops it now)")
        handle.started = None
    try:
        with sock:
            sock.settimeout(None)
            send_msg(sock, request)
            return _follow(sock, on_step, warn, note)
    except (OSError, EOFError, ProtocolError) as e:
        note(f"the KernelGen service stopped answering ({e}); running in this process")
        return None


def idle_words(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _follow(sock: socket.socket, on_step: Say, warn: Say, note: Say) -> Done | None:
    from kernelgen.verify.judge.scrub import scrub

    while True:
        answer: Answer = recv_answer(sock)
        if isinstance(answer, Step):
            (warn if answer.warning else on_step)(scrub(answer.text))
        elif isinstance(answer, Done):
            return _scrubbed(answer)
        elif isinstance(answer, Failed):
            raise _domain_error(answer)
        elif isinstance(answer, Busy):
            note(f"the KernelGen service is busy ({answer.running}); running in this process")
            return None
        elif isinstance(answer, Refused):
            note(f"the KernelGen service refused: {answer.reason}; running in this process")
            return None
        else:
            raise ProtocolError(f"an unexpected {answer.kind!r} message")


def _scrubbed(done: Done) -> Done:
    """Every text in the answer scrubbed with this process's secrets (the service has none of them)."""
    from kernelgen.verify.judge.scrub import scrub

    def walk(v: object) -> object:
        if isinstance(v, str):
            return scrub(v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return Done.model_validate(walk(done.model_dump(mode="json")))


def _domain_error(f: Failed) -> Exception:
    from kernelgen.errors import KernelGenError, UsageError

    from kernelgen.verify.judge.scrub import scrub

    error = (UsageError if f.exit_code == 2 else KernelGenError)(scrub(f.message), hint=scrub(f.hint) if f.hint else None)
    error.exit_code = f.exit_code
    return error


# --- kernelgen serve ---------------------------------------------------------------------------------
@dataclass
class Found:
    """One service socket of this user: the service's status (or why there is none), and whether it
    is this installation's (the same kernelgen folder and Python environment as this command)."""

    path: Path
    answer: Status | str
    ours: bool


def survey() -> list[Found]:
    """Every service socket of this user, asked for its status."""
    mine = installation()
    out = []
    for path in sorted(runtime_dir().glob("*.sock")):
        answer = _ask(path, StatusRequest())
        out.append(Found(path, answer, isinstance(answer, Status) and (answer.root, answer.prefix) == mine))
    return out


def _ask(path: Path, request: StatusRequest | StopRequest) -> Status | Stopping | str:
    try:
        st = os.lstat(path)
        if st.st_uid != os.getuid() or not stat.S_ISSOCK(st.st_mode):
            return "not a socket of this user: ignored"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(HELLO_TIMEOUT_S)
            sock.connect(str(path))
            pid, uid = _peer(sock)
            hello = recv_answer(sock)
            if not isinstance(hello, Hello) or hello.pid != pid or uid != os.getuid():
                return "not a KernelGen service: ignored"
            send_msg(sock, request)
            answer = recv_answer(sock)
            return answer if isinstance(answer, (Status, Stopping)) else f"answered {answer.kind!r}"
    except (ConnectionRefusedError, FileNotFoundError):
        try:
            _remove(path, os.lstat(path))
        except FileNotFoundError:
            pass
        return "stale (no process listens): removed"
    except (OSError, EOFError, ProtocolError) as e:
        return f"no answer ({e})"


def stop_found(found: list[Found]) -> list[tuple[Found, Stopping | str]]:
    """Ask each service found to stop; wait (up to 30 s) until their sockets are gone."""
    out = [(f, _ask(f.path, StopRequest())) for f in found]
    deadline = time.monotonic() + 30
    while any(f.path.exists() for f, a in out if isinstance(a, Stopping)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return out


def stop_matching(wanted: Callable[[dict[str, str]], bool]) -> list[int]:
    """Stop this installation's services whose environment `wanted` accepts; their pids."""
    found = [f for f in survey() if f.ours and isinstance(f.answer, Status) and wanted(f.answer.env)]
    return [f.answer.pid for f, a in stop_found(found) if isinstance(a, Stopping) and isinstance(f.answer, Status)]
