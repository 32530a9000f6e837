"""Live progress of a batch: one line per operator (state, device, current step, time) and one per
device (what it runs, how many it finished). On a terminal it redraws in place; in a log (CI, a
pipe) it prints one line when an operator starts and one when it ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from kernelgen.batch.engine import Event

STYLES = {"finished": "green", "skipped": "green", "failed": "red", "invalid": "yellow", "memory": "magenta", "error": "red",
          "running": "cyan"}


@dataclass
class OpLine:
    state: str = "queued"
    target: str = ""
    step: str = ""
    started: float | None = None
    seconds: float | None = None


@dataclass
class DeviceLine:
    running: str = ""
    done: int = 0
    names: list[str] = field(default_factory=list)


class BatchProgress:
    def __init__(self, console: Console, names: list[str], steps_in_log: bool = False):
        self.console = console
        self.ops = {n: OpLine() for n in names}
        self.devices: dict[str, DeviceLine] = {}
        self.steps_in_log = steps_in_log
        self._live: Live | None = None

    def __enter__(self) -> BatchProgress:
        if self.console.is_terminal:
            self._live = Live(get_renderable=self.render, console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def __call__(self, event: Event) -> None:
        line = self.ops.setdefault(event.op, OpLine())
        if event.kind != "done" and line.state not in ("queued", "running"):
            return  # a late step message (Ray delivers them asynchronously) after the end
        if event.target:
            line.target = event.target
        if event.kind == "start":
            line.state, line.started = "running", time.monotonic()
            dev = self.devices.setdefault(event.target, DeviceLine())
            dev.running = event.op
            self._print(f"[cyan]▶[/] {escape(event.op)} on {escape(event.target)}")
        elif event.kind == "step":
            line.step = event.message
            if self.steps_in_log:
                self._print(f"  [dim]{escape(event.op)}: {escape(event.message)}[/]")
        elif event.kind == "done" and event.result is not None:
            r = event.result
            line.state = "skipped" if r.skipped else r.status
            line.step = r.reason or ("finished in an earlier run" if r.skipped else "")
            line.seconds = r.seconds if not r.skipped else 0.0
            if event.target in self.devices:
                dev = self.devices[event.target]
                dev.done += 1
                dev.running = ""
            style = STYLES.get(line.state, "white")
            where = f" on {escape(event.target)}" if event.target and not r.skipped else ""
            why = f": {escape(line.step)}" if line.step else ""
            self._print(f"[{style}]■[/] {escape(event.op)} {line.state}{where}{why}")

    def _print(self, text: str) -> None:
        if self._live is None:
            self.console.print(text, highlight=False)

    def render(self) -> Group:
        ops = Table(title="operators", expand=False)
        for c in ("operator", "state", "device", "step", "s"):
            ops.add_column(c, overflow="ellipsis", no_wrap=c != "step")
        for name, ln in self.ops.items():
            secs = ln.seconds if ln.seconds is not None else (time.monotonic() - ln.started if ln.started else None)
            ops.add_row(escape(name), f"[{STYLES.get(ln.state, 'white')}]{ln.state}[/]", escape(ln.target or "—"), escape(ln.step[-90:] or "—"),
                        "—" if secs is None else f"{secs:.0f}")
        devices = Table(title="devices")
        for c in ("device", "running", "finished"):
            devices.add_column(c)
        for label, dev in sorted(self.devices.items()):
            devices.add_row(label, dev.running or "idle", str(dev.done))
        return Group(ops, devices)
