"""`kernelgen serve`: start the service for a device now, show the services, stop them. Each returns
the lines the command prints.

`--status` and `--stop` act on this installation's services (the same kernelgen folder and Python
environment as the command: place.installation), whatever their environment (a batch's workers each
run one with their own device pinned); `--all` on every KernelGen service of the user. A service of
this installation that this very command would not use says why: its files changed since it started,
or which variables of its environment differ (a `kernelgen batch` worker's, for one)."""

from __future__ import annotations

from kernelgen.errors import ServiceError
from kernelgen.serve import client
from kernelgen.verify.judge.service.place import PlaceError, service_env, service_key, tool_digest
from kernelgen.verify.judge.service.wire import Status, Stopping

GiB = 1 << 30
SHOWN_VARS = 3  # variables named when a service's environment differs from this command's


def start_service(device: str, idle_minutes: float | None = None) -> list[str]:
    """The service for `device`, started if none runs (and waited for)."""
    if client.disabled():
        raise ServiceError("KERNELGEN_NO_SERVICE is set: no service is started", hint="unset it to use one")
    try:
        handle = client.prepare(device, idle_s=idle_minutes * 60 if idle_minutes is not None else None)
        sock, hello = client.wait_ready(handle)
    except (client.Unusable, PlaceError) as e:
        raise ServiceError(f"the KernelGen service could not be started: {e}",
                           hint="every command still works without it, in its own process") from None
    sock.close()
    verb = "started" if handle.started is not None else "already running:"
    return [f"{verb} the KernelGen service for {hello.device} (pid {hello.pid}, socket {handle.path}); it stops after "
            f"{client.idle_words(hello.idle_s)} without a command (`kernelgen serve --stop` stops it now)"]


def _survey() -> list[client.Found]:
    try:
        return client.survey()
    except PlaceError as e:
        raise ServiceError(str(e)) from None


def service_status(everything: bool = False) -> list[str]:
    found = _survey()
    shown = [f for f in found if everything or f.ours]
    lines: list[str] = []
    usage = _gpu_usage() if any(isinstance(f.answer, Status) and f.answer.device != "cpu" for f in shown) else None
    for f in shown:
        if not isinstance(f.answer, Status):
            lines.append(f"{f.path.name}: {f.answer}")
            continue
        lines += _describe(f.answer, f.ours, usage)
    others = sum(1 for f in found if isinstance(f.answer, Status) and not f.ours)
    if not shown:
        lines.append("no KernelGen service of this installation is running" if others else
                     "no KernelGen service is running for this user")
    if others and not everything:
        lines.append(f"{others} service(s) of another KernelGen installation or Python environment: "
                     "`kernelgen serve --status --all` shows them")
    return lines


def _describe(s: Status, ours: bool, usage: dict[int, int] | None) -> list[str]:
    state = f"running {s.running}" if s.running else f"idle {s.idle_for_s:.0f} s of {s.idle_s:.0f} s"
    lines = [f"{s.device}: pid {s.pid}, up {s.uptime_s:.0f} s, {s.jobs} command(s), {state}, "
             f"workers {'forked from a warm process' if s.fork_server else 'started fresh'}{_whose(s, ours)}",
             f"  GPU memory: {_memory(s, usage)}"]
    for w in s.warm:
        lines.append(f"  warm worker pid {w.pid}: {w.operator}, kernel {w.kernel_sha256[:12]}, idle {w.idle_for_s:.0f} s")
    return lines


def _whose(s: Status, ours: bool) -> str:
    """Whose service it is, where this command would not use it."""
    if not ours:
        return f" [another KernelGen installation or Python environment: {s.root or 'unknown'} ({s.prefix or 'unknown'})]"
    try:
        if s.key == service_key(s.device):
            return ""
        digest = tool_digest()
    except PlaceError:
        return ""
    if s.tool and s.tool != digest:
        return " [this installation, started before its files changed: it refuses its next command and stops]"
    mine = service_env()
    names = [k for k in sorted(set(s.env) | set(mine)) if s.env.get(k) != mine.get(k)]
    shown = ", ".join(f"{k}={s.env.get(k, '(unset)')}" for k in names[:SHOWN_VARS]) + (", ..." if len(names) > SHOWN_VARS else "")
    batch = " (a `kernelgen batch` worker's)" if "KERNELGEN_BATCH_WORKER" in s.env else ""
    return f" [this installation, another environment{batch}: {shown or 'its device'}]"


def _memory(s: Status, usage: dict[int, int] | None) -> str:
    """The service's own allocator, and what the driver counts for it and the processes below it."""
    if s.device == "cpu":
        return "n/a on the CPU"
    own = "no device context" if s.gpu_reserved is None else f"its PyTorch allocator holds {s.gpu_reserved / GiB:.2f} GiB"
    if usage is None:
        return f"{own}; per process: n/a (no nvidia-smi)"
    procs = [(pid, usage[pid]) for pid in [s.pid, *s.pids] if pid in usage]
    if not procs:
        return f"{own}; nvidia-smi lists none of its processes (another PID namespace, or no context)"
    each = ", ".join(f"pid {pid} {b / GiB:.2f}" for pid, b in procs)
    return f"{sum(b for _, b in procs) / GiB:.2f} GiB in {len(procs)} process(es) ({each}); {own}"


def _gpu_usage() -> dict[int, int] | None:
    from kernelgen.gpus import gpu_processes

    return gpu_processes()


def stop_services(everything: bool = False) -> list[str]:
    found = _survey()
    chosen = [f for f in found if isinstance(f.answer, Status) and (everything or f.ours)]
    stopped = client.stop_found(chosen)
    lines = [f"{f.path.name}: {f.answer}" for f in found if not isinstance(f.answer, Status)]
    lines += [f"{f.path.name}: {'stopped' if isinstance(a, Stopping) else a}" for f, a in stopped]
    left = sum(1 for f in found if isinstance(f.answer, Status) and f not in chosen)
    if not chosen:
        lines.append("no KernelGen service of this installation is running" if left else
                     "no KernelGen service is running for this user")
    if left:
        lines.append(f"{left} service(s) of another KernelGen installation or Python environment left running: "
                     "`kernelgen serve --stop --all` stops them too")
    return lines
