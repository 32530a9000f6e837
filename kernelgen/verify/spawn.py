"""The wire between the judge and its fork server (kernelgen.verify.worker.zygote): one SOCK_SEQPACKET
socket, one JSON message per packet (message boundaries kept, file descriptors attached with
SCM_RIGHTS), every message validated by a pydantic model on receipt, on both sides.

The judge asks for a worker (`SpawnRequest`, with the worker's socket, its arena handoff socket and
the write ends of its stdout and stderr pipes attached); the fork server answers with the new
process's id (`Spawned`), and says when any of its children ended (`Exited`), since only it can
wait for them. Both sides import this; it runs nothing.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

# A spawn request carries the sandbox policy and an environment: a few KiB. A packet far larger is
# not one of ours.
MAX_PACKET = 1 << 20
SPAWN_FDS = 4  # the worker's socket, its handoff socket, its stdout and its stderr (write ends)


class SpawnError(Exception):
    """The other side of the fork server's socket broke the protocol, or went away."""


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpawnRequest(_Msg):
    kind: Literal["spawn"] = "spawn"
    tag: int  # the judge's number for this request, echoed in the answer
    device: Literal["cpu", "cuda", "npu"]
    policy: dict[str, Any]  # kernelgen.verify.policy.SandboxPolicy's fields, as the worker's --policy takes them
    env: dict[str, str]  # the worker's whole environment (it replaces the fork server's)
    cwd: str  # the worker's scratch folder


class Ready(_Msg):
    kind: Literal["ready"] = "ready"
    pid: int
    torch: str  # the versions the fork server imported: every worker it forks runs them
    triton: str
    error: str = ""  # why it will fork nothing (a device started during its imports: no child could use it)


class Spawned(_Msg):
    kind: Literal["spawned"] = "spawned"
    tag: int
    pid: int = 0
    error: str = ""  # why no worker was started (pid 0)


class Exited(_Msg):
    kind: Literal["exited"] = "exited"
    pid: int
    code: int  # as subprocess.Popen.returncode: the exit status, or minus the signal that ended it


Message = Union[SpawnRequest, Ready, Spawned, Exited]
_MESSAGE = TypeAdapter(Message)


def send(sock: socket.socket, msg: _Msg, fds: list[int] | tuple[int, ...] = ()) -> None:
    data = msg.model_dump_json().encode()
    if len(data) > MAX_PACKET:
        raise SpawnError(f"a message of {len(data)} bytes exceeds {MAX_PACKET}")
    try:
        if fds:
            socket.send_fds(sock, [data], list(fds))
        else:
            sock.send(data)
    except OSError as e:
        raise SpawnError(f"the other side went away: {e.strerror}") from None


def recv(sock: socket.socket, *, max_fds: int = 0) -> tuple[Message, list[int]]:
    """One message and the descriptors that came with it (closed here when the message is refused)."""
    try:
        data, fds, flags, _ = socket.recv_fds(sock, MAX_PACKET + 1, max_fds)
    except OSError as e:
        raise SpawnError(f"the other side went away: {e.strerror}") from None
    if not data:
        raise SpawnError("the other side closed the connection")
    try:
        if len(data) > MAX_PACKET or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise SpawnError("a message too large, or with more descriptors than expected")
        try:
            msg = _MESSAGE.validate_python(json.loads(data))
        except (ValueError, ValidationError) as e:
            raise SpawnError(f"a message that does not validate: {str(e).splitlines()[0]}") from None
        if fds and not isinstance(msg, SpawnRequest):
            raise SpawnError(f"descriptors came with a {msg.kind!r} message")
    except SpawnError:
        _close(fds)
        raise
    return msg, list(fds)


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass

