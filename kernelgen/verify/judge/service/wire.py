"""The messages between a command and the KernelGen service: length-prefixed JSON frames on a Unix
socket (kernelgen.verify.protocol's framing), each validated by a pydantic model on receipt.

A connection carries one request. The service speaks first (`Hello`: its key, pid and uid, which the
client checks against its own key and the socket's peer credentials before it sends anything); the
client sends one request; the service answers a job with `Step` lines, then `Done` or `Failed` (or
`Busy`, `Refused`); a status or stop request with one message.
"""

from __future__ import annotations

import socket
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from kernelgen.verify.protocol import ProtocolError, recv, send
from kernelgen.verify.results import RunRecord


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- requests (command -> service) -----------------------------------------------------------------
class AccuracyJob(_Msg):
    """`kernelgen test`."""

    kind: Literal["accuracy"] = "accuracy"
    op_dir: str  # absolute
    kernel: str | None = None
    seeds: int | None = Field(default=None, ge=1, le=1000)
    seed: int | None = Field(default=None, ge=0)  # the seed base (--seed); None: a hash of the kernel and the spec


class PerformanceJob(_Msg):
    """`kernelgen bench`."""

    kind: Literal["performance"] = "performance"
    op_dir: str
    kernel: str | None = None
    no_compile: bool = False
    no_peers: bool = False
    fresh: bool = False
    graph: bool = False  # each plan timed in a CUDA graph too


class CheckJob(_Msg):
    """`kernelgen new`'s round 0: accuracy, then (when it passed and `measure`) performance, one judge."""

    kind: Literal["check"] = "check"
    op_dir: str
    measure: bool = True
    kernel_label: str = ""  # the kernel as the command's progress line names it (rounds/round_0/...)


Job = Annotated[Union[AccuracyJob, PerformanceJob, CheckJob], Field(discriminator="kind")]


class JobRequest(_Msg):
    kind: Literal["job"] = "job"
    device: str = Field(pattern=r"^(auto|cuda|npu|cpu)$")  # as the command was given it
    job: Job


class StatusRequest(_Msg):
    kind: Literal["status"] = "status"


class StopRequest(_Msg):
    kind: Literal["stop"] = "stop"


Request = Annotated[Union[JobRequest, StatusRequest, StopRequest], Field(discriminator="kind")]


# --- answers (service -> command) ------------------------------------------------------------------
class Hello(_Msg):
    kind: Literal["hello"] = "hello"
    key: str
    pid: int
    uid: int
    device: str  # the device kind it serves
    idle_s: float  # it stops after this long without a command
    root: str = ""  # the installation it runs: the folder its kernelgen package is in (place.installation)
    prefix: str = ""  # and its Python environment (sys.prefix)


class WarmWorker(_Msg):
    pid: int
    operator: str
    kernel_sha256: str
    idle_for_s: float


class Status(_Msg):
    kind: Literal["status"] = "status"
    pid: int
    device: str
    key: str
    uptime_s: float
    idle_s: float
    idle_for_s: float
    running: str  # the command it is serving now, "" when idle
    jobs: int  # commands served
    fork_server: bool  # workers are forked from a warm process (False: each starts as a fresh one)
    warm: list[WarmWorker] = Field(default_factory=list)
    root: str = ""  # as Hello's
    prefix: str = ""
    tool: str = ""  # the hash of the tool's files it started with (place.tool_digest)
    env: dict[str, str] = Field(default_factory=dict)  # the variables it runs with and is keyed on (place.service_env)
    gpu_reserved: int | None = None  # bytes its own PyTorch allocator holds on the device; None: no device context
    pids: list[int] = Field(default_factory=list)  # its processes below it: fork server, workers, peer timers


class Stopping(_Msg):
    kind: Literal["stopping"] = "stopping"


class Busy(_Msg):
    kind: Literal["busy"] = "busy"
    running: str


class Refused(_Msg):
    kind: Literal["refused"] = "refused"
    reason: str


class Step(_Msg):
    kind: Literal["step"] = "step"
    text: str
    warning: bool = False


class WorkerUse(_Msg):
    pid: int
    kernel_sha256: str
    reused: bool  # kept warm from an earlier command on the same kernel file


class Done(_Msg):
    kind: Literal["done"] = "done"
    op_name: str
    device_kind: str
    interpreter: bool
    accuracy: RunRecord | None = None
    performance: RunRecord | None = None
    workers: list[WorkerUse] = Field(default_factory=list)


class Failed(_Msg):
    """A domain error (kernelgen.errors) the command would have raised itself."""

    kind: Literal["failed"] = "failed"
    error_type: str
    message: str
    hint: str | None = None
    exit_code: int


Answer = Annotated[Union[Hello, Status, Stopping, Busy, Refused, Step, Done, Failed], Field(discriminator="kind")]
_REQUEST, _ANSWER = TypeAdapter(Request), TypeAdapter(Answer)


def send_msg(sock: socket.socket, msg: _Msg) -> None:
    send(sock, msg.model_dump(mode="json"))


def recv_request(sock: socket.socket) -> JobRequest | StatusRequest | StopRequest:
    return _validated(_REQUEST, recv(sock))


def recv_answer(sock: socket.socket) -> Hello | Status | Stopping | Busy | Refused | Step | Done | Failed:
    return _validated(_ANSWER, recv(sock))


def _validated(adapter: TypeAdapter, data: dict) -> object:
    try:
        return adapter.validate_python(data)
    except ValidationError as e:
        first = e.errors(include_url=False)[0]
        raise ProtocolError(f"a message that does not validate: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
