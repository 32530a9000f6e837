"""Which of this host's accelerators a command uses: `--gpus all | N | 0,1` (one id alone as `3,`),
for `kernelgen batch` (one worker per device, kernelgen.batch.targets) and `kernelgen optimize` (the
first device is the operator's own, the others time candidates of its searches).

Ids are as the pinning variable takes them (kernelgen.devices.PIN_VARS): the ones it already lists
when it is set, else 0..count-1. What a batch's driver and `kernelgen serve --status` need to know of
a GPU (free memory, model, the memory each process holds) comes from `nvidia-smi`, so that asking
opens no CUDA context."""

from __future__ import annotations

import os

from kernelgen.devices import PIN_VARS, DeviceInfo, resolve_device
from kernelgen.errors import UsageError

GPUS_HINT = "--gpus all, a count such as 2, or ids such as 0,1 (one id alone: 3,)"


def _ids_from_env(var: str, count: int) -> list[str]:
    """Device ids as the pinning variable names them: the ones it already lists, else 0..count-1."""
    listed = [s.strip() for s in os.environ.get(var, "").split(",") if s.strip()]
    return listed[:count] if var in os.environ else [str(i) for i in range(count)]


def visible_devices(device: str = "auto") -> tuple[str, list[str]]:
    """The accelerator kind and the ids of every device of that kind this host shows."""
    info = resolve_device(device)
    if info.kind == "cuda":
        import torch

        return "cuda", _ids_from_env(PIN_VARS["cuda"], torch.cuda.device_count())
    if info.kind == "npu":
        import torch

        return "npu", _ids_from_env(PIN_VARS["npu"], torch.npu.device_count())  # type: ignore[attr-defined]
    return "cpu", []


def pick_ids(gpus: str, kind: str, ids: list[str]) -> list[str]:
    """The ids `--gpus` names among the visible `ids` of an accelerator `kind`; UsageError otherwise."""
    gpus = gpus.strip()
    if gpus == "all":
        return list(ids)
    if gpus.isdigit():
        n = int(gpus)
        if n < 1:
            raise UsageError(f"--gpus {gpus}: give at least one worker", hint=GPUS_HINT)
        if n > len(ids):
            raise UsageError(f"--gpus {n}: only {len(ids)} {kind} device(s) are visible ({', '.join(ids) or 'none'})",
                             hint=f"--gpus all, or a count up to {len(ids)}")
        return ids[:n]
    wanted = [s.strip() for s in gpus.split(",") if s.strip()]
    if not wanted or "," not in gpus:
        raise UsageError(f"--gpus {gpus!r}: not understood", hint=GPUS_HINT)
    unknown = [w for w in wanted if w not in ids]
    if unknown:
        raise UsageError(f"--gpus {gpus}: {', '.join(unknown)} not among the visible {kind} devices ({', '.join(ids)})",
                         hint=f"ids as {PIN_VARS.get(kind, 'the pinning variable')} / nvidia-smi name them")
    if len(set(wanted)) != len(wanted):
        raise UsageError(f"--gpus {gpus}: an id is named twice")
    return wanted


def search_devices(gpus: str, device: str = "auto") -> list[DeviceInfo]:
    """`kernelgen optimize --gpus`: the operator's own device first (this process computes on it),
    then the others, whose judges' workers are pinned to them. Every one keeps this process's
    tensors on the first device: inputs and outputs reach the others' workers through host memory."""
    kind, ids = visible_devices(device)
    if kind == "cpu":
        raise UsageError(f"--gpus {gpus}: no GPU is visible; on the CPU interpreter nothing is timed for a decision, "
                         "so there are no candidates to spread over devices", hint="leave --gpus out")
    picked = pick_ids(gpus, kind, ids)
    home = f"{kind}:{ids.index(picked[0])}"  # this process's ordinal of that id
    return [DeviceInfo(kind, home, interpreter=False, pin=d) for d in picked]  # type: ignore[arg-type]


# --- what the driver says about its GPUs (nvidia-smi: no CUDA context of this process's own) -------------
SMI_TIMEOUT_S = 20.0


def _smi(*args: str) -> list[list[str]] | None:
    """nvidia-smi's CSV rows (no header, no units); None without nvidia-smi or when it fails."""
    import subprocess

    try:
        text = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=SMI_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [[v.strip() for v in line.split(",")] for line in text.strip().splitlines() if line.strip()]


def gpu_memory(device_id: str) -> tuple[int, int] | None:
    """(free, total) bytes of one GPU (an id as CUDA_VISIBLE_DEVICES takes it); None when unknown."""
    rows = _smi("--query-gpu=memory.free,memory.total", "-i", device_id)
    try:
        free, total = (int(v) for v in rows[0]) if rows else (None, None)
    except ValueError:
        return None
    return (free << 20, total << 20) if free is not None and total is not None else None


def gpu_model(device_ids: list[str]) -> str:
    """The GPU model(s) of these ids ("NVIDIA H100 80GB HBM3"), "" when nvidia-smi cannot say."""
    names = []
    for d in device_ids:
        rows = _smi("--query-gpu=name", "-i", d)
        if rows and rows[0] and rows[0][0] not in names:
            names.append(rows[0][0])
    return " + ".join(sorted(names))


def gpu_processes() -> dict[int, int] | None:
    """Bytes of GPU memory per process id, as the driver counts them (every GPU of the host); None
    without nvidia-smi. In a container the ids may be the host's, and then match no process here."""
    rows = _smi("--query-compute-apps=pid,used_memory")
    if rows is None:
        return None
    out: dict[int, int] = {}
    for row in rows:
        try:
            out[int(row[0])] = out.get(int(row[0]), 0) + (int(row[1]) << 20)
        except (ValueError, IndexError):
            continue
    return out
