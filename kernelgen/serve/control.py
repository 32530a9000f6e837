"""`kernelgen serve`: start the service for a device now, show every service of this user, stop them.
Each returns the lines the command prints."""

from __future__ import annotations

from kernelgen.errors import ServiceError
from kernelgen.serve import client
from kernelgen.verify.judge.service.place import PlaceError, service_key
from kernelgen.verify.judge.service.wire import Status, Stopping


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


def service_status() -> list[str]:
    try:
        found = client.status_all()
    except PlaceError as e:
        raise ServiceError(str(e)) from None
    if not found:
        return ["no KernelGen service is running for this user"]
    current = {}
    lines = []
    for path, answer in found:
        if not isinstance(answer, Status):
            lines.append(f"{path.name}: {answer}")
            continue
        key = current.setdefault(answer.device, _key(answer.device))
        stale = "" if answer.key == key else " [another KernelGen installation or environment: not used by this one]"
        state = f"running {answer.running}" if answer.running else f"idle {answer.idle_for_s:.0f} s of {answer.idle_s:.0f} s"
        lines.append(f"{answer.device}: pid {answer.pid}, up {answer.uptime_s:.0f} s, {answer.jobs} command(s), {state}, "
                     f"workers {'forked from a warm process' if answer.fork_server else 'started fresh'}{stale}")
        for w in answer.warm:
            lines.append(f"  warm worker pid {w.pid}: {w.operator}, kernel {w.kernel_sha256[:12]}, idle {w.idle_for_s:.0f} s")
    return lines


def _key(kind: str) -> str:
    try:
        return service_key(kind)
    except PlaceError:
        return ""


def stop_services() -> list[str]:
    try:
        stopped = client.stop_all()
    except PlaceError as e:
        raise ServiceError(str(e)) from None
    if not stopped:
        return ["no KernelGen service is running for this user"]
    return [f"{path.name}: {'stopped' if isinstance(answer, Stopping) else answer}" for path, answer in stopped]
