"""The wire between the judge and a sandboxed worker: JSON frames on a Unix socket, tensor bytes
through a shared-memory arena.

Nothing the worker sends is unpickled or evaluated: every reply is length-checked JSON, validated by
a pydantic model, and every tensor is plain bytes plus (dtype, shape, stride) that the judge checks
against its own limits before it copies them out. The arena is a memfd the judge creates and seals
against resizing, so a worker cannot make the judge's mapping fault (SIGBUS) by shrinking it; a
worker that scribbles over the arena while the judge copies only spoils its own outputs.
"""

from __future__ import annotations

import json
import mmap
import os
import socket
import struct
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# A frame larger than this is a protocol violation (the biggest legitimate ones carry a kernel file
# or a traceback; tensors travel through the arena).
MAX_FRAME = 8 << 20
ALIGN = 64  # bytes between tensors in the arena
_HEADER = struct.Struct(">I")

# dtypes that may cross the boundary, with their element sizes.
DTYPE_SIZES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
               "int8": 1, "uint8": 1, "bool": 1}


class ProtocolError(Exception):
    """The other side broke the protocol (a malformed or oversized frame, a bad tensor header)."""


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorRef(_Msg):
    """A strided tensor whose storage span lies in the arena at `offset` (bytes)."""

    dtype: str
    shape: list[int]
    stride: list[int]
    span: int  # elements of storage the view covers, from its first element
    offset: int  # byte offset in the arena

    @property
    def nbytes(self) -> int:
        return self.span * DTYPE_SIZES[self.dtype]


class OtherValue(_Msg):
    """Something that is not a plain tensor (a list, a number, a Tensor subclass, None)."""

    type_name: str


Value = TensorRef | OtherValue


class CallReport(_Msg):
    """What the worker's in-process guard saw during one call: evidence, never the only evidence."""

    launches: int = 0
    violations: list[dict[str, str]] = Field(default_factory=list)  # {"code", "message"}
    threads_started: int = 0
    fresh: list[bool] = Field(default_factory=list)  # per output: allocated during the call
    configs: list[str] = Field(default_factory=list)  # each launch's kernel, grid and constants


class Reply(_Msg):
    ok: bool
    error: str = ""  # the candidate's exception with its last frames (scrubbed by the judge)
    kind: Literal["hello", "loaded", "stored", "called", "timed", "host", "synced", "bye", "batch", "probed",
                  "recorded", "planned", "failed"] = "failed"
    outputs: list[Value] = Field(default_factory=list)
    inputs_after: list[TensorRef] = Field(default_factory=list)
    report: CallReport | None = None
    times_ms: list[float] = Field(default_factory=list)
    calls: int = 0
    launches: int = 0
    host_us: float | None = None
    info: dict[str, Any] = Field(default_factory=dict)  # hello: pid, versions, the sandbox's report
    replies: list["Reply"] = Field(default_factory=list)  # batch: one per request, in order, up to the first that failed


def send(sock: socket.socket, payload: dict[str, Any]) -> None:
    data = json.dumps(payload, separators=(",", ":")).encode()
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds {MAX_FRAME}")
    sock.sendall(_HEADER.pack(len(data)) + data)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(sock: socket.socket) -> dict[str, Any]:
    (n,) = _HEADER.unpack(_recv_exactly(sock, _HEADER.size))
    if n > MAX_FRAME:
        raise ProtocolError(f"frame of {n} bytes exceeds {MAX_FRAME}")
    try:
        data = json.loads(_recv_exactly(sock, n))
    except ValueError as e:
        raise ProtocolError(f"a frame that is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ProtocolError("a frame that is not a JSON object")
    return data


def parse_reply(data: dict[str, Any]) -> Reply:
    try:
        return Reply.model_validate(data)
    except ValidationError as e:
        raise ProtocolError(f"a reply that does not validate: {e.errors(include_url=False)[0]['msg']}") from None


# --- the arena ------------------------------------------------------------------------------------
class Arena:
    """A shared-memory buffer both sides map. The judge creates it (`Arena.create`) sealed against
    resizing and hands the fd to the worker at spawn; the worker opens it with `Arena.attach`."""

    def __init__(self, fd: int, size: int):
        self.fd = fd
        self.size = size
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    @classmethod
    def create(cls, size: int) -> "Arena":
        size = max(mmap.PAGESIZE, -(-size // mmap.PAGESIZE) * mmap.PAGESIZE)
        fd = os.memfd_create("kernelgen-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)  # sparse: pages are backed only when written
        import fcntl

        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        return cls(fd, size)

    @classmethod
    def attach(cls, fd: int) -> "Arena":
        return cls(fd, os.fstat(fd).st_size)

    def close(self) -> None:
        self.map.close()
        os.close(self.fd)

    def write(self, t: Any, offset: int) -> TensorRef:
        """Copy tensor `t`'s storage span into the arena at `offset`; its view metadata alongside."""
        import torch

        dtype = str(t.dtype).replace("torch.", "")
        if dtype not in DTYPE_SIZES:
            raise ProtocolError(f"dtype {dtype} cannot cross the boundary")
        span = storage_span(t)
        ref = TensorRef(dtype=dtype, shape=list(t.shape), stride=list(t.stride()), span=span, offset=offset)
        if offset < 0 or offset + ref.nbytes > self.size:
            raise ProtocolError(f"{ref.nbytes} bytes at offset {offset} do not fit the {self.size}-byte arena")
        flat = t.as_strided((span,), (1,), t.storage_offset()) if span else t.new_empty(0)
        dst = torch.frombuffer(self.map, dtype=torch.uint8, count=ref.nbytes, offset=offset) if ref.nbytes else None
        if dst is not None:
            # straight from the device into the shared pages: a staging copy on the host first cost as
            # much again (~0.2 s per GiB) on every value that crossed
            dst.copy_(flat.detach().contiguous().view(torch.uint8).reshape(-1))
        return ref

    def read(self, ref: TensorRef, device: str, *, max_bytes: int) -> Any:
        """A private copy, on `device`, of the tensor `ref` describes: checked against the arena and
        `max_bytes` first, copied out before it is looked at."""
        import torch

        if ref.dtype not in DTYPE_SIZES:
            raise ProtocolError(f"unknown dtype {ref.dtype!r}")
        if len(ref.shape) != len(ref.stride) or len(ref.shape) > 8:
            raise ProtocolError("shape and stride disagree")
        if any(d < 0 for d in ref.shape) or any(s < 0 for s in ref.stride) or ref.span < 0:
            raise ProtocolError("negative sizes")
        need = 1 + sum((d - 1) * s for d, s in zip(ref.shape, ref.stride)) if all(ref.shape) else 0
        if need > ref.span:
            raise ProtocolError(f"the view reaches element {need - 1} of a {ref.span}-element span")
        if ref.nbytes > max_bytes:
            raise ProtocolError(f"{ref.nbytes} bytes exceed the {max_bytes} allowed for this value")
        if ref.offset < 0 or ref.offset + ref.nbytes > self.size:
            raise ProtocolError("the tensor lies outside the arena")
        dt = getattr(torch, ref.dtype)
        if ref.nbytes:
            shared = torch.frombuffer(self.map, dtype=torch.uint8, count=ref.nbytes, offset=ref.offset)
            # One copy out of the shared pages, straight onto `device`: private from then on (the other
            # side may write the arena during the copy, which only changes the values this copy holds).
            raw = shared.clone() if torch.device(device).type == "cpu" else \
                torch.empty(ref.nbytes, dtype=torch.uint8, device=device).copy_(shared)
            base = raw.view(dt)
        else:
            base = torch.empty(0, dtype=dt, device=device)
        return base.as_strided(ref.shape, ref.stride, 0)


def storage_span(t: Any) -> int:
    """Elements of storage a (non-negatively strided) view reaches, from its first element."""
    if t.numel() == 0:
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(t.shape, t.stride()))
